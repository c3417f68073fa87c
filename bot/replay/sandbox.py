"""The replay sandbox: a throwaway copy of a fixture repo where an agent runs.

Layout of one sandbox (all under one temp dir, removed on exit)::

    <base>/root           the agent's working tree (a normal git repo, own .git)
    <base>/fixture        pristine copy of the fixture, for `unchanged`
    <base>/baseline.git   baseline commit, kept OUTSIDE root so `diff` survives
                          `rm -rf .git` or even `rm -rf root`
    <base>/home, /tmp     private HOME and TMPDIR
    <base>/commands.log   the PATH shims' log (see bot.replay.shims)
"""

from __future__ import annotations

import functools
import os
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from bot.errors import BadInput
from bot.replay import shims
from bot.replay.trace import CommandEvent

__all__ = ["Completed", "FileChange", "Sandbox", "SandboxDiff"]

TMP_ENV = "REPLAYBOOK_TMPDIR"
_GIT_ID = {
    "GIT_AUTHOR_NAME": "Replaybook",
    "GIT_AUTHOR_EMAIL": "replaybook@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "Replaybook",
    "GIT_COMMITTER_EMAIL": "replaybook@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}
# The agent's own git identity, so its commits do not fail on a harness artefact.
_AGENT_GITCONFIG = "[user]\n\tname = Replaybook Agent\n\temail = agent@replaybook.invalid\n"
# Login shells read /etc/profile, which resets PATH on Debian; put the shims back.
_PROFILE = (
    "__rb_shims={bin}\n"
    'case ":$PATH:" in *":$__rb_shims:"*) ;; *) PATH="$__rb_shims:$PATH"; export PATH ;; esac\n'
    "unset __rb_shims\n"
)


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str  # A, M or D
    patch: str  # this file's part of the unified diff


@dataclass(frozen=True)
class SandboxDiff:
    patch: str
    files: list[FileChange] = field(default_factory=list)

    def added_lines(self) -> list[tuple[str, str]]:
        """(path, line) for each added line, without the leading '+' (for diff_excludes)."""
        out = []
        for f in self.files:
            in_hunk = False  # before the first @@, '+++ b/x' is a header, not content
            for line in f.patch.splitlines():
                in_hunk = in_hunk or line.startswith("@@")
                if in_hunk and line.startswith("+"):
                    out.append((f.path, line[1:]))
        return out


# -- processes ----------------------------------------------------------------
_TERM_GRACE_S = 0.5  # between SIGTERM and SIGKILL on timeout
_DRAIN_S = 0.5  # how long to keep reading after the group is gone (a setsid child may hold a pipe)


@dataclass(frozen=True)
class Completed:
    rc: int  # negative: killed by that signal (as subprocess reports it)
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False


class _Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int):
        self.cap, self.chunks, self.kept, self.size = cap, [], 0, 0

    def add(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += len(self.chunks[-1])
        self.size += len(data)

    @property
    def truncated(self) -> bool:
        return self.size > self.cap

    def text(self) -> str:
        out = b"".join(self.chunks).decode("utf-8", errors="replace")
        if self.truncated:
            out += f"\n[replaybook: output truncated at {self.cap} of {self.size} bytes]\n"
        return out


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    stdin: str | bytes | None = None,
    output_cap: int = 1 << 20,
) -> Completed:
    """Run in a new session; on timeout and after exit, kill the whole process group."""
    start = time.monotonic()
    stdin_file = _stdin_file(stdin)
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdin=stdin_file or subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as err:  # missing program, or the agent deleted the sandbox root
        return Completed(127, "", f"replaybook: cannot start {argv[0]!r}: {err}\n", False, 0.0)
    finally:
        if stdin_file:
            stdin_file.close()
    out, err = _Capture(output_cap), _Capture(output_cap)
    timed_out = _pump(proc, {proc.stdout: out, proc.stderr: err}, start + timeout_s)
    return Completed(
        proc.returncode, out.text(), err.text(), timed_out, round(time.monotonic() - start, 4),
        out.truncated, err.truncated,
    )


def _stdin_file(stdin: str | bytes | None):
    # A temp file, not a pipe: a child that never reads stdin cannot block us.
    if stdin is None:
        return None
    f = tempfile.TemporaryFile()
    f.write(stdin.encode() if isinstance(stdin, str) else stdin)
    f.seek(0)
    return f


