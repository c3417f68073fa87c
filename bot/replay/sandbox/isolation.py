"""Isolation backends: how a process is started so it cannot reach the harness.

Every process of a replay (the agent, each command it runs, the ``succeeds``
checks) is started through one backend:

- ``bwrap`` (default on Linux): bubblewrap namespaces. Its own PID namespace
  (no harness process is visible, and nothing outlives the process: PID 1 is
  bwrap, and its death takes the namespace with it), its own network
  namespace (only loopback), the host read-only, with the home folders,
  ``/tmp``, ``/run`` and the host project (``project_masks``: wherever it
  lies) masked, and only the sandbox's root, HOME and TMP writable.
- ``docker``: the same plan as a ``docker run`` for runners with a Docker
  engine.
- ``none``: no isolation at all, only when asked; the trial says so loudly.

bwrap is started from an **empty environment**: PID 1 inside is bwrap itself,
so whatever environment it inherited would be readable as ``/proc/1/environ``.

Network: the host's 127.0.0.1 is not reachable from inside, so each endpoint
the sandbox may use (the model gateway, the scenario's services) is bridged:
the harness serves it on a Unix socket (``bot.replay.sandbox.bridge``) that is bound
into the sandbox, and ``socat`` inside listens on the same 127.0.0.1 port and
forwards to it, as Anthropic's sandbox-runtime does.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

from bot import settings
from bot.errors import BadInput, InfrastructureError
from bot.replay.sandbox import host_tools
from bot.replay.trace.shims import FIXED_LOG

BACKENDS = ("bwrap", "docker", "none")
DEFAULT_BACKEND = "bwrap"
SANDBOX_ENV = "REPLAYBOOK_SANDBOX"
RUN_DIR = os.path.dirname(FIXED_LOG)  # inside the sandbox: the command log and the endpoint sockets
COMMAND_LOG = FIXED_LOG
DOCKER_IMAGE_ENV = "REPLAYBOOK_DOCKER_IMAGE"
DEFAULT_DOCKER_IMAGE = "debian:bookworm-slim"
NONE_WARNING = (
    "WARNING: --sandbox none: the agent and every command it runs share this machine, its processes "
    "and its files; nothing isolates them. Use it only to debug, never for a verdict you trust."
)
LANDLOCK_WARNING = (
    "WARNING: this kernel gives no Landlock ABI 2 (Linux 5.19 or later, with Landlock among its security "
    "modules): the sandbox's processes run in no Landlock domain, so a command may ptrace, or write the memory "
    "of, a process of the harness's inside the sandbox (the endpoint bridges; bwrap's init under an agent "
    "program) and have it run commands recorded under no call, or none at all (docs/security.md)."
)


@functools.cache
def landlock_abi() -> int:
    """The Landlock ABI this kernel gives the harness, as every confine step inside finds it (0: none; the
    sandbox inherits the harness's seccomp filters, so a container that refuses the call refuses it inside)."""
    try:
        import ctypes

        got = ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    except (OSError, AttributeError):
        return 0
    return max(0, int(got))

# Host folders that hold other people's secrets: users' homes, temp and runtime folders
# (a Docker socket, a runner's credential files). They are masked by empty, read-only
# tmpfs mounts; what the sandbox needs from them is bound back in, read-only.
# Host files outside those folders that hold secrets a sandbox run as root could read: covered by
# an empty file or folder, so no host file's secret reaches an agent's output, and from it a report.
_SECRET_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
                 "/etc/security/opasswd")
_SECRET_DIRS = ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d", "/var/lib/docker", "/var/lib/sudo",
                "/var/log", "/var/lib/private", "/var/spool/cron")
_MASKED = ("/home", "/root", "/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm", "/mnt", "/media", "/srv")
# Folders a project can never be: a mask there would hide the userland every tool needs.
_SYSTEM = ("/", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys", "/dev",
           "/opt", "/var", "/var/lib", "/boot", "/nix", "/snap")


