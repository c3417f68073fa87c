"""PATH shims: record every command an agent runs, whatever the agent.

The shim directory holds one small bash script per executable name on the
original PATH (first occurrence wins). Each script bakes in the absolute path of
the real binary, unsets secrets, runs the binary, and appends ONE record to the
file named by ``$REPLAYBOOK_SHIM_LOG``. Shims are stateless apart from env vars,
so a directory is built once per (PATH, scrub list) and reused from a cache.

Log format, one record per finished command, every field NUL-terminated and
written by a single ``printf`` (argv cannot contain NUL, so any bytes survive)::

    RB2 \\0 start \\0 end \\0 rc \\0 depth \\0 tool \\0 cwd \\0 argc \\0 argv[0] \\0 ... argv[argc-1] \\0

``tool`` is ``$REPLAYBOOK_TOOL_CALL``: the tool call id an agent adapter set, or
``shell:…`` for a shell started through ``$SHELL``, which logs its own argv once
as ``RBS \\0 id \\0 argc \\0 argv…``; empty outside both (logs from before this
field are ``RB1`` records without it).
``start``/``end`` are ``$EPOCHREALTIME`` (seconds, microseconds; a ``,`` decimal
mark is accepted), ``depth`` counts the shims enclosing this one (0: the agent
ran it directly), ``argv[0]`` is the bare command name. Commands still running
when their process group is killed leave no record.

Nothing is skipped: a shim calls only bash builtins and runs its real binary by
absolute path, so even ``bash``, ``env`` and ``git`` are safe to shim.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from bot import settings
from bot.errors import BadInput
from bot.replay.trace.events import CommandEvent, ShellEvent, relative_cwd

LOG_ENV = "REPLAYBOOK_SHIM_LOG"
# Inside an isolated sandbox the log is a write-only FIFO the harness reads, bound
# read-only here: the agent can neither truncate it nor unset a variable to silence it.
FIXED_LOG = "/run/replaybook/commands"
DEPTH_ENV = "REPLAYBOOK_SHIM_DEPTH"
TOOL_ENV = "REPLAYBOOK_TOOL_CALL"  # set by an agent adapter per tool call, or by the $SHELL wrapper
CACHE_ENV = "REPLAYBOOK_CACHE_DIR"
DEFAULT_SCRUB: tuple[str, ...] = (
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "OPENAI_API_KEY",
)
_VERSION = "rb-shims-4"  # bump when the script templates change: it is part of the cache key
_MARKER = ".replaybook-shims"
_KEEP_CACHED = 8
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# `-p` stops bash from reading BASH_ENV and importing exported functions, so an
# agent's environment cannot change what a shim does.
_SHIM = """#!{bash} -p
# Replaybook shim: record this command, then exit with its real exit code.
__rb_t0=$EPOCHREALTIME
[[ ${{{depth}-}} =~ ^[0-9]+$ ]] || {depth}=0
__rb_d=${depth}
export {depth}=$((__rb_d + 1))
{unset}
{real} "$@"
__rb_rc=$?
__rb_log={fixed_log}
[[ -p $__rb_log ]] || __rb_log=${{{log}-}}
if [[ -n $__rb_log ]]; then
  printf '%s\\0' RB2 "$__rb_t0" "$EPOCHREALTIME" "$__rb_rc" "$__rb_d" "${{{tool}-}}" "$PWD" "$(($# + 1))" {name} "$@" >>"$__rb_log" 2>/dev/null
fi
exit $__rb_rc
"""

# For agents that start `$SHELL` by absolute path (Claude Code): scrub, make sure
# the shims lead PATH (the agent itself may run without them), then become bash.
# A shell started with no tool call id gets one of its own, and logs its argv
# once, so its commands can be matched to the tool call whose command it runs.
_SHELL = """#!{bash} -p
{unset}
case ":$PATH:" in *:{bin}:*) ;; *) PATH={bin}${{PATH:+:$PATH}}; export PATH ;; esac
if [[ -z ${{{tool}-}} ]]; then
  export {tool}="shell:$$:$EPOCHREALTIME"
  __rb_log={fixed_log}
  [[ -p $__rb_log ]] || __rb_log=${{{log}-}}
  [[ -n $__rb_log ]] && printf '%s\\0' RBS "${tool}" "$#" "$@" >>"$__rb_log" 2>/dev/null
  unset __rb_log
