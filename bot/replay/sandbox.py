"""The replay sandbox: a throwaway copy of a fixture repo where an agent runs.

Layout of one sandbox (all under one temp dir, removed on exit)::

    <base>/root           the agent's working tree (a normal git repo, own .git)
    <base>/fixture        pristine copy of the fixture, for `unchanged`
    <base>/baseline.git   baseline commit, kept OUTSIDE root so `diff` survives
                          `rm -rf .git` or even `rm -rf root`
    <base>/home, /tmp     private HOME and TMPDIR
    <base>/commands.fifo  where the PATH shims write (see bot.replay.shims);
                          the harness drains it into <base>/commands.log
    <base>/ep-PORT.sock   the bridges to the gateway and services

Every process runs through an isolation backend (``bot.replay.isolation``):
inside, only root, home and tmp are writable and visible of all this; the
pristine copy, the baseline and the log belong to the harness alone.
"""

from __future__ import annotations

import functools
import os
import select
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from bot import settings
from bot.errors import BadInput, InfrastructureError
from bot.replay import baseline as baseline_mod
from bot.replay import host_tools, isolation, launchers, shims
from bot.replay.bridge import UnixBridge
from bot.replay.host_tools import GIT_HARDENED
from bot.replay.process import Completed, Watch, run_process, tree_bytes
from bot.replay.toolchain import HOST, Toolchain
from bot.replay.trace import CommandEvent

__all__ = ["Completed", "FileChange", "Sandbox", "SandboxDiff"]
PATCH_CAP = 8 << 20  # diff.patch keeps at most this much; the rest is counted
SETUP_TIMEOUT_S = 300
COMMAND_LOG_CAP = 32 << 20  # the shims' log kept per trial (and at most max_disk_mb); past it the trial is unscored