def project_of(path: str) -> str:
    """The project a path belongs to: its nearest folder holding ``.git`` (or ``.replaybook.yml``), else itself."""
    real = os.path.realpath(path)
    here = real
    while True:
        if os.path.exists(os.path.join(here, ".git")) or os.path.exists(os.path.join(here, ".replaybook.yml")):
            return here
        up = os.path.dirname(here)
        if up == here:
            return real
        here = up


def project_masks(paths: Sequence[str] = ()) -> tuple[str, ...]:
    """The host folders of the project outside the folders always masked, hidden from every sandbox: on a runner
    whose checkout lies in ``/opt``, ``/work`` or ``/__w`` the host ``/`` bound read-only showed the project's
    checks, the candidate rule, other trials' transcripts and their gateways' sockets. The harness's working
    folder's project, each of ``paths``' (the fixture's, the runs folder's) and the sandboxes' temp root
    (``$REPLAYBOOK_TMPDIR``), unless one lies in a masked or system folder; what a sandbox needs from them is
    bound back (its own root, the harness's Python)."""
    found = [project_of(os.getcwd()), *(project_of(p) for p in paths)]
    tmp = settings.get("REPLAYBOOK_TMPDIR")
    if tmp:
        found.append(os.path.realpath(tmp))
    out: list[str] = []
    for folder in found:
        if folder in _SYSTEM or any(folder == m or folder.startswith(m + "/") for m in _MASKED) or \
                any(folder.startswith(s + "/") for s in _SYSTEM if s not in ("/", "/opt", "/var", "/var/lib")):
            continue
        if os.path.isdir(folder) and not os.path.islink(folder) and folder not in out:
            out.append(folder)
    return tuple(out)


SOCAT_MISSING = ("the sandbox needs socat to reach the model gateway and services from inside "
                 "(apt-get install socat), or replay with --sandbox none")


@dataclass(frozen=True)
class Limits:
    """Bounds on one sandboxed process tree; hitting one ends the trial unscored."""

    max_procs: int = 256
    max_file_bytes: int = 1 << 30  # any single file (RLIMIT_FSIZE)
    max_disk_bytes: int = 2 << 30  # root + home + tmp together
    max_output_bytes: int = 64 << 20  # stdout + stderr of one process, read by the harness

    @property
    def file_kib(self) -> int:
        """RLIMIT_FSIZE in whole KiB, at least one: ``ulimit -f``'s unit, for the launcher and the executor alike."""
        return max(1, self.max_file_bytes // 1024)


@dataclass(frozen=True)
class Plan:
    """What one process may see: the mounts, the endpoints and the command log."""

    rw: tuple[str, ...] = ()  # writable binds, same path inside
    ro: tuple[str, ...] = ()  # read-only binds, same path inside
    command_log: str | None = None  # host FIFO bound read-only at COMMAND_LOG
    endpoints: tuple[tuple[int, str], ...] = ()  # (127.0.0.1 port inside, host Unix socket)
    limits: Limits = field(default_factory=Limits)
    hide: tuple[str, ...] = ()  # paths inside a bind covered by an empty read-only folder (or file, for a file)
    confine: str | None = None  # a Python inside: the program runs in a Landlock domain (``confined``; bwrap only)
    notify: tuple[str, ...] = ()  # with ``confine``: ``--notify NR HEX FD``, the exec filter it installs first
    mask: tuple[str, ...] = ()  # host folders hidden besides the usual ones (``project_masks``); binds reach in
    scratch: tuple[str, ...] = ()  # empty writable tmpfs folders of the sandbox's own (in a mask): nothing of the host


class Backend(Protocol):
    name: str
    isolated: bool

    def command(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str], plan: Plan,
                status_fd: int | None = None, direct: bool = False) -> tuple[list[str], dict[str, str]]:
        """The host argv and host environment that start ``argv`` under ``plan``.

        ``status_fd``: where a backend that can reports that the sandbox started
        (at least one byte once it runs inside, then closed), so a sandbox that
        never started is told apart from a command that failed. ``direct``: ``argv``
        sets its own file-size limit (``plan.limits.max_file_bytes``), so where no
        endpoint needs a bridge a backend may start it with no launcher between; and
        it reaps, so it is the sandbox's pid 1 (bwrap's ``--as-pid-1``): every orphan
        is its child, and no init of bwrap's is there for a call to attach.
        """
        ...

    def command_log_path(self, host_fifo: str) -> str:
        """Where a shim inside writes the command log."""
        ...


