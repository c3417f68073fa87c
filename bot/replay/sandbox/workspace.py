"""The replay sandbox: a throwaway copy of a fixture repo where an agent runs.

Layout of one sandbox (all under one temp dir, removed on exit)::

    <base>/root           the agent's working tree (a normal git repo, own .git)
    <base>/fixture        pristine copy of the fixture, for `unchanged`
    <base>/baseline.git   baseline commit, kept OUTSIDE root so `diff` survives
                          `rm -rf .git` or even `rm -rf root`
    <base>/home, /tmp     private HOME and TMPDIR
    <base>/kernel/N/      the kernel's trace of recorded run N (bot.replay.trace.kernel),
                          written by strace on the host, never visible inside
    <base>/commands.fifo  --sandbox docker only: where the PATH shims write
                          (bot.replay.trace.shims), drained into <base>/commands.log
    <base>/ep-PORT.sock   the bridges to the gateway and services

Every process runs through an isolation backend (``bot.replay.sandbox.isolation``):
inside, only root, home and tmp are writable and visible of all this; the
pristine copy, the baseline and the traces belong to the harness alone.
Each recorded run (a tool call, an agent program) is traced by the kernel,
from outside: the trace is the record of what ran, whatever route it took.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from bot import settings
from bot.errors import BadInput, FixtureBuildFailed, InfrastructureError
from bot.replay import delivery
from bot.replay.sandbox import executor, isolation, stale
from bot.replay.sandbox import fixture as fixture_mod
from bot.replay.sandbox.bridge import UnixBridge
from bot.replay.sandbox.harness_git import SETUP_TIMEOUT_S, FileChange, HarnessGit, SandboxDiff
from bot.replay.sandbox.process import Completed, Watch, run_process, tree_bytes
from bot.replay.sandbox.session import Session
from bot.replay.sandbox.toolchain import HOST, Toolchain
from bot.replay.trace import exec_images, exec_notify, launchers, shims
from bot.replay.trace import kernel as kernel_trace
from bot.replay.trace.command_log import CommandLog
from bot.replay.trace.events import CommandEvent, ShellEvent

__all__ = ["Completed", "FileChange", "Sandbox", "SandboxDiff"]
COMMAND_LOG_CAP = 32 << 20  # the kernel trace (or shims' log) read per trial, at most max_disk_mb; past it: unscored

TMP_ENV = "REPLAYBOOK_TMPDIR"
TMPFS_MIN_FREE = 4 << 30  # /dev/shm is used only with this much room (a sandbox may hold max_disk_mb)
# The agent's own git identity, so its commits do not fail on a harness artefact.
_AGENT_GITCONFIG = "[user]\n\tname = Replaybook Agent\n\temail = agent@replaybook.invalid\n"
# Login shells read /etc/profile, which resets PATH on Debian; put the shims back.
_PROFILE = (
    "__rb_shims={bin}\n"
    'case ":$PATH:" in *":$__rb_shims:"*) ;; *) PATH="$__rb_shims:$PATH"; export PATH ;; esac\n'
    "unset __rb_shims\n"
)


class Sandbox(HarnessGit):
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
        pristine: bool = True,
        instructions: Mapping[str, str] | None = None,  # files the harness adds to the tree (bot.replay.delivery)
    ):
        self.fixture = Path(fixture)
        self.env_allow = tuple(env_allow)
        self.extra_env = dict(extra_env or {})
        self.scrub = tuple(scrub)
        self.shim_cache = shim_cache
        # Where the sandbox's temp dir goes; a tmpfs here makes setup and cleanup far cheaper.
        self.tmp_root = tmp_root or temp_root()
        self.backend = backend if backend is not None and not isinstance(backend, str) else isolation.backend(backend)
        self.toolchain = toolchain
        self.setup_commands, self.instructions = tuple(setup), dict(instructions or {})
        self.limits = limits or isolation.Limits()
        self.service_ports = tuple(service_ports)
        self.reads = tuple(reads)  # host folders the agent program needs (e.g. the Claude Code CLI)
        self.keeps_pristine = pristine  # a copy of the tree as the agent got it, which only `unchanged` reads
        self.limit_hit: str | None = None  # the first bound a process broke: the trial is unscored
        self.base: Path | None = None
        self._bridges: dict[int, UnixBridge] = {}
        self._log: CommandLog | None = None
        # The kernel traces every recorded run (bwrap, none); docker's processes are beyond a host tracer's reach,
        # so there the PATH shims still keep the command log.
        self.traced = isolation.traced(self.backend.name)
        self._events: list[CommandEvent | ShellEvent] = []
        self._runs = itertools.count()
        self._trace_bytes = 0
        self._session: Session | None = None  # bwrap: the trial's one sandbox, started at the first call
        self._which: dict[str, str | None] = {}

    # -- lifecycle ---------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        if not self.fixture.is_dir():
            raise BadInput(f"{self.fixture}: fixture folder not found; check the scenario's `repo` path")
        fixture_mod.check(self.fixture)
        path = launchers.resolve_path(settings.get("PATH") or "", self.fixture)  # python, not pyenv's launcher
        if self.toolchain.bin_dir:
            path = self.toolchain.bin_dir + os.pathsep + path
        self.shims = shims.build_shims(path, self.scrub, cache_dir=self.shim_cache, build=not self.traced)
        if self.traced:
            kernel_trace.strace()  # no tracer, no record: the harness's failure, before anything runs
        stale.remove_stale_once(self.tmp_root or tempfile.gettempdir())
        self.base = temp_dir("replaybook-", self.tmp_root)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._end_session()
        for bridge in self._bridges.values():
            bridge.close()
        self._bridges.clear()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.base is not None and os.path.lexists(self.base):
            stale.rmtree(self.base)

    def _setup(self) -> None:
        os.chmod(self._base, 0o700)
        fixture_mod.copy(self.fixture, self.root)
        delivery.write(self.root, self.instructions)  # before the baseline: the tree as the agent gets it
        for d in (self.home, self.tmpdir):
            d.mkdir()
        (self.home / ".gitconfig").write_text(_AGENT_GITCONFIG)
        profile = _PROFILE.format(bin=shlex.quote(self.shims.base_path if self.traced else str(self.shims.bin_dir)))
        for name in (".bash_profile", ".bashrc"):
            (self.home / name).write_text(profile)
        self._git_env = self._make_git_env()
        self._ro, self._masks = self._read_only_paths(), isolation.project_masks((str(self.fixture),))
        if not self.traced:
            self._log = CommandLog(self._base / "commands.fifo", self.shim_log,
                                   cap=min(COMMAND_LOG_CAP, self.limits.max_disk_bytes), on_full=self._log_full)
        self._run_setup()
        if self.keeps_pristine:  # after setup: `unchanged` compares with what the agent got
            fixture_mod.copy(self.root, self.pristine)
        self.baseline = self._commit_baseline()
        self._ro = (*self._ro, str(self._base / "baseline.git" / "objects"), *self._borrowed)  # the agent's .git borrows them

    def _run_setup(self) -> None:
        for line in self.setup_commands:
            done = self.run(shlex.split(line), timeout_s=SETUP_TIMEOUT_S, record=False)
            if done.rc != 0 or done.timed_out or done.limit:
                why = done.limit or ("timed out" if done.timed_out else f"exit code {done.rc}")
                raise FixtureBuildFailed(f"{self.fixture}: setup command `{line}` failed ({why}): "
                               f"{(done.stderr or done.stdout).strip()[-300:]}; fix the scenario's `setup`")

    # -- paths (fixed once the folder is made: each is built once, not at every call) ---------------
    @functools.cached_property
    def root(self) -> Path:
        return self._base / "root"

    @property
    def pristine(self) -> Path:
        if not self.keeps_pristine:  # never an empty stand-in: `unchanged` would compare with nothing
            raise RuntimeError("this sandbox keeps no pristine copy; make it with pristine=True")
        return self._base / "fixture"

    @functools.cached_property
    def home(self) -> Path:
        return self._base / "home"

    @functools.cached_property
    def tmpdir(self) -> Path:
        return self._base / "tmp"

    @functools.cached_property
    def _writable(self) -> tuple[str, str, str]:
        return str(self.root), str(self.home), str(self.tmpdir)

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
        shim_dir = [] if self.traced else [str(self.shims.bin_dir.parent)]  # no shims under the kernel trace
        wanted = [*shim_dir, *self.toolchain.reads, *self.reads, sys.prefix,
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
        them first, so every command run through a shell is recorded). Under the
        kernel trace there are no shims: PATH is the real one, ``$SHELL`` real bash.
        """
        shimmed = path_shims and not self.traced
        env = {
            "PATH": self.shims.path_value if shimmed else self.shims.base_path,
            "HOME": str(self.home),
            "TMPDIR": str(self.tmpdir),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "SHELL": self.shims.bash if self.traced else str(self.shims.shell),
        }
        if record and not self.isolated and not self.traced:
            env[shims.LOG_ENV] = str(self._log.fifo) if self._log else str(self.shim_log)
        if self.toolchain.bin_dir:
            env["VIRTUAL_ENV"] = os.path.dirname(self.toolchain.bin_dir)
        if self.env_allow:  # a copy of the whole environment, made only when a name is to be taken from it
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
        tool_call: str | None = None,
    ) -> Completed:
        """Run ``argv`` in the sandbox (``cwd`` relative to root); nothing it starts outlives it.

        ``endpoints`` are host 127.0.0.1 ports it may reach besides the
        scenario's services (the gateway, for an agent program).
        ``record``: the kernel traces it, and what it starts goes to ``trace_events()``:
        every command to ``tool_call`` when one is given (the harness runs that
        tool call), else attributed by process tree (an agent program).
        """
        workdir = self.root / _relative(cwd) if cwd else self.root
        env = dict(env) if env is not None else self.env(record=record, path_shims=path_shims)
        if not workdir.is_dir():  # the agent removed it: as a missing program would, without a traceback
            return Completed(127, "", f"replaybook: {workdir} no longer exists\n", False, 0.0)
        lim = self.limits
        watch = Watch(max_procs=lim.max_procs, max_output_bytes=lim.max_output_bytes,
                      max_disk_bytes=lim.max_disk_bytes, disk=self.disk_bytes)
        if self._in_session(endpoints):
            done = self._session_run(argv, workdir=workdir, env=env, stdin=stdin, timeout_s=timeout_s,
                                     output_cap=output_cap, watch=watch, record=record, tool_call=tool_call)
            if done.limit and self.limit_hit is None:
                self.limit_hit = done.limit
            return done
        plan = isolation.Plan(
            rw=self._writable, ro=self._ro,
            command_log=str(self._log.fifo) if record and self._log else None,  # docker only
            endpoints=tuple((port, str(self._bridge(port).path)) for port in (*self.service_ports, *endpoints)),
            limits=self.limits, confine=sys.executable, mask=self._masks)  # confine: no reach to bwrap's init
        trace_dir, images = None, None
        if record and self.traced:  # on the host, beside root: no bind reaches it
            trace_dir = self._base / "kernel" / str(next(self._runs))
            trace_dir.mkdir(parents=True, mode=0o700)
            images = exec_images.RunImages.start() if self.backend.name == "bwrap" else None
        with images or contextlib.nullcontext():  # strace names what the caller named; these, what the kernel ran
            done = self._start(argv, cwd=workdir, env=env, plan=plan, stdin=stdin, timeout_s=timeout_s,
                               output_cap=output_cap, watch=watch, trace_dir=trace_dir, images=images)
            if trace_dir is not None:
                self._read_trace(trace_dir, str(workdir), tool_call, images)
        if done.limit and self.limit_hit is None:
            self.limit_hit = done.limit
        return done

    def _read_trace(self, trace_dir: Path, cwd: str, tool_call: str | None, images=None) -> None:
        """Parse one run's kernel trace into ``trace_events()``; past the cap the trial is unscored."""
        size = tree_bytes([str(trace_dir)], 1 << 62)
        cap = min(COMMAND_LOG_CAP, self.limits.max_disk_bytes)
        self._trace_bytes += size
        if self._trace_bytes > cap:
            if self.limit_hit is None:
                self.limit_hit = (f"the kernel trace passed {cap >> 20 or 1} MiB (max_disk_mb bounds it too); "
                                  "the rest was not read")
        elif self.limit_hit is None:
            self._events += kernel_trace.read_run(trace_dir, cwd=cwd, root=self.root, tool_call=tool_call,
                                                  images=images.execs() if images else None)
        shutil.rmtree(trace_dir, ignore_errors=True)

    # -- the trial's one sandbox (bot.replay.sandbox.session) ----------------------------------------
    def _in_session(self, endpoints: Sequence[int]) -> bool:
        """bwrap runs every call in one long-lived sandbox; a run that needs the gateway (an agent program,
        once a trial) gets its own, since the endpoints are bound when a sandbox starts. docker and none
        keep one process per call (docker's processes are beyond a host tracer, none has no namespace to kill)."""
        return self.backend.name == "bwrap" and not set(endpoints) - set(self.service_ports)

    def _session_for(self, plan: isolation.Plan) -> Session:
        if self._session is not None and (self._session.dead or self._session.plan != plan):
            self._end_session()  # setup changed the binds (the baseline's objects), or the agent ended it
        if self._session is None:
            trace_dir, notify = self._base / "kernel" / f"s{next(self._runs)}", exec_notify.session_engine()
            if notify is None:  # strace writes one file per process there; the listener needs no folder
                trace_dir.mkdir(parents=True, mode=0o700)
            self._session = Session(self.backend, plan, cwd=self.root, python=sys.executable, trace_dir=trace_dir,
                                    notify=notify)
        return self._session

    def _session_plan(self) -> isolation.Plan:
        return isolation.Plan(
            rw=self._writable, ro=self._ro,
            endpoints=tuple((port, str(self._bridge(port).path)) for port in self.service_ports),
            limits=self.limits, mask=self._masks)

    def _end_session(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()
            if session.trace_dir is not None:
                self._trace_bytes += tree_bytes([str(session.trace_dir)], 1 << 62)
                shutil.rmtree(session.trace_dir, ignore_errors=True)
            elif isinstance(session.reader, exec_notify.Watch):
                self._trace_bytes += session.reader.size()

    def _session_run(self, argv, *, workdir: Path, env, stdin, timeout_s, output_cap, watch, record,
                     tool_call) -> Completed:
        session = self._session_for(self._session_plan())
        done, pid = session.run(argv, cwd=str(workdir), env=env, stdin=stdin, timeout_s=timeout_s,
                                output_cap=output_cap, watch=watch)
        if session.reader is None:
            return done
        size = self._trace_bytes + (tree_bytes([str(session.trace_dir)], 1 << 62) if session.trace_dir is not None
                                    else session.reader.size())
        cap = min(COMMAND_LOG_CAP, self.limits.max_disk_bytes)
        if size > cap:
            if self.limit_hit is None:
                self.limit_hit = (f"the kernel trace passed {cap >> 20 or 1} MiB (max_disk_mb bounds it too); "
                                  "the rest was not read")
        elif record and pid is not None and self.limit_hit is None:
            self._events += session.reader.request(pid, cwd=str(workdir), root=self.root, tool_call=tool_call)
        return done

    def file_tool(self, op: str, path: str, **args: str) -> str:
        """The builtin agent's ``read``/``write``/``edit``, done inside the trial's sandbox under bwrap (no
        link swapped in between two calls can lead it to the host), else here by the same code."""
        request = {"op": op, "root": str(self.root), "path": path, **args}
        if self._in_session(()):
            answer = self._session_for(self._session_plan()).file_tool(request)
        else:
            answer = executor.file_tool(request)
        if "error" in answer:
            raise executor.FileToolError(answer["error"])
        return answer["ok"]

    def _log_full(self, cap: int) -> None:
        if self.limit_hit is None:
            self.limit_hit = (f"the command log passed {cap >> 20 or 1} MiB (max_disk_mb bounds it too); "
                              "the rest was not read")

    def disk_bytes(self, stop_at: int) -> int:
        """What the agent's writable folders hold, counted up to ``stop_at``."""
        # The kernel trace of the run in progress counts too: a flood of execs must not fill the host's memory.
        return tree_bytes([*self._writable, str(self._base / "kernel")], stop_at)

    def _bridge(self, port: int) -> UnixBridge:
        if port not in self._bridges:
            self._bridges[port] = UnixBridge(self._base / f"ep-{port}.sock", port).__enter__()
        return self._bridges[port]

    def which(self, name: str) -> str | None:
        """The real program ``name`` on the original PATH, never a shim; looked up once a trial (that PATH is fixed)."""
        if name not in self._which:
            self._which[name] = shutil.which(name, path=self.shims.base_path)
        return self._which[name]

    def commands(self) -> list[CommandEvent]:
        return [e for e in self.trace_events() if isinstance(e, CommandEvent)]

    def trace_events(self) -> list[CommandEvent | ShellEvent]:
        """What ran so far: the shells the agent started and every command, oldest first."""
        if self.traced:
            return sorted(self._events, key=lambda e: (not isinstance(e, ShellEvent), getattr(e, "started_at", 0) or 0))
        if self._log is not None:
            self._log.drain()
        return [*shims.read_shells(self.shim_log), *shims.read_shim_log(self.shim_log, self.root)]

    def _start(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], plan: isolation.Plan,
               trace_dir: Path | None = None, images: exec_images.RunImages | None = None, **run: object) -> Completed:
        """Start ``argv`` through the backend; a sandbox that never started is InfrastructureError, not an exit code.

        The launcher writes to the status fd once it runs inside, the namespaces and
        mounts up; without that byte, whatever failed was the sandbox, not the command.
        """
        status_r, status_w = os.pipe() if self.backend.name == "bwrap" else (-1, -1)
        plan = dataclasses.replace(plan, notify=images.confine_args()) if images else plan
        try:
            host_argv, host_env = self.backend.command(argv, cwd=str(cwd), env=env, plan=plan,
                                                       status_fd=status_w if status_w >= 0 else None)
            if trace_dir is not None:
                host_argv = kernel_trace.command(host_argv, trace_dir)
            fds = ((status_w,) if status_w >= 0 else ()) + (images.pass_fds() if images else ())
            done = run_process(host_argv, cwd=cwd, env=host_env, pass_fds=fds, **run)
        finally:
            if status_w >= 0:
                os.close(status_w)
        if status_r >= 0:
            with os.fdopen(status_r, "rb") as status:
                started = status.read(1) == b"1"
            if not started and not done.timed_out and not done.limit:
                raise InfrastructureError(f"the sandbox could not start (bwrap exit {done.rc}): "
                                          f"{done.stderr.strip()[-200:]}")
        if trace_dir is not None and not done.timed_out and not any(trace_dir.iterdir()):
            raise InfrastructureError(f"strace could not trace the run (exit {done.rc}): {done.stderr.strip()[-200:]}")
        return done

    # -- end state -----------------------------------------------------------
    def exists(self, path: str) -> bool:
        return os.path.lexists(self.root / _relative(path))

    def unchanged(self, path: str) -> bool:
        """True when ``path`` is byte-identical to the fixture (both absent counts as unchanged; caches ignored)."""
        from bot.replay.checks import unchanged

        return unchanged(self.pristine, self.root, _relative(path))

def temp_dir(prefix: str, root: str | None) -> Path:
    """A new folder under ``root`` (None: the system's temp folder) with this process as its owner, so a
    later harness removes it (``bot.replay.sandbox.stale``) only once this one is gone."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    (folder / stale.OWNER).write_text(f"{os.getpid()} {stale.start_time(os.getpid())}\n")
    return folder


def temp_root() -> str | None:
    """Where throwaway folders go: ``$REPLAYBOOK_TMPDIR``, else a roomy tmpfs, else None (the system's temp
    folder). On a disk each file made and removed costs inode bookkeeping (ext4: 1-2 ms a trial)."""
    return settings.get(TMP_ENV) or _tmpfs()


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

