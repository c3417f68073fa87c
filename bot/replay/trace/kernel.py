"""The kernel's trace of a sandboxed run: every ``execve`` by any route, recorded from outside.

Each recorded run of the sandbox (a builtin tool call, an agent program) is
started under ``strace --seccomp-bpf -f -ff`` (see ``STRACE_FLAGS``). The
tracer runs on the host and writes one file per process into a folder the
sandbox never sees, so nothing inside can evade the record (an absolute path,
``command -p``, a PATH of its own, ``hash -p``, ``os.execv``) or forge one.

``read_run`` turns those files into trace events:

- a ``CommandEvent`` per successful ``execve``/``execveat`` (one exec, one
  record): its argv, the program (``program``: here the name the caller passed; below the harness's
  Landlock step, where the seccomp notification runs too, read from the new image, ``read_run``'s
  ``images``), the working
  directory (tracked per process through ``chdir``/``fchdir`` and inherited
  on fork), the exit status of the process, its pid and parent pid;
- the harness's own processes are left out: strace's child (bwrap), the
  sandbox launcher and the endpoint bridges it starts, and the run's root
  program (the shell a builtin tool call runs in, or the agent program);
- under an agent program, each shell it starts itself becomes a
  ``ShellEvent`` whose id every command below it carries in ``tool_call``
  (``checks.attribute`` matches it to a tool call by its script); a command
  the agent program starts outside any shell is its own (``tool_call=''``);
- under a tool call the harness started (``tool_call`` given), every command
  below the root belongs to that call.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from bot.errors import InfrastructureError
from bot.replay.sandbox import host_tools
from bot.replay.trace.events import UNATTRIBUTED, CommandEvent, ShellEvent, relative_cwd

SYSCALLS = "execve,execveat,chdir,fchdir,clone,clone3,fork,vfork,exit_group"
# --seccomp-bpf: the tracee stops only at the traced syscalls, not at every one (the cost stays small).
# -ff: one file per process, so no line is split by another's; --pidns-translation: clone's result is
# also given as strace's pid, which names the child's file (see ``tracer_namespace`` for its cost); -y: fchdir's fd shows its path; -s: whole arguments.
STRACE_FLAGS = ("--seccomp-bpf", "-f", "-ff", "-q", "-ttt", "-y", "-s", "65536", "--pidns-translation",
                "-e", "signal=none", "-e", f"trace={SYSCALLS}")
LAUNCHER_NAME = "replaybook-sandbox"  # bot.replay.sandbox.isolation.launcher's $0
CONFINE_NAME = "replaybook-confine"  # bot.replay.sandbox.isolation.CONFINE_NAME, the $0 of the step after it
EXECUTOR = "replaybook-executor"  # bot.replay.sandbox.executor.MARKER, its last argument
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "fish"})
FILE_CAP = 64 << 20  # of one process's trace file; past it the rest is not read

_LINE = re.compile(rb"^(\d+\.\d+) (\w+)\((.*)\)\s+= (-?\d+|\?)(?: /\* (\d+) in strace's PID NS \*/)?")
_EXIT = re.compile(rb"^(\d+\.\d+) \+\+\+ (exited with (\d+)|killed by (SIG\w+))")
_SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGABRT": 6, "SIGKILL": 9, "SIGSEGV": 11, "SIGPIPE": 13,
            "SIGALRM": 14, "SIGTERM": 15, "SIGXFSZ": 25}


def strace() -> str:
    """The harness's own strace (its startup PATH); a machine without it cannot trace: the harness's failure."""
    found = host_tools.find("strace")
    if found is None:
        raise InfrastructureError("strace is not on PATH: the replay's trace comes from the kernel "
                                  "(apt-get install strace); the trial is unscored")
    return found


def command(host_argv: Sequence[str], out_dir: Path) -> list[str]:
    """``host_argv`` under strace, one file per process in ``out_dir`` (which must lie outside the sandbox)."""
    return [*tracer_namespace(), strace(), *STRACE_FLAGS, "-o", str(out_dir / "p"), "--", *host_argv]


_OWN_PID_NS = (("--pid", "--fork", "--mount-proc", "--kill-child"),  # root (CI, containers)
               ("--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child"))


@functools.cache
def tracer_namespace() -> tuple[str, ...]:
    """``unshare`` giving strace a pid namespace of its own, above the sandbox's; () where none can be made.

    strace translates a pid by reading every ``/proc/<pid>/status`` it can see, once per new process:
    on a host with a hundred processes that was most of the trace's cost (a 62-process run took 4.0×
    its untraced time, 1.3× in a namespace of its own, bench/README.md). Inside its own namespace the
    tracer sees only itself and the trial. Nothing inside the sandbox sees that namespace (the
    sandbox's is below it), and when strace, its init, ends, the kernel ends every process under it.
    Where this machine allows no such namespace the tracer runs as before: slower, the same record."""
    unshare = host_tools.find("unshare")
    if unshare is None:
        return ()
    bwrap = host_tools.find("bwrap")
    probe = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
             "true"] if bwrap else ["true"]
    for flags in _OWN_PID_NS:
        try:
            ok = subprocess.run([unshare, *flags, *probe], stdin=subprocess.DEVNULL, capture_output=True,
                                env={"PATH": "/usr/bin:/bin"}, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return (unshare, *flags)
    return ()


@dataclass
class _Exec:
    t: float
    program: str
    argv: list[str]
    cwd: str
    confirmed: bool = True  # False: asked for, never seen running (``bot.replay.trace.exec_notify``)
    called: str | None = None  # the file as the caller named it, when ``program`` is read from the new image
    claimed: list[str] | None = None  # the caller's argv, when the new image held another
    module: str | None = None  # for ``python -m X``: the workspace's file X resolved to (``programs.workspace_module``)


@dataclass
class _Proc:
    pid: int
    parent: int | None = None
    forked_at: float = 0.0
    cwd: str | None = None
    execs: list[_Exec] = field(default_factory=list)
    exit_code: int | None = None
    ended: float | None = None
    children: list[tuple[float, int, int]] = field(default_factory=list)  # (fork time, child pid, its pid inside)
    dirs: list[tuple[float, str]] = field(default_factory=list)  # (time, chdir/fchdir target)
    first: float | None = None  # its first line's time
    unattributed: bool = False  # its fork was lost and its parent is not known (``_take_images``)


def read_run(out_dir: Path, *, cwd: str, root: Path, tool_call: str | None,
             images: tuple[dict[int, list[_Exec]], dict[int, int]] | None = None) -> list[CommandEvent | ShellEvent]:
    """The events of one traced run (see the module docstring); ``cwd`` is where it started (a host path).

    ``images`` (``bot.replay.trace.exec_images``): every exec below the harness's Landlock step, read from the new
    images, by pid, and each process's parent as the notification saw it; strace's own exec lines there are not
    used (it reads names from the caller's memory)."""
    procs = _read_files(out_dir)
    if not procs:
        return []
    top = min(procs, key=lambda pid: (procs[pid].parent is not None, pid))  # strace's child: no traced parent
    if images is not None:
        _take_images(procs, top, *images)
    _settle_cwds(procs, top, cwd)
    root_pid, root_t = _run_root(procs, top)
    if root_pid is None:
        return []
    events: list[CommandEvent | ShellEvent] = []
    _walk(procs, root_pid, root_t, root, tool_call, events, depth=0, skip_first=True)
    events.sort(key=lambda e: e.started_at if isinstance(e, CommandEvent) else _EPOCH)
    return events


_EPOCH = datetime.fromtimestamp(0, tz=timezone.utc)


def _run_root(procs: dict[int, _Proc], top: int) -> tuple[int | None, float]:
    """The run's own program: what the launcher ``exec``s, or (no launcher: ``--sandbox none``) strace's child."""
    for proc in procs.values():
        for i, ex in enumerate(proc.execs):
            if len(ex.argv) > 3 and ex.argv[1] == "-c" and ex.argv[3] == LAUNCHER_NAME:
                i += 1
                if i + 1 < len(proc.execs) and CONFINE_NAME in proc.execs[i].argv[4:6]:
                    i += 1  # the launcher's Landlock step (``isolation.confined``): the harness's too
                nxt = proc.execs[i] if i < len(proc.execs) else None
                return (proc.pid, nxt.t) if nxt else (None, 0.0)
    proc = procs.get(top)
    if proc is None or not proc.execs:
        return None, 0.0
    return proc.pid, proc.execs[0].t


def _take_images(procs: dict[int, _Proc], top: int, execs: dict[int, list[_Exec]], parents: dict[int, int]) -> None:
    """Below the Landlock step (the process that exec'd it, from that exec on, and all it forked after), each
    process's execs are the notification's, never strace's; an exec strace saw there and the notification did
    not is the harness's failure (the filter holds every process there).

    strace loses one stop of a process after an exec it was not stopped for (the notification outranks its
    own seccomp stop: "Stray PTRACE_EVENT_EXEC … trying to recover" swallows the next traced call). When that
    call was a fork, the child hangs from nothing: it is hung from the parent the notification saw, or, where
    none was seen (its parent gone before it was first seen), from the run's program as a command of no known
    origin (``unattributed``: counted as a tool call's, never the agent machinery's)."""
    step = next(((proc, i) for proc in procs.values() for i, ex in enumerate(proc.execs)
                 if CONFINE_NAME in ex.argv[4:6]), None)
    if step is None:
        raise InfrastructureError("the trace holds no Landlock step of the harness's; the trial is unscored")
    proc, i = step
    since = proc.execs[i].t
    proc.execs = proc.execs[:i + 1] + _lifetime(proc, execs, since)
    for pid, kid in procs.items():  # a fork strace lost: hung from the parent the notification saw, else the program
        if kid.parent is None and pid != top and kid is not proc and (kid.first or 0.0) >= since:
            parent = parents.get(pid)
            if parent in procs and pid in _subtree(procs, parent):
                parent = None  # a pid used twice would hang it from its own descendant: a loop that hides both
            # Its first exec may come before strace's first line of it (strace lost that exec too).
            seen = [e.t for e in execs.get(pid, []) if e.t >= since] + [kid.first or since]
            kid.parent, kid.forked_at = (parent if parent in procs else proc.pid), min(seen)
            kid.unattributed = parent not in procs
            procs[kid.parent].children.append((kid.forked_at, pid, pid))
    stack, done = [child for t, child, _ in proc.children if t >= since], set()
    while stack:
        kid = procs.get(stack.pop())
        if kid is None or kid.pid in done:
            continue
        done.add(kid.pid)
        seen, kid.execs = kid.execs, _lifetime(kid, execs, kid.forked_at)
        if len(seen) > len(kid.execs):
            raise InfrastructureError("strace saw an exec the exec notification did not; the trial is unscored")
        stack += [child for _, child, _ in kid.children]


def _subtree(procs: dict[int, _Proc], pid: int) -> set[int]:
    """``pid`` and every process below it (each once, whatever loops the children lists hold)."""
    seen: set[int] = set()
    stack = [pid]
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        if cur in procs:
            stack += [child for _, child, _ in procs[cur].children]
    return seen


def _lifetime(proc: _Proc, execs: dict[int, list[_Exec]], since: float) -> list[_Exec]:
    """The notified execs of ``proc``'s pid while it lived (a pid may name two processes in turn)."""
    return [e for e in execs.get(proc.pid, []) if e.t >= since and (proc.ended is None or e.t <= proc.ended)]


def _walk(procs, pid, since, root, tool_call, events, *, depth, skip_first, shell_id=None) -> None:
    """Record ``pid``'s execs from ``since`` on, then its children forked since then (a stack, not recursion:
    a chain of generations can be longer than Python's recursion limit)."""
    stack, walked = [(pid, since, depth, skip_first, shell_id)], set()
    while stack:
        pid, since, depth, skip_first, shell_id = stack.pop()
        proc = procs.get(pid)
        if proc is None or pid in walked:  # each process once, even where a reused pid made its children a loop
            continue
        walked.add(pid)
        execs = [e for e in proc.execs if e.t >= since]
        inner = depth
        for i, ex in enumerate(execs):
            if skip_first and i == 0:
                continue
            if tool_call is None and shell_id is None and os.path.basename(ex.program) in SHELLS:
                # A shell the agent program started itself: its commands are matched to a tool call by its script.
                shell_id = f"shell:{pid}:{ex.t}"
                events.append(ShellEvent(id=shell_id, argv=ex.argv[1:]))
                continue
            marker = tool_call if tool_call is not None else (shell_id or "")
            events.append(_event(proc, ex, root, marker, inner, execs, i))
            inner = depth + 1
        for forked, child, _ in sorted(proc.children, reverse=True):
            if forked >= since:
                lost = procs.get(child) is not None and procs[child].unattributed
                stack.append((child, 0.0, inner, False, UNATTRIBUTED if lost else shell_id))


def _event(proc: _Proc, ex: _Exec, root: Path, marker: str, depth: int, execs: list[_Exec], i: int) -> CommandEvent:
    end = execs[i + 1].t if i + 1 < len(execs) else (proc.ended or ex.t)  # an exec ends the image before it
    return CommandEvent(
        argv=ex.argv, program=ex.program, cwd=relative_cwd(ex.cwd, root),
        exit_code=proc.exit_code if proc.exit_code is not None and i + 1 == len(execs) else 0,
        duration_ms=round(max(0.0, end - ex.t) * 1000, 3),
        started_at=datetime.fromtimestamp(ex.t, tz=timezone.utc), depth=depth, tool_call=marker,
        pid=proc.pid, ppid=proc.parent, confirmed=ex.confirmed,
        called=ex.called if ex.called not in (None, ex.program) else None, claimed=ex.claimed, module=ex.module,
    )


def _settle_cwds(procs: dict[int, _Proc], top: int, start: str) -> None:
    """Each exec's cwd: chdir/fchdir replayed in order, a child starting where its parent was at the fork."""
    pending, settled = [(top, start)], set()
    while pending:
        pid, cwd = pending.pop()
        proc = procs.get(pid)
        if proc is None or pid in settled:
            continue
        settled.add(pid)
        events = sorted([(e.t, 0, e) for e in proc.execs] + [(t, 1, c) for t, c, _ in proc.children]
                        + [(t, 2, d) for t, d in proc.dirs], key=lambda x: (x[0], x[1]))
        for _, kind, item in events:
            if kind == 0:
                item.cwd = item.cwd or cwd  # a notified exec's is exact already (its /proc/PID/cwd)
            elif kind == 1:
                pending.append((item, cwd))
            else:
                cwd = os.path.normpath(os.path.join(cwd, item))


def _read_files(out_dir: Path) -> dict[int, _Proc]:
    reader = Reader(out_dir)
    reader.update()
    return reader.procs


class Reader:
    """The trace of one long-lived sandbox (``bot.replay.sandbox.session``), read on as it grows: whole lines only."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.procs: dict[int, _Proc] = {}
        self._offsets: dict[str, int] = {}
        self._executor: int | None = None

    def update(self) -> None:
        try:
            files = [f for f in os.scandir(self.out_dir) if f.name.startswith("p.") and f.name[2:].isdigit()]
        except OSError:
            return
        for f in files:
            start = self._offsets.get(f.name, 0)
            if start >= FILE_CAP:
                continue
            pid = int(f.name[2:])
            proc = self.procs.setdefault(pid, _Proc(pid))
            with open(f.path, "rb") as fh:
                fh.seek(start)
                data = fh.read(FILE_CAP - start)
            whole = data.rfind(b"\n") + 1  # a line strace is still writing is read next time
            self._offsets[f.name] = start + whole
            for line in data[:whole].split(b"\n"):
                _parse_line(line, proc, self.procs)

    def request(self, ns_pid: int, *, cwd: str, root: Path, tool_call: str | None) -> list[CommandEvent | ShellEvent]:
        """The events of one executor request (its child ``ns_pid`` inside): the same reading as ``read_run``."""
        self.update()
        child = self._child(ns_pid)
        if child is None:
            return []
        _settle_cwds(self.procs, child, cwd)
        events: list[CommandEvent | ShellEvent] = []
        _walk(self.procs, child, 0.0, root, tool_call, events, depth=0, skip_first=True)
        events.sort(key=lambda e: e.started_at if isinstance(e, CommandEvent) else _EPOCH)
        return events

    def _child(self, ns_pid: int) -> int | None:
        """The host pid of the executor's latest child that is ``ns_pid`` inside."""
        if self._executor is None:  # the first process to exec the executor: before any request ran
            found = [(ex.t, p.pid) for p in self.procs.values() for ex in p.execs
                     if ex.argv[-1:] == [EXECUTOR] and ex.argv[1:3] == ["-I", "-S"]]  # not bwrap's, the launcher's
            if not found:
                return None
            self._executor = min(found)[1]
        kids = [(t, host) for t, host, ns in self.procs[self._executor].children if ns == ns_pid]
        return max(kids)[1] if kids else None


def _parse_line(line: bytes, proc: _Proc, procs: dict[int, _Proc]) -> None:
    m = _LINE.match(line)
    stamp = m or _EXIT.match(line)
    if proc.first is None and stamp is not None:
        proc.first = float(stamp.group(1))
    if m is None:
        e = _EXIT.match(line)
        if e is not None:
            proc.ended = float(e.group(1))
            proc.exit_code = int(e.group(3)) if e.group(3) else -_SIGNALS.get(e.group(4).decode(), 1)
        return
    t, name, args, result, host_pid = float(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
    if result == b"?" or result.startswith(b"-"):
        return  # exit_group, or a call that failed (e.g. execvp trying each PATH folder)
    if name in (b"execve", b"execveat"):
        if not _READABLE.match(args if name == b"execve" else args.split(b", ", 1)[-1]):
            # strace shows an address where it could not read the name or argv (``memfd_secret`` memory): the
            # exec ran, and what it ran is not known. Never a record with argv shifted into the program's place.
            raise InfrastructureError("an exec named its program in memory the tracer could not read (strace); "
                                      "the trial is unscored")
        # Without -v the environment shows as ``0x… /* N vars */``: every quoted string is the program, then argv.
        strings = _strings(args)
        if not strings:
            return
        if name == b"execveat":  # execveat(dirfd</path>, "prog", [argv], …): a relative prog is under dirfd
            fd = re.match(rb"\d+<(.*?)>, ", args)
            if fd and not strings[0].startswith("/"):
                strings[0] = os.path.join(_unescape(fd.group(1)), strings[0]).rstrip("/")
        proc.execs.append(_Exec(t, strings[0], strings[1:], ""))
    elif name in (b"clone", b"clone3", b"fork", b"vfork"):
        child = int(host_pid or result)
        proc.children.append((t, child, int(result)))
        kid = procs.setdefault(child, _Proc(child))
        kid.parent, kid.forked_at = proc.pid, t
    elif name == b"chdir":
        strings = _strings(args)
        if strings:
            proc.dirs.append((t, strings[0]))
    elif name == b"fchdir":
        fd = re.match(rb"\d+<(.*)>$", args)
        if fd:
            proc.dirs.append((t, _unescape(fd.group(1))))


_STRING = re.compile(rb'"((?:[^"\\]|\\.)*)"')
_READABLE = re.compile(rb'"(?:[^"\\]|\\.)*"(?:\.\.\.)?, (?:\[|NULL)')  # a name strace read, then argv it read


def _strings(args: bytes) -> list[str]:
    return [_unescape(s) for s in _STRING.findall(args)]


_ESC = re.compile(rb"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"v": b"\v", b"f": b"\f", b"a": b"\a", b"b": b"\b", b"e": b"\x1b"}


def _unescape(raw: bytes) -> str:
    def one(m: re.Match) -> bytes:
        code = m.group(1)
        if code[:1] == b"x" and len(code) == 3:
            return bytes([int(code[1:], 16)])
        if code[:1].isdigit():
            return bytes([int(code, 8) & 0xFF])
        return _SIMPLE.get(code, code)

    return _ESC.sub(one, raw).decode("utf-8", errors="backslashreplace")