def socket_path(port: int) -> str:
    return f"{RUN_DIR}/ep-{port}.sock"


def launcher(argv: Sequence[str], plan: Plan, *, bash: str, socat: str | None,
             started_fd: int | None = None) -> list[str]:
    """``bash -c`` that sets the file-size limit, starts the endpoint bridges, then becomes ``argv``.

    ``started_fd``: written once (the sandbox is up) and closed, so ``argv`` never holds it.
    """
    lines = [f"printf 1 >&{started_fd}; exec {started_fd}>&-"] if started_fd is not None else []
    lines.append(f"ulimit -S -H -f {plan.limits.file_kib} 2>/dev/null")
    if plan.endpoints:
        if socat is None:
            raise BadInput(SOCAT_MISSING)
        for port, _ in plan.endpoints:
            lines.append(f"{shlex.quote(socat)} TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr "
                         f"UNIX-CONNECT:{shlex.quote(socket_path(port))} </dev/null >/dev/null 2>&1 &")
        # Wait (bash builtins only) until every bridge listens, at most ~2 s.
        hexes = " ".join(f"0100007F:{port:04X}" for port, _ in plan.endpoints)
        lines.append(
            f"__rb_want=({hexes}); for __rb_i in {{1..4000}}; do __rb_n=0; "
            "while read -r _ __rb_l _ __rb_s _; do [[ $__rb_s == 0A && \" ${__rb_want[*]} \" == *\" $__rb_l \"* ]] "
            "&& __rb_n=$((__rb_n+1)); done </proc/net/tcp; (( __rb_n >= ${#__rb_want[@]} )) && break; done; "
            "unset __rb_want __rb_i __rb_n __rb_l __rb_s")
    lines.append('exec "$@"')
    return [bash, "-c", "\n".join(lines), "replaybook-sandbox", *argv]


CONFINE_NAME = "replaybook-confine"  # its $0: how the trace reader knows this step of the harness's
# No-new-privs, then a Landlock domain as ``bot.replay.sandbox.executor._confine`` makes (read why there): no process
# in it may ptrace, open /proc/PID/mem of, or process_vm_writev into a process outside it (bwrap's init, pid 1,
# and the endpoint bridges, started before). Then it becomes the program; without Landlock (or with ABI 1
# only) it becomes the program all the same.
_CONFINE = ("import ctypes,os,sys\n"
            "c=ctypes.CDLL(None,use_errno=True);c.prctl(38,1,0,0,0);a=c.syscall(444,None,0,1)\n"
            "w=lambda n,s=8:n.to_bytes(s,sys.byteorder);b=ctypes.c_char_p\n"
            "if a>=2:\n"
            " f=c.syscall(444,b(w(0)+w(0)+w(2) if a>=6 else w(10240)),24 if a>=6 else 8,0)\n"
            " if f>=0 and a<6:\n"
            "  r=os.open('/',os.O_PATH);c.syscall(445,f,1,b(w(8192)+w(r,4)),0);os.close(r)\n"
            " f>=0 and c.syscall(446,f,0)\n"
            "if sys.argv[2]=='--notify':\n"
            " import socket;p=bytes.fromhex(sys.argv[4])\n"
            " class F(ctypes.Structure):_fields_=[('n',ctypes.c_ushort),('f',ctypes.c_char_p)]\n"
            " l=c.syscall(int(sys.argv[3]),1,8,ctypes.byref(F(len(p)//8,p)));s=socket.socket(fileno=int(sys.argv[5]))\n"
            " l>=0 and s.sendmsg([b'1'],[(1,1,l.to_bytes(4,sys.byteorder))]);s.close()\n"
            " if l<0:sys.exit('replaybook: the exec notification filter could not be installed')\n"
            " os.close(l);del sys.argv[2:6]\n"
            "os.execvp(sys.argv[2],sys.argv[2:])\n")  # sys.argv: -c, CONFINE_NAME, [--notify NR HEX FD], the argv