def _pump(proc: subprocess.Popen, captures: dict, deadline: float) -> bool:
    """Read output until the pipes close; returns True when the deadline killed the process."""
    sel = selectors.DefaultSelector()
    for pipe in captures:
        sel.register(pipe, selectors.EVENT_READ)
    timed_out, ended_at = False, None
    while sel.get_map():
        now = time.monotonic()
        if ended_at is None and proc.poll() is not None:
            _kill_group(proc.pid)  # stray background children would hold the pipes open
            ended_at = now
        elif ended_at is None and now >= deadline:
            timed_out, ended_at = True, now
            _terminate(proc)
        if ended_at is not None and now - ended_at > _DRAIN_S:
            break
        for key, _ in sel.select(timeout=0.02):
            data = os.read(key.fd, 65536)
            if data:
                captures[key.fileobj].add(data)
            else:
                sel.unregister(key.fileobj)
    sel.close()
    for pipe in captures:
        pipe.close()
    if proc.poll() is None:  # it closed its pipes but kept running
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _terminate(proc)
    _kill_group(proc.pid)
    return timed_out


def _terminate(proc: subprocess.Popen) -> None:
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=_TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc.pid)
    proc.wait()


def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Sandbox:
    """Context manager; see the module docstring for what it holds."""

    def __init__(
        self,
        fixture: Path,
        *,
        env_allow: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        scrub: Sequence[str] = shims.DEFAULT_SCRUB,
        shim_cache: Path | None = None,
        tmp_root: Path | None = None,
    ):
        self.fixture = Path(fixture)
        self.env_allow = tuple(env_allow)
        self.extra_env = dict(extra_env or {})
        self.scrub = tuple(scrub)
        self.shim_cache = shim_cache
        # Where the sandbox's temp dir goes; a tmpfs here makes setup and cleanup far cheaper.
        self.tmp_root = tmp_root or os.environ.get(TMP_ENV) or None
        self.base: Path | None = None

    # -- lifecycle ---------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        if not self.fixture.is_dir():
            raise BadInput(f"{self.fixture}: fixture folder not found; check the scenario's `repo` path")
        _check_fixture(self.fixture)
        self.shims = shims.build_shims(os.environ.get("PATH", ""), self.scrub, cache_dir=self.shim_cache)
        self.base = Path(tempfile.mkdtemp(prefix="replaybook-", dir=self.tmp_root))
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.base is not None and os.path.lexists(self.base):
            _rmtree(self.base)

    def _setup(self) -> None:
        _copy_fixture(self.fixture, self.pristine)
        _copy_fixture(self.pristine, self.root)
        for d in (self.home, self.tmpdir):
            d.mkdir()
        (self.home / ".gitconfig").write_text(_AGENT_GITCONFIG)
        profile = _PROFILE.format(bin=shlex.quote(str(self.shims.bin_dir)))
        for name in (".bash_profile", ".bashrc"):
            (self.home / name).write_text(profile)
        self._git_env = self._make_git_env()
        self.baseline = self._commit_baseline()

    # -- paths -------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self._base / "root"

    @property
    def pristine(self) -> Path:
        return self._base / "fixture"

    @property
    def home(self) -> Path:
        return self._base / "home"

    @property
    def tmpdir(self) -> Path:
        return self._base / "tmp"

    @property
    def shim_log(self) -> Path:
        return self._base / "commands.log"

    @property
    def _base(self) -> Path:
        if self.base is None:
            raise RuntimeError("use the Sandbox inside a `with` block")
        return self.base

    # -- environment and processes ----------------------------------------
    def env(self, *, record: bool = True, path_shims: bool = True) -> dict[str, str]:
        """The agent's environment, built from scratch.

        ``record=False`` for checks, so they stay out of the agent's command log.
        ``path_shims=False`` for an agent that needs a secret and is found through
        PATH or an ``#!/usr/bin/env node`` line: the shims would scrub the secret
        from the agent itself. Its ``$SHELL`` still puts the shims first, so every
        command it runs through its shell is recorded and scrubbed.
        """
        env = {
            "PATH": self.shims.path_value if path_shims else self.shims.base_path,
            "HOME": str(self.home),
            "TMPDIR": str(self.tmpdir),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "SHELL": str(self.shims.shell),
        }
        if record:
            env[shims.LOG_ENV] = str(self.shim_log)
        env.update({k: os.environ[k] for k in self.env_allow if k in os.environ})
        env.update(self.extra_env)
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        cwd: str | None = None,
        record: bool = True,
        path_shims: bool = True,
        output_cap: int = 1 << 20,
    ) -> Completed:
        """Run ``argv`` in the sandbox (``cwd`` relative to root), killing its whole group at the end."""
        workdir = self.root / _relative(cwd) if cwd else self.root
        return run_process(
            list(argv),
            cwd=workdir,
            env=dict(env) if env is not None else self.env(record=record, path_shims=path_shims),
            stdin=stdin,
            timeout_s=timeout_s,
            output_cap=output_cap,
        )

    def which(self, name: str) -> str | None:
        """The real program ``name`` on the original PATH, never a shim."""
        return shutil.which(name, path=self.shims.base_path)

    def commands(self) -> list[CommandEvent]:
        return shims.read_shim_log(self.shim_log, self.root)

    # -- end state -----------------------------------------------------------
    def exists(self, path: str) -> bool:
        return os.path.lexists(self.root / _relative(path))

    def unchanged(self, path: str) -> bool:
        """True when ``path`` is byte-identical to the fixture (both absent counts as unchanged)."""
        rel = _relative(path)
        return _same(self.pristine / rel, self.root / rel)

    def diff(self) -> SandboxDiff:
        """Unified diff of the final tree against the baseline, untracked files included."""
        index = self._base / "diff.index"
        shutil.copyfile(self._base / "baseline.index", index)
        root_ok = self.root.is_dir() and not self.root.is_symlink()
        work = self.root if root_ok else self._empty_dir()  # the agent may have deleted its root
        env = {**self._git_env, "GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(work)}
        # --ignore-errors: a file the agent made unreadable must not cost us the whole diff.
        self._git(["add", "-A", "--ignore-errors", "--", "."], env, cwd=work, ok_codes=(0, 1))
        common = ["diff", "--cached", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv"]
        names = self._git([*common, "--name-status", "-z", self.baseline], env, cwd=work)
        patch = self._git([*common, "--src-prefix=a/", "--dst-prefix=b/", self.baseline], env, cwd=work)
        return SandboxDiff(patch=patch, files=_file_changes(names, patch))

    # -- git plumbing ------------------------------------------------------
    def _make_git_env(self) -> dict[str, str]:
        return {
            "PATH": self.shims.base_path,
            "HOME": str(self.home),
            "LC_ALL": "C",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_DIR": str(self._base / "baseline.git"),
            "GIT_WORK_TREE": str(self.root),
            "GIT_INDEX_FILE": str(self._base / "baseline.index"),
            **_GIT_ID,
        }

    def _git(
        self, args: list[str], env: Mapping[str, str], cwd: Path | None = None, ok_codes=(0,)
    ) -> str:
        proc = subprocess.run(
            [self._git_bin, *args], env=dict(env), cwd=cwd or self._base,
            capture_output=True, check=False,
        )
        if proc.returncode not in ok_codes:
            err = proc.stderr.decode(errors="replace").strip()
            raise RuntimeError(f"git {' '.join(args[:2])} failed in the sandbox: {err}")
        return proc.stdout.decode("utf-8", errors="replace")

    @functools.cached_property
    def _git_bin(self) -> str:
        git = shutil.which("git", path=self.shims.base_path)
        if not git:
            raise BadInput("git is not on PATH; the replay sandbox needs git to record the baseline")
        return git

    def _commit_baseline(self) -> str:
        env = self._git_env
        gitdir = self._base / "baseline.git"
        # An empty --template means no sample hooks and nothing from the user's templates.
        init_env = {k: v for k, v in env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
        self._git(["init", "-q", "--bare", "--template=", "--initial-branch=main", str(gitdir)], init_env)
        # -f: a file the fixture's .gitignore hides is still part of the fixture.
        self._git(["add", "-A", "-f", "--", "."], env, cwd=self.root)
        self._git(["commit", "-q", "--no-verify", "--no-gpg-sign", "--allow-empty", "-m", "replaybook baseline"], env, cwd=self.root)
        sha = (gitdir / "refs" / "heads" / "main").read_text().strip()  # saves a git process
        self._give_agent_git(gitdir)
        return sha

    def _give_agent_git(self, gitdir: Path) -> None:
        """Give root its own .git: an ordinary, clean checkout of the baseline commit.

        Objects are borrowed through `objects/info/alternates` rather than copied:
        one loose object costs a folder, and folders are what make setup slow.
        """
        agent_git = self.root / ".git"
        shutil.copytree(gitdir, agent_git, symlinks=True, ignore=lambda d, n: ["objects"] if Path(d) == gitdir else [])
        (agent_git / "objects" / "info").mkdir(parents=True)
        (agent_git / "objects" / "pack").mkdir()
        (agent_git / "objects" / "info" / "alternates").write_text(f"{gitdir / 'objects'}\n")
        config = (agent_git / "config").read_text().replace("bare = true", "bare = false")
        (agent_git / "config").write_text(config)
        # The baseline index already carries root's stat data, so `git status` is clean and fast.
        shutil.copyfile(self._base / "baseline.index", agent_git / "index")

    def _empty_dir(self) -> Path:
        empty = self._base / "empty"
        empty.mkdir(exist_ok=True)
        return empty


def _relative(path: str) -> str:
    norm = os.path.normpath(path)
    if os.path.isabs(path) or norm == ".." or norm.startswith("../"):
        raise BadInput(f"{path!r}: paths in checks are relative to the repo root and stay inside it")
    return norm


def _check_fixture(fixture: Path) -> None:
    """Refuse links that leave the fixture and special files copying would hang on."""
    top = os.path.realpath(fixture)
    for dirpath, dirnames, filenames in os.walk(fixture):
        if os.path.relpath(dirpath, fixture) == "." and ".git" in dirnames:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                _check_link(fixture, top, full)
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise BadInput(f"{full}: fixtures may hold only files, folders and symlinks; remove it")


def _check_link(fixture: Path, top: str, link: str) -> None:
    target = os.readlink(link)
    rel_dir = os.path.relpath(os.path.dirname(link), fixture)
    lexical = os.path.normpath(os.path.join(rel_dir, target))
    real = os.path.realpath(link)
    inside = real == top or real.startswith(top + os.sep)
    if os.path.isabs(target) or lexical == ".." or lexical.startswith("../") or not inside:
        raise BadInput(
            f"{fixture}: symlink {os.path.relpath(link, fixture)} -> {target} points outside the "
            "fixture; make it a relative link to a path inside the fixture, or copy the file in"
        )


def _copy_fixture(src: Path, dst: Path) -> None:
    # The fixture's own .git (if any) is not part of the scenario; the sandbox makes its own.
    shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: [".git"] if Path(d) == src else [])


def _same(a: Path, b: Path) -> bool:
    la, lb = os.path.lexists(a), os.path.lexists(b)
    if not (la and lb):
        return la == lb
    sa, sb = os.lstat(a), os.lstat(b)
    if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
        return False
    if stat.S_ISLNK(sa.st_mode):
        return os.readlink(a) == os.readlink(b)
    if stat.S_ISDIR(sa.st_mode):
        names = set(os.listdir(a)) | set(os.listdir(b))
        names.discard(".git")  # the agent's repo is harness state, not fixture content
        return all(_same(a / n, b / n) for n in names)
    if sa.st_size != sb.st_size:
        return False
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _file_changes(name_status: str, patch: str) -> list[FileChange]:
    fields = name_status.split("\0")
    pairs = [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]
    chunks = _split_patch(patch)
    # Both listings come from the same diff, sorted by path, so they line up.
    if len(chunks) != len(pairs):
        chunks = [""] * len(pairs)
    return [
        FileChange(path=path, status="M" if status == "T" else status, patch=chunk)
        for (status, path), chunk in zip(pairs, chunks)
    ]


def _split_patch(patch: str) -> list[str]:
    chunks: list[list[str]] = []
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git ") or not chunks:
            chunks.append([])
        chunks[-1].append(line)
    return ["".join(c) for c in chunks if c]


def _rmtree(path: Path) -> None:
    """Remove everything, even read-only files and folders an agent left behind."""

    def retry(func, p, _exc):  # noqa: ANN001 - shutil's onerror signature
        for target in (os.path.dirname(p), p):
            if os.path.isdir(target) and not os.path.islink(target):
                try:
                    os.chmod(target, stat.S_IRWXU)
                except OSError:
                    pass
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)
    if os.path.lexists(path):  # a last pass, e.g. after a chmod 000 deep inside
        shutil.rmtree(path, ignore_errors=True)