fi
exec {bash} "$@"
"""


@dataclass(frozen=True)
class ShimSet:
    """A built shim directory (``bin_dir`` None: none built). ``path_value`` is what PATH should be for the agent."""

    bin_dir: Path | None
    shell: Path | None  # the `$SHELL` wrapper
    bash: str  # the real bash
    base_path: str  # the original PATH, without any shim directory
    scrub: tuple[str, ...]

    @property
    def path_value(self) -> str:
        if self.bin_dir is None:
            return self.base_path
        return f"{self.bin_dir}{os.pathsep}{self.base_path}" if self.base_path else str(self.bin_dir)


def default_cache_dir() -> Path:
    if settings.get(CACHE_ENV):
        return Path(settings.get(CACHE_ENV))
    xdg = settings.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "replaybook"


def build_shims(
    path: str | None = None,
    scrub: Sequence[str] = DEFAULT_SCRUB,
    *,
    cache_dir: Path | None = None,
    build: bool = True,
) -> ShimSet:
    """Return the shim set for ``path`` (default: $PATH), building it once.

    ``build=False``: PATH's folders and the harness's bash only, no shim (``bin_dir`` and ``shell`` None): under
    the kernel trace no command runs through a shim, and keying the cache (a stat of every PATH folder, a
    hash) and touching it were paid at every trial for a folder nothing read.
    """
    scrub = tuple(sorted(set(scrub)))
    bad = [n for n in scrub if not _NAME_RE.match(n)]
    if bad:
        raise BadInput(f"scrub: {bad[0]!r} is not an environment variable name; use letters, digits and _")
    dirs = _path_dirs((settings.get("PATH") or "") if path is None else path)
    base_path = os.pathsep.join(dirs)
    from bot.replay.sandbox import host_tools

    bash = host_tools.find("bash")  # the harness's own, never one a toolchain put first on ``path``
    if not bash:
        raise BadInput(f"PATH has no bash; command capture needs bash 5 or newer on PATH ({host_tools.trusted_path()})")
    if not build:
        return ShimSet(None, None, bash, base_path, scrub)
    root = (cache_dir or default_cache_dir()) / "shims"
    final = root / _cache_key(dirs, scrub, bash)
    if not (final / "bin" / _MARKER).exists():
        _build(final, dirs, scrub, bash)
    touch(final)
    return ShimSet(final / "bin", final / "shell" / "bash", bash, base_path, scrub)


def _path_dirs(path: str) -> list[str]:
    """Absolute, existing, de-duplicated PATH entries that are not shim dirs themselves."""
    seen: list[str] = []
    for d in path.split(os.pathsep):
        # Relative entries depend on the cwd, so a baked absolute path would lie.
        if not os.path.isabs(d) or d in seen or not os.path.isdir(d):
            continue
        if os.path.exists(os.path.join(d, _MARKER)):
            continue
        seen.append(d)
    return seen


def _cache_key(dirs: list[str], scrub: tuple[str, ...], bash: str) -> str:
    # A directory's mtime changes when an entry is added, removed or renamed,
    # which is exactly when the set of shims must change.
    stamps = []
    for d in dirs:
        st = os.stat(d)
        stamps.append([d, st.st_ino, st.st_mtime_ns])
    blob = json.dumps([_VERSION, bash, scrub, stamps]).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def _executables(dirs: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for d in dirs:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if e.name in found or e.name.startswith("."):
                continue
            try:
                if e.is_file() and os.access(e.path, os.X_OK):
                    found[e.name] = e.path
            except OSError:
                continue
    return found


def _build(final: Path, dirs: list[str], scrub: tuple[str, ...], bash: str) -> None:
    _check_bash(bash)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    try:
        unset = f"unset {' '.join(scrub)}" if scrub else ":"
        (tmp / "bin").mkdir()
        (tmp / "shell").mkdir()
        for name, real in _executables(dirs).items():
            _write_exec(tmp / "bin" / name, _SHIM.format(
                bash=bash, depth=DEPTH_ENV, log=LOG_ENV, tool=TOOL_ENV, unset=unset, fixed_log=shlex.quote(FIXED_LOG),
                real=shlex.quote(real), name=shlex.quote(name),
            ))
        shell = _SHELL.format(bash=bash, unset=unset, bin=shlex.quote(str(final / "bin")), tool=TOOL_ENV, log=LOG_ENV,
                              fixed_log=shlex.quote(FIXED_LOG))
        _write_exec(tmp / "shell" / "bash", shell)
        (tmp / "bin" / _MARKER).write_text(json.dumps({"dirs": dirs, "scrub": scrub}))
        os.rename(tmp, final)  # atomic: readers see a complete directory or none
    except OSError:
        if not (final / "bin" / _MARKER).exists():
            raise
        # Another run built the same key first; theirs is identical.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune(final.parent, keep=final)


def _write_exec(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    try:
        os.write(fd, text.encode("utf-8", errors="surrogateescape"))
        os.fchmod(fd, 0o755)
    finally:
        os.close(fd)


def _check_bash(bash: str) -> None:
    out = subprocess.run(
        [bash, "-c", "echo ${BASH_VERSINFO[0]}"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not out.isdigit() or int(out) < 5:
        raise BadInput(
            f"{bash} is bash {out or '?'}; command capture needs bash 5 or newer "
            "($EPOCHREALTIME); put a newer bash first on PATH"
        )


TOUCH_EVERY_S = 600  # well inside the hour the pruners leave alone: a set in use is never pruned


def touch(path: Path) -> None:
    """Mark a cache entry as used, for least-recently-used pruning (``_prune`` here, ``baseline._prune``), when
    its mark is older than ``TOUCH_EVERY_S``: done at every trial, it was a metadata write to the cache's
    file system (a disk) for a mark that had not aged."""
    try:
        if time.time() - os.stat(path).st_mtime > TOUCH_EVERY_S:
            os.utime(path)
    except OSError:
        pass


def _prune(root: Path, *, keep: Path) -> None:
    """Drop the least recently used shim sets beyond a few; PATH changes leave old ones behind."""
    entries = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p != keep]
    entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[_KEEP_CACHED - 1 :]:
        if time.time() - old.stat().st_mtime > 3600:  # never pull one from under a running replay
            shutil.rmtree(old, ignore_errors=True)


def read_shim_log(path: Path, root: Path) -> list[CommandEvent]:
    """The commands in a shim log, oldest start first; a missing log means none ran."""
    return [e for e in _read(path, root) if isinstance(e, CommandEvent)]


def read_shells(path: Path) -> list[ShellEvent]:
    """The shells the agent started through ``$SHELL``, which ``checks.attribute`` matches to tool calls."""
    return [e for e in _read(path, Path("/")) if isinstance(e, ShellEvent)]


def _read(path: Path, root: Path) -> list[CommandEvent | ShellEvent]:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    return parse_shim_log(data, root)


def parse_shim_log(data: bytes, root: Path) -> list[CommandEvent | ShellEvent]:
    fields = data.split(b"\0")
    events: list[CommandEvent | ShellEvent] = []
    i = 0
    while i < len(fields):
        if fields[i] not in (b"RB1", b"RB2", b"RBS"):
            i += 1  # resynchronise after a damaged record (e.g. disk full)
            continue
        parse = _parse_shell if fields[i] == b"RBS" else _parse_record
        event, i = parse(fields, i, root)
        if event is not None:
            events.append(event)
    events.sort(key=lambda e: e.started_at if isinstance(e, CommandEvent) else _EPOCH)
    return events


_EPOCH = datetime.fromtimestamp(0, tz=timezone.utc)


def _parse_shell(fields: list[bytes], i: int, root: Path) -> tuple[ShellEvent | None, int]:
    """``RBS \\0 id \\0 argc \\0 argv[1] ... \\0``: a shell the agent started through ``$SHELL``."""
    try:
        argc = int(fields[i + 2])
    except (ValueError, IndexError):
        return None, i + 1
    argv = fields[i + 3 : i + 3 + argc]
    if len(argv) != argc:
        return None, i + 1
    return ShellEvent(id=_text(fields[i + 1]), argv=[_text(a) for a in argv]), i + 3 + argc


def _parse_record(fields: list[bytes], i: int, root: Path) -> tuple[CommandEvent | None, int]:
    tool = fields[i] == b"RB2"  # RB1, before commands were attributed, has no tool call field
    at = i + 1 if tool else i
    try:
        t0, t1 = (float(f.replace(b",", b".")) for f in fields[i + 1 : i + 3])
        rc, depth, argc = int(fields[i + 3]), int(fields[i + 4]), int(fields[at + 6])
        cwd = fields[at + 5]
        tool_call = _text(fields[i + 5]) if tool else ""
    except (ValueError, IndexError):
        return None, i + 1
    argv = fields[at + 7 : at + 7 + argc]
    if len(argv) != argc:
        return None, i + 1
    event = CommandEvent(
        argv=[_text(a) for a in argv],
        cwd=relative_cwd(_text(cwd), root),
        exit_code=rc,
        duration_ms=round((t1 - t0) * 1000, 3),
        started_at=datetime.fromtimestamp(t0, tz=timezone.utc),
        depth=depth,
        tool_call=tool_call if tool else None,
    )
    return event, at + 7 + argc


def _text(raw: bytes) -> str:
    # backslashreplace keeps odd bytes visible and the result JSON-safe.
    return raw.decode("utf-8", errors="backslashreplace")