def confined(python: str, argv: Sequence[str], notify: Sequence[str] = ()) -> list[str]:
    """``argv`` run in a Landlock domain of its own (see ``_CONFINE``), by ``python`` inside the sandbox: for a
    run whose program is not the executor (which confines its calls itself), e.g. an agent program.
    ``notify`` (``--notify NR HEX FD``): it first installs that seccomp program with a listener and sends the
    listener over the socket ``FD`` (``bot.replay.trace.exec_images``), keeping no copy of either."""
    return [python, "-I", "-S", "-c", _CONFINE, CONFINE_NAME, *notify, *argv]


class Bubblewrap:
    """bubblewrap: see the module docstring."""

    name = "bwrap"
    isolated = True

    def __init__(self, bwrap: str, bash: str, socat: str | None):
        self.bwrap, self.bash, self.socat = bwrap, bash, socat

    def command_log_path(self, host_fifo: str) -> str:
        return COMMAND_LOG

    def command(self, argv, *, cwd, env, plan, status_fd=None, direct=False):
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--hostname", "replaybook", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        masks = [m for m in _MASKED if os.path.isdir(m) and not os.path.islink(m)]  # looked at once a command
        masks += [m for m in plan.mask if m not in masks]
        for masked in masks:
            args += ["--perms", "0755", "--tmpfs", masked]
        for path in plan.scratch:  # made while the masks are writable; a mount of its own, so it stays writable
            args += ["--perms", "0700", "--tmpfs", path]
        args += _secret_masks()
        for path in plan.ro:
            args += ["--ro-bind", path, path]
        for path in plan.rw:
            args += ["--bind", path, path]
        for path in plan.hide:  # an empty, read-only stand-in: what was there is not seen at all
            if os.path.isdir(path):
                args += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
            else:
                args += ["--ro-bind", "/dev/null", path]
        args += ["--dir", RUN_DIR]
        if plan.command_log:
            args += ["--ro-bind", plan.command_log, COMMAND_LOG]
        for port, sock in plan.endpoints:
            args += ["--ro-bind", sock, socket_path(port)]
        for masked in masks:  # the masks stay empty: nothing but the sandbox's own folders is writable
            args += ["--remount-ro", masked]
        for key, value in env.items():
            args += ["--setenv", key, value]
        if direct:  # the executor is pid 1 itself: no init of bwrap's, unfiltered and dumpable, for a call to attach
            args.append("--as-pid-1")
        if direct and not plan.endpoints:  # no bash between: bwrap says it started (its --info-fd JSON, then closed)
            args += [*(("--info-fd", str(status_fd)) if status_fd is not None else ()), "--chdir", cwd, "--", *argv]
        else:
            inner = confined(plan.confine, argv, plan.notify) if plan.confine and not direct else argv
            args += ["--chdir", cwd, "--",
                     *launcher(inner, plan, bash=self.bash, socat=self.socat, started_fd=status_fd)]
        return args, {}  # an empty environment: PID 1 inside is bwrap, and its environ is readable


@functools.lru_cache(maxsize=1)
def _secret_masks() -> tuple[str, ...]:
    out: list[str] = []
    for path in _SECRET_FILES:
        if os.path.isfile(path) and not os.path.islink(path):
            out += ["--ro-bind", "/dev/null", path]
    for path in _SECRET_DIRS:
        if os.path.isdir(path) and not os.path.islink(path):
            out += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
    return tuple(out)