TMP_ENV = "REPLAYBOOK_TMPDIR"
_MAX_NESTED_GIT = 256
TMPFS_MIN_FREE = 4 << 30  # /dev/shm is used only with this much room (a sandbox may hold max_disk_mb)
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
        backend: str | isolation.Backend | None = None,
        toolchain: Toolchain = HOST,
        setup: Sequence[str] = (),
        limits: isolation.Limits | None = None,
        service_ports: Sequence[int] = (),
        reads: Sequence[str] = (),
    ):
        self.fixture = Path(fixture)
        self.env_allow = tuple(env_allow)
        self.extra_env = dict(extra_env or {})
        self.scrub = tuple(scrub)
        self.shim_cache = shim_cache
        # Where the sandbox's temp dir goes; a tmpfs here makes setup and cleanup far cheaper.
        self.tmp_root = tmp_root or settings.get(TMP_ENV) or _tmpfs()
        self.backend = backend if backend is not None and not isinstance(backend, str) else isolation.backend(backend)
        self.toolchain = toolchain
        self.setup_commands = tuple(setup)
        self.limits = limits or isolation.Limits()
        self.service_ports = tuple(service_ports)
        self.reads = tuple(reads)  # host folders the agent program needs (e.g. the Claude Code CLI)
        self.limit_hit: str | None = None  # the first bound a process broke: the trial is unscored
        self.base: Path | None = None
        self._bridges: dict[int, UnixBridge] = {}
        self._log: _CommandLog | None = None

    # -- lifecycle ---------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        if not self.fixture.is_dir():
            raise BadInput(f"{self.fixture}: fixture folder not found; check the scenario's `repo` path")
        _check_fixture(self.fixture)
        path = launchers.resolve_path(settings.get("PATH") or "", self.fixture)  # python, not pyenv's launcher
        if self.toolchain.bin_dir:
            path = self.toolchain.bin_dir + os.pathsep + path
        self.shims = shims.build_shims(path, self.scrub, cache_dir=self.shim_cache)
        _remove_stale_once(self.tmp_root or tempfile.gettempdir())
        self.base = Path(tempfile.mkdtemp(prefix="replaybook-", dir=self.tmp_root))
        (self.base / _OWNER).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for bridge in self._bridges.values():
            bridge.close()
        self._bridges.clear()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.base is not None and os.path.lexists(self.base):
            _rmtree(self.base)

    def _setup(self) -> None:
        os.chmod(self._base, 0o700)
        _copy_fixture(self.fixture, self.root)
        for d in (self.home, self.tmpdir):
            d.mkdir()
        (self.home / ".gitconfig").write_text(_AGENT_GITCONFIG)
        profile = _PROFILE.format(bin=shlex.quote(str(self.shims.bin_dir)))
        for name in (".bash_profile", ".bashrc"):
            (self.home / name).write_text(profile)
        self._git_env = self._make_git_env()
        self._ro = self._read_only_paths()
        self._log = _CommandLog(self._base / "commands.fifo", self.shim_log,
                                cap=min(COMMAND_LOG_CAP, self.limits.max_disk_bytes), on_full=self._log_full)
        self._run_setup()
        _copy_fixture(self.root, self.pristine)  # after setup: `unchanged` compares with what the agent got
        self.baseline = self._commit_baseline()
        self._ro = (*self._ro, str(self._base / "baseline.git" / "objects"), *self._borrowed)  # the agent's .git borrows them

    def _run_setup(self) -> None:
        for line in self.setup_commands:
            done = self.run(shlex.split(line), timeout_s=SETUP_TIMEOUT_S, record=False)
            if done.rc != 0 or done.timed_out or done.limit:
                why = done.limit or ("timed out" if done.timed_out else f"exit code {done.rc}")
                raise BadInput(f"{self.fixture}: setup command `{line}` failed ({why}): "
                               f"{(done.stderr or done.stdout).strip()[-300:]}; fix the scenario's `setup`")

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

    @property
    def isolated(self) -> bool:
        return self.backend.isolated

    def _read_only_paths(self) -> tuple[str, ...]:
        """Host folders bound read-only: the shims, the toolchain, what PATH and the agent need."""
        # The harness's own environment too (read-only, no secrets in it): agents and tests started
        # with sys.executable, and a checkout under /tmp, must work the same inside.
        # The base interpreter and the real location of every PATH tool too: a venv whose python links
        # into a masked home (pyenv's, uv's managed Pythons) must still start inside.
        interpreters = (sys.executable, getattr(sys, "_base_executable", sys.executable))
        wanted = [str(self.shims.bin_dir.parent), *self.toolchain.reads, *self.reads, sys.prefix,
                  os.path.realpath(sys.base_prefix)]
        # Only the harness's own PATH is followed: a toolchain's bin is the scenario's to fill.
        own = os.pathsep.join(d for d in self.shims.base_path.split(os.pathsep) if d != self.toolchain.bin_dir)
        wanted += isolation.tool_exposures(own, interpreters)
        out: list[str] = []
        for path in wanted:
            real = os.path.realpath(path)
            if os.path.exists(real) and real not in out:
                out.append(real)
        return tuple(out)

    # -- environment and processes ----------------------------------------
    def env(self, *, record: bool = True, path_shims: bool = True) -> dict[str, str]:
        """The agent's environment, built from scratch.

        ``record=False`` for checks, so they stay out of the agent's command log.
        ``path_shims=False`` leaves the shims off PATH (its ``$SHELL`` still puts
        them first, so every command run through a shell is recorded).
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
        if record and not self.isolated:
            env[shims.LOG_ENV] = str(self._log.fifo) if self._log else str(self.shim_log)
        if self.toolchain.bin_dir:
            env["VIRTUAL_ENV"] = os.path.dirname(self.toolchain.bin_dir)
        host = settings.environ()
        env.update({k: host[k] for k in self.env_allow if k in host})
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
        endpoints: Sequence[int] = (),
    ) -> Completed:
        """Run ``argv`` in the sandbox (``cwd`` relative to root); nothing it starts outlives it.

        ``endpoints`` are host 127.0.0.1 ports it may reach besides the
        scenario's services (the gateway, for an agent program).
        """
        workdir = self.root / _relative(cwd) if cwd else self.root
        env = dict(env) if env is not None else self.env(record=record, path_shims=path_shims)
        plan = isolation.Plan(
            rw=(str(self.root), str(self.home), str(self.tmpdir)), ro=self._ro,
            command_log=str(self._log.fifo) if record and self._log else None,
            endpoints=tuple((port, str(self._bridge(port).path)) for port in (*self.service_ports, *endpoints)),
            limits=self.limits,
        )
        if not workdir.is_dir():  # the agent removed it: as a missing program would, without a traceback
            return Completed(127, "", f"replaybook: {workdir} no longer exists\n", False, 0.0)
        lim = self.limits
        watch = Watch(max_procs=lim.max_procs, max_output_bytes=lim.max_output_bytes,
                      max_disk_bytes=lim.max_disk_bytes, disk=self.disk_bytes)
        done = self._start(argv, cwd=workdir, env=env, plan=plan, stdin=stdin, timeout_s=timeout_s,
                           output_cap=output_cap, watch=watch)
        if done.limit and self.limit_hit is None:
            self.limit_hit = done.limit
        return done

    def _log_full(self, cap: int) -> None:
        if self.limit_hit is None:
            self.limit_hit = (f"the command log passed {cap >> 20 or 1} MiB (max_disk_mb bounds it too); "
                              "the rest was not read")

    def disk_bytes(self, stop_at: int) -> int:
        """What the agent's writable folders hold, counted up to ``stop_at``."""
        return tree_bytes([str(self.root), str(self.home), str(self.tmpdir)], stop_at)

    def _bridge(self, port: int) -> UnixBridge:
        if port not in self._bridges:
            self._bridges[port] = UnixBridge(self._base / f"ep-{port}.sock", port).__enter__()
        return self._bridges[port]

    def which(self, name: str) -> str | None:
        """The real program ``name`` on the original PATH, never a shim."""
        return shutil.which(name, path=self.shims.base_path)

    def commands(self) -> list[CommandEvent]:
        if self._log is not None:
            self._log.drain()
        return shims.read_shim_log(self.shim_log, self.root)

    # -- end state -----------------------------------------------------------
    def exists(self, path: str) -> bool:
        return os.path.lexists(self.root / _relative(path))

    def unchanged(self, path: str) -> bool:
        """True when ``path`` is byte-identical to the fixture (both absent counts as unchanged; caches ignored)."""
        from bot.replay.checks import unchanged

        return unchanged(self.pristine, self.root, _relative(path))

    def diff(self) -> SandboxDiff:
        """Unified diff of the final tree against the baseline, untracked files included.

        git reads a tree the agent wrote, so it runs in the sandbox (root read-only)
        with every code path off (``GIT_HARDENED``), and every nested ``.git`` is
        covered by an empty stand-in: a nested repository is then an ordinary
        folder whose files are in the diff, and its config, hooks and fsmonitor
        are never read. A failure here is the harness's (InfrastructureError).
        """
        work_dir = self._base / "gitwork"
        shutil.rmtree(work_dir, ignore_errors=True)
        work_dir.mkdir()
        index, names = work_dir / "index", work_dir / "names"
        shutil.copyfile(self._base / "baseline.index", index)
        names.touch()
        root_ok = self.root.is_dir() and not self.root.is_symlink()
        work = self.root if root_ok else self._empty_dir()  # the agent may have deleted its root
        env = {**self._git_env, "GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(work)}
        common = "--no-renames --no-color --no-ext-diff --no-textconv --ignore-submodules=none"
        # --ignore-errors: a file the agent made unreadable must not cost us the whole diff.
        script = ('git=$1; base=$2; names=$3; shift 3\n'
                  '"$git" "$@" add -A --ignore-errors -- . 2>/dev/null; rc=$?; [ "$rc" -le 1 ] || exit "$rc"\n'
                  f'"$git" "$@" diff --cached {common} --name-status -z "$base" > "$names" || exit $?\n'
                  f'exec "$git" "$@" -c core.bigFileThreshold=1m diff --cached {common} --src-prefix=a/ '
                  '--dst-prefix=b/ "$base"\n')
        # Streamed and capped: a huge file the agent wrote costs at most PATCH_CAP of memory.
        done = self._harness_git(script, [self.baseline, str(names)], env=env, cwd=work,
                                 rw=(str(self._base / "baseline.git"), str(work_dir)), output_cap=PATCH_CAP)
        if done.rc != 0 or done.timed_out:
            raise InfrastructureError(f"git could not take the diff (exit {done.rc}): {done.stderr.strip()[-200:]}")
        name_status = names.read_text(encoding="utf-8", errors="replace")
        return SandboxDiff(patch=done.stdout, files=_file_changes(name_status, done.stdout))

    def _harness_git(self, script: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path,
                     rw: Sequence[str], output_cap: int = 1 << 20, timeout_s: float = 300) -> Completed:
        """``bash -c script <git> args… <hardened flags>`` for the harness's own git, in the sandbox when there is one.

        No agent process is alive by then; nothing but git runs, and git takes no
        command from the tree: nested ``.git`` entries are hidden, every config
        and attribute file is ours or absent, hooks and fsmonitor are off.
        """
        argv = [host_tools.require("bash", "the harness runs git through bash"), "-c", script, "replaybook-git",
                self._git_bin, *args, *GIT_HARDENED]
        if not self.isolated:  # --sandbox none: no stand-ins possible; the hardened flags still hold
            return run_process(argv, cwd=cwd, env=dict(env), timeout_s=timeout_s, output_cap=output_cap)
        hide = _nested_git(cwd)
        if hide is None:
            raise InfrastructureError(f"the tree holds more than {_MAX_NESTED_GIT} nested .git entries, "
                                      "or a .git that is a symbolic link; its diff cannot be taken safely")
        borrowed = tuple(p for p in self._ro if not p.startswith(str(self._base) + os.sep))
        plan = isolation.Plan(rw=tuple(rw), ro=(*borrowed, *self._borrowed, str(cwd)), hide=hide, limits=self.limits)
        return self._start(argv, cwd=cwd, env=env, plan=plan, timeout_s=timeout_s, output_cap=output_cap,
                           watch=Watch(max_procs=self.limits.max_procs, max_output_bytes=self.limits.max_output_bytes))

    def _start(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], plan: isolation.Plan,
               **run: object) -> Completed:
        """Start ``argv`` through the backend; a sandbox that never started is InfrastructureError, not an exit code.

        The launcher writes to the status fd once it runs inside, the namespaces and
        mounts up; without that byte, whatever failed was the sandbox, not the command.
        """
        status_r, status_w = os.pipe() if self.backend.name == "bwrap" else (-1, -1)
        try:
            host_argv, host_env = self.backend.command(argv, cwd=str(cwd), env=env, plan=plan,
                                                       status_fd=status_w if status_w >= 0 else None)
            done = run_process(host_argv, cwd=cwd, env=host_env, pass_fds=(status_w,) if status_w >= 0 else (), **run)
        finally:
            if status_w >= 0:
                os.close(status_w)
        if status_r >= 0:
            with os.fdopen(status_r, "rb") as status:
                started = status.read(1) == b"1"
            if not started and not done.timed_out and not done.limit:
                raise InfrastructureError(f"the sandbox could not start (bwrap exit {done.rc}): "
                                          f"{done.stderr.strip()[-200:]}")
        return done

    # -- git plumbing ------------------------------------------------------
    def _make_git_env(self) -> dict[str, str]:
        # HOME and XDG_CONFIG_HOME name a folder that does not exist: no ~/.config/git/ignore or
        # attributes the agent wrote into its home reaches the harness's git.
        nowhere = str(self._base / "no-home")
        return {
            "PATH": host_tools.trusted_path(),
            "HOME": nowhere,
            "XDG_CONFIG_HOME": nowhere,
            "LC_ALL": "C",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_ATTR_NOSYSTEM": "1",
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
            [self._git_bin, *GIT_HARDENED, *args], env=dict(env), cwd=cwd or self._base,
            capture_output=True, check=False,
        )
        if proc.returncode not in ok_codes:
            err = proc.stderr.decode(errors="replace").strip()
            raise InfrastructureError(f"git {' '.join(args[:2])} failed in the sandbox: {err[-300:]}")
        return proc.stdout.decode("utf-8", errors="replace")

    @functools.cached_property
    def _git_bin(self) -> str:
        return host_tools.require("git", "the replay sandbox needs git to record the baseline")

    def _commit_baseline(self) -> str:
        env = self._git_env
        gitdir = self._base / "baseline.git"
        # An empty --template means no sample hooks and nothing from the user's templates.
        init_env = {k: v for k, v in env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
        self._borrowed: tuple[str, ...] = ()
        if not self.setup_commands and not os.path.lexists(self.root / ".git"):
            # Built once per fixture content; this sandbox borrows its objects (bot.replay.baseline).
            tpl = baseline_mod.template(self.fixture, self.shim_cache or shims.default_cache_dir(), git=self._git_bin,
                                        env=init_env, copy=_copy_fixture)
            baseline_mod.borrow(tpl, gitdir, self._base / "baseline.index")
            self._borrowed = (os.path.realpath(tpl.objects),)
            self._give_agent_git(gitdir)
            return tpl.sha
        self._git(["init", "-q", "--bare", "--template=", "--initial-branch=main", str(gitdir)], init_env)
        if os.path.lexists(self.root / ".git"):  # setup made history: the agent keeps it
            return self._adopt_setup_history(gitdir)
        # setup ran in the tree: git on it runs in the sandbox too (see diff()).
        # -f: a file the fixture's .gitignore hides is still part of the fixture.
        script = ('git=$1; shift\n"$git" "$@" add -A -f -- . && exec "$git" "$@" commit -q --no-verify --no-gpg-sign '
                  '--allow-empty -m "replaybook baseline"\n')
        work_dir = self._base / "gitwork"
        work_dir.mkdir()
        env = {**env, "GIT_INDEX_FILE": str(work_dir / "index")}
        done = self._harness_git(script, [], env=env, cwd=self.root, rw=(str(gitdir), str(work_dir)),
                                 timeout_s=SETUP_TIMEOUT_S)
        if done.rc != 0:
            raise InfrastructureError(f"git could not record the baseline (exit {done.rc}): {done.stderr.strip()[-200:]}")
        os.replace(work_dir / "index", self._base / "baseline.index")
        sha = (gitdir / "refs" / "heads" / "main").read_text().strip()  # saves a git process
        self._give_agent_git(gitdir)
        return sha

    def _adopt_setup_history(self, gitdir: Path) -> str:
        """Commit the baseline on top of the history setup made, and take a copy of it.

        The harness never runs git on a repository the scenario made (its
        config could name commands): git runs in the sandbox, and the harness
        reads only the bundle it writes.
        """
        bundle = self.tmpdir / ".replaybook-baseline.bundle"
        script = ('git add -A -f && git -c core.hooksPath=/dev/null commit -q --no-verify --no-gpg-sign --allow-empty '
                  '-m "replaybook baseline" && git bundle create -q "$1" HEAD')
        env = {**self.env(record=False), **_GIT_ID}
        done = self.run(["bash", "-c", script, "baseline", str(bundle)], timeout_s=SETUP_TIMEOUT_S, env=env)
        if done.rc != 0:
            raise BadInput(f"{self.fixture}: the repository that `setup` made cannot take the baseline commit: "
                           f"{done.stderr.strip()[-300:]}; fix the scenario's `setup`")
        bare = {k: v for k, v in self._git_env.items() if k != "GIT_WORK_TREE"}
        self._git(["fetch", "-q", str(bundle), "HEAD:refs/heads/main"], bare)
        bundle.unlink()
        self._git(["read-tree", "main"], self._git_env, cwd=self.root)
        return self._git(["rev-parse", "main"], bare).strip()

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


class _CommandLog:
    """The shims' log: a FIFO only the harness reads, drained into a file only the harness writes.

    Inside the sandbox the FIFO is bound read-only and is write-only by mode,
    so the agent can add records but can neither read, truncate nor remove
    what was written. The harness holds it open for reading and writing, so a
    shim never blocks on open and never meets a closed pipe.
    """

    def __init__(self, fifo: Path, out: Path, *, cap: int = 32 << 20, on_full=None):
        self.fifo, self.out = fifo, out
        self.cap, self._on_full, self._written = cap, on_full, 0
        os.mkfifo(fifo, 0o600)
        self._fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.chmod(fifo, 0o222)
        self._file = open(out, "ab")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # close() wakes the thread at once, not at its next poll
        self._thread = threading.Thread(target=self._run, name="command-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd, self._wake_r], [], [], 1.0)
            if self._fd in ready:
                self.drain()

    def drain(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            while True:
                try:
                    data = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    break
                if not data:
                    break
                room = self.cap - self._written
                if len(data) > room:  # past the cap: drained and dropped, so no shim ever blocks
                    data = data[:max(room, 0)]
                    if self._on_full is not None:
                        self._on_full(self.cap)
                        self._on_full = None
                self._file.write(data)
                self._written += len(data)
            self._file.flush()

    def close(self) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=1)
        self.drain()
        with self._lock:
            os.close(self._fd)
            self._fd = -1
            self._file.close()
        os.close(self._wake_r)
        os.close(self._wake_w)


_OWNER = ".owner"  # "<pid> <start time>" of the harness that made a sandbox folder
_STALE_UNOWNED_S = 86400


def _start_time(pid: int) -> str:
    """A process's start time in clock ticks (field 22 of /proc/PID/stat): a pid reused later has another."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def remove_stale(tmp_root: str | Path) -> list[Path]:
    """Remove sandbox folders whose harness is gone (it was killed before it could clean up); returns them.

    A folder is stale when the process its ``.owner`` names is not running (or is
    another process with that pid), or, with no ``.owner``, when it is laid out as a
    sandbox and a day old. Anyone else's ``replaybook-*`` folder is left alone.
    """
    gone = []
    try:
        entries = [e for e in os.scandir(tmp_root) if e.name.startswith("replaybook-") and e.is_dir(follow_symlinks=False)]
    except OSError:
        return gone
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            owner = Path(entry.path, _OWNER)
            if owner.exists():
                pid, _, started = owner.read_text().strip().partition(" ")
                stale = not pid.isdigit() or _start_time(int(pid)) != started
            else:  # from before owners were recorded: only a folder laid out as a sandbox is ours
                ours = os.path.lexists(os.path.join(entry.path, "commands.log")) and os.path.isdir(
                    os.path.join(entry.path, "root"))
                stale = ours and time.time() - entry.stat(follow_symlinks=False).st_mtime > _STALE_UNOWNED_S
        except OSError:
            continue
        if stale:
            _rmtree(Path(entry.path))
            gone.append(Path(entry.path))
    return gone


_cleaned: set[str] = set()


def _remove_stale_once(tmp_root: str) -> None:
    if tmp_root not in _cleaned:
        _cleaned.add(tmp_root)
        remove_stale(tmp_root)


@functools.lru_cache(maxsize=1)
def _tmpfs() -> str | None:
    """/dev/shm when it is a writable tmpfs with room (setup and removal cost far less in memory), else None."""
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        with open("/proc/mounts", encoding="utf-8") as mounts:
            is_tmpfs = any(line.split()[1:3] == [shm, "tmpfs"] for line in mounts if len(line.split()) > 2)
    except OSError:
        return None
    room = st.f_bavail * st.f_frsize
    return shm if is_tmpfs and room >= TMPFS_MIN_FREE and os.access(shm, os.W_OK | os.X_OK) else None


def _relative(path: str) -> str:
    norm = os.path.normpath(path)
    if os.path.isabs(path) or norm == ".." or norm.startswith("../"):
        raise BadInput(f"{path!r}: paths in checks are relative to the repo root and stay inside it")
    return norm


def _nested_git(root: Path) -> tuple[str, ...] | None:
    """Every ``.git`` below ``root`` but its own (a nested repository); None if one is a link or there are too many."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        top = dirpath == str(root)
        for name in (".git",) if ".git" in dirnames or ".git" in filenames else ():
            full = os.path.join(dirpath, name)
            if name in dirnames:
                dirnames.remove(name)
            if top:
                continue
            if os.path.islink(full) or len(found) >= _MAX_NESTED_GIT:
                return None
            found.append(full)
    return tuple(found)


def _check_fixture(fixture: Path) -> None:
    """Refuse links that leave the fixture, nested repositories, and special files copying would hang on."""
    top = os.path.realpath(fixture)
    for dirpath, dirnames, filenames in os.walk(fixture):
        if os.path.relpath(dirpath, fixture) == "." and ".git" in dirnames:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if name == ".git":
                raise BadInput(f"{fixture}: {os.path.relpath(full, fixture)} makes a nested repository, and its "
                               "config could name commands the harness would run; remove it (a `setup` step "
                               "may make a repository inside the sandbox instead)")
            if stat.S_ISLNK(st.st_mode):
                _check_link(fixture, top, full)
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise BadInput(f"{full}: fixtures may hold only files, folders and symlinks; remove it")


def _check_link(fixture: Path, top: str, link: str) -> None:
    target = os.readlink(link)
    rel_dir = os.path.relpath(os.path.dirname(link), fixture)
    lexical = os.path.normpath(os.path.join(rel_dir, target))
    try:
        real = os.path.realpath(link, strict=True)
    except FileNotFoundError:
        real = os.path.realpath(link)  # a dangling link inside the fixture is still a link inside it
    except OSError as exc:  # ELOOP: a link that points, in the end, back to itself
        raise BadInput(f"{fixture}: symlink {os.path.relpath(link, fixture)} is a loop ({exc.strerror}); "
                       "remove it, or point it at a file") from None
    inside = real == top or real.startswith(top + os.sep)
    if os.path.isabs(target) or lexical == ".." or lexical.startswith("../") or not inside:
        raise BadInput(
            f"{fixture}: symlink {os.path.relpath(link, fixture)} -> {target} points outside the "
            "fixture; make it a relative link to a path inside the fixture, or copy the file in"
        )


def _copy_fixture(src: Path, dst: Path) -> None:
    # The fixture's own .git (if any) is not part of the scenario; the sandbox makes its own.
    shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: [".git"] if Path(d) == src else [])




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