class Docker:
    """``docker run`` with the same plan: the host's userland read-only, no network, bounds as flags."""

    name = "docker"
    isolated = True

    def __init__(self, docker: str, bash: str, socat: str | None, image: str):
        self.docker, self.bash, self.socat, self.image = docker, bash, socat, image

    def command_log_path(self, host_fifo: str) -> str:
        return COMMAND_LOG

    def command(self, argv, *, cwd, env, plan, status_fd=None, direct=False):
        lim = plan.limits
        args = [self.docker, "run", "--rm", "-i", "--init", "--network", "none", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--read-only", "--pids-limit", str(lim.max_procs),
                "--ulimit", f"fsize={lim.max_file_bytes}", "--tmpfs", "/tmp:rw,size=64m", "--tmpfs", RUN_DIR,
                "--user", f"{os.getuid()}:{os.getgid()}", "--workdir", cwd]
        hosts = [h for h in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
                 if os.path.isdir(h) and not os.path.islink(h)]
        args += [a for host in hosts for a in ("--volume", f"{host}:{host}:ro")]
        args += [a for path in plan.mask if any(path.startswith(h + "/") for h in hosts)  # a project in /opt
                 for a in ("--tmpfs", f"{path}:ro")]
        args += [a for path in plan.ro for a in ("--volume", f"{path}:{path}:ro")]
        args += [a for path in plan.rw for a in ("--volume", f"{path}:{path}:rw")]
        args += [a for path in plan.scratch for a in ("--tmpfs", f"{path}:rw")]
        for path in plan.hide:
            args += ["--tmpfs", f"{path}:ro"] if os.path.isdir(path) else ["--volume", f"/dev/null:{path}:ro"]
        if plan.command_log:
            args += ["--volume", f"{plan.command_log}:{COMMAND_LOG}:ro"]
        args += [a for port, sock in plan.endpoints for a in ("--volume", f"{sock}:{socket_path(port)}:ro")]
        args += [a for key, value in env.items() for a in ("--env", f"{key}={value}")]
        args += [self.image, *launcher(argv, plan, bash=self.bash, socat=self.socat)]
        host_env = {k: v for k in ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG") if (v := settings.get(k))}
        return args, {"PATH": settings.get("PATH", "/usr/bin:/bin"), **host_env}


class NoIsolation:
    """The process runs on the host as it is: no namespace, no mount, no bridge."""

    name = "none"
    isolated = False

    def command_log_path(self, host_fifo: str) -> str:
        return host_fifo

    def command(self, argv, *, cwd, env, plan, status_fd=None, direct=False):
        return list(argv), dict(env)


def backend(name: str | None = None) -> Backend:
    """The backend called ``name`` (default ``$REPLAYBOOK_SANDBOX``, else bwrap), checked to work here."""
    name = name or settings.get(SANDBOX_ENV) or DEFAULT_BACKEND
    if name == "none":
        return NoIsolation()
    if name not in BACKENDS:
        raise BadInput(f"--sandbox {name!r}: choose one of {', '.join(BACKENDS)}")
    return _checked(name)


@functools.lru_cache(maxsize=None)
def _checked(name: str) -> Backend:
    # The harness's own tools, from its PATH at start: never a toolchain's or a scenario's (bot.replay.sandbox.host_tools).
    bash = host_tools.find("bash") or "/bin/bash"
    socat = host_tools.find("socat")
    if name == "docker":
        docker = host_tools.find("docker")
        if docker is None:
            raise BadInput("--sandbox docker: the docker CLI is not on PATH; install Docker, or use --sandbox bwrap")
        return Docker(docker, bash, socat, settings.get(DOCKER_IMAGE_ENV) or DEFAULT_DOCKER_IMAGE)
    if not sys.platform.startswith("linux"):
        raise BadInput(f"--sandbox bwrap needs Linux (this is {sys.platform}); use --sandbox docker")
    bwrap = host_tools.find("bwrap")
    if bwrap is None:
        raise BadInput("the replay sandbox needs bubblewrap: apt-get install bubblewrap socat "
                       "(see docs/install.md), or pass --sandbox docker, or --sandbox none to run unisolated")
    probe = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                            "--dev", "/dev", "true"], env={}, capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        raise BadInput(
            f"bubblewrap cannot create its namespaces here: {probe.stderr.strip()[:200]}. On Ubuntu 24.04 "
            "(GitHub's runners) AppArmor restricts unprivileged user namespaces: "
            "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (see docs/install.md)"
        )
    return Bubblewrap(bwrap, bash, socat)


def traced(name: str) -> bool:
    """Whether the kernel traces the runs of backend ``name`` (strace from the host): all but docker, whose
    processes lie beyond a host tracer's reach (there the PATH shims keep the command log)."""
    return name != "docker"


def problems(name: str | None = None) -> list[str]:
    """What stops a replay on this machine under backend ``name`` (default as :func:`backend`), each saying how
    to fix it; empty when a replay can run. The very checks a replay makes before it starts (``replaybook doctor``)."""
    from bot.replay.trace import kernel as kernel_trace

    try:
        chosen = backend(name)
    except BadInput as exc:
        return [exc.message]
    found = [SOCAT_MISSING] if chosen.isolated and getattr(chosen, "socat", None) is None else []
    if traced(chosen.name):
        try:
            kernel_trace.strace()
        except InfrastructureError as exc:
            found.append(str(exc))
    return found


def exposure(path: str) -> str:
    """What to bind read-only so ``path`` works inside: itself, unless it lies in a masked folder.

    A PATH entry inside a user's home (``~/.pyenv/shims``) needs its tool's
    whole folder (``~/.pyenv``), never the whole home.
    """
    real = os.path.realpath(path)
    for masked in _MASKED:
        if real.startswith(masked + "/"):
            parts = real[len(masked) + 1:].split("/")
            depth = 2 if masked == "/home" and len(parts) > 2 else 1  # /home/<user>/<tool>
            return "/".join([masked, *parts[:depth]])
    return real


def link_hops(path: str, limit: int = 40) -> list[str]:
    """``path`` and every path its chain of symbolic links passes through, in order (at most ``limit``)."""
    hops = [os.path.abspath(path)]
    while len(hops) < limit and os.path.islink(hops[-1]):
        try:
            target = os.readlink(hops[-1])
        except OSError:
            break
        hops.append(os.path.normpath(os.path.join(os.path.dirname(hops[-1]), target)))
    return hops


@functools.lru_cache(maxsize=64)
def tool_exposures(path_value: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What to bind so every tool on ``path_value`` (and each of ``extra``) works inside.

    A venv's ``python`` is a link to its base interpreter, and under pyenv or
    uv's managed Pythons that lies in a home the sandbox masks: every folder a
    tool's chain of links passes through is bound, read-only, where it is masked.
    """
    out: list[str] = []
    candidates = list(extra)
    for d in path_value.split(os.pathsep):
        if not d:
            continue
        if needs_bind(d):
            out.append(exposure(d))
        try:
            candidates += [e.path for e in os.scandir(d) if e.is_symlink()]
        except OSError:
            continue
    for tool in candidates:
        for hop in link_hops(tool)[1:]:
            folder = os.path.dirname(hop)
            if needs_bind(folder) and (where := exposure(folder)) not in out:
                out.append(where)
    return tuple(dict.fromkeys(out))


def needs_bind(path: str) -> bool:
    real = os.path.realpath(path)
    return any(real == m or real.startswith(m + "/") for m in _MASKED)


ENGINE_SCRATCH = "/tmp/replaybook-engine"


def engine_jail(argv: list[str], read_only: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    """How the local model's engine starts (``bot.model.local.engine.Jail``): bubblewrap with no network, the
    host read-only with its homes, temp folders and secrets masked, ``read_only`` bound back in, nothing of the
    host writable (only ``ENGINE_SCRATCH``, an empty tmpfs of the jail's own: the engine's state snapshots), and
    an empty environment. A GGUF is untrusted input to a C++ parser; this is its sandbox."""
    chosen = backend("bwrap")
    plan = Plan(ro=tuple(p for p in read_only if needs_bind(p)), scratch=(ENGINE_SCRATCH,))
    return chosen.command(argv, cwd="/", env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"}, plan=plan, direct=True)


engine_jail.scratch = ENGINE_SCRATCH  # type: ignore[attr-defined]  # the Engine reads it: where snapshots go
