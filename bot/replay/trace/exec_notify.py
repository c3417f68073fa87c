"""The kernel's trace of the trial's sandbox by seccomp user notification: every ``execve``, no ptrace.

``strace`` (``bot.replay.trace.kernel``) stops every traced process at each
fork, each traced call and each exit, about 2 ms a process on these machines:
18–26% of a replay sample (bench/README.md, issue 27). Here the kernel itself
asks the harness about each ``execve``/``execveat`` and each exit, and about
nothing else: the executor (``bot.replay.sandbox.executor``) installs a seccomp filter
with a listener before any call runs, hands the listener to the harness over
its socket and keeps no copy, and every process of every call inherits the
filter. Nothing inside can remove a filter, and no filter added below ours can
take the listener (the kernel refuses a second listener in one filter tree:
``EBUSY``); a filter that kills or fails ``execve`` only stops the exec. When
the harness's end closes, each notified call fails with ``ENOSYS``: the record
can be lost only by the exec being refused.

What a notification gives, read from ``/proc`` while the caller waits for our
answer (checked still valid with ``SECCOMP_IOCTL_NOTIF_ID_VALID`` before it is
kept): the program and argv from the caller's memory, the working directory
(``/proc/PID/cwd``, exact, no ``chdir`` replayed), the parent, the pid inside.
An ``execve`` is only asked for; whether it ran is learnt after, from what
only a successful exec changes (``_ran``): the kernel's ``PF_FORKNOEXEC`` flag
(set at fork, cleared by the exec that succeeds: exact for a process that has
not exec'd since its fork), the auxiliary vector (``/proc/PID/auxv``), or the
address space itself (the old one, held open since the attempt, released or
holding other ``AT_RANDOM`` bytes than the process's now: 16 bytes the kernel
draws afresh at every exec, even under ``setarch -R``, where a same-length
re-exec of the same file leaves the vector byte-identical). An exec is
*confirmed* when its process is next seen so changed (its next exec or exit,
or a sweep while it runs); an attempt whose process is next seen unchanged
failed (``execvp`` trying each PATH folder) and is dropped. One never seen again (killed at once) is kept
*unconfirmed*: it counts for ``not_ran`` and ``max_runs``, never for ``ran``,
so a failing exec cannot forge a run and a killed one cannot hide one. What
the caller's memory said is only a claim (another thread may rewrite it after
our read, ``memfd_secret`` memory cannot be read at all): at confirmation the
program and argv are read from the new image (``programs.image``: its ``exe``,
links resolved, and its ``cmdline``; a script's own file), the caller's name
kept as ``called``; an exec whose name or argv cannot be read is refused
(``EACCES``), so none runs unseen.

Attribution needs no process tree here: the executor runs one call at a time
and kills everything of a call before it answers, so every exec between a
request and its answer is that call's (``Watch.request``), an orphan's too
(its parent gone, it hangs from the executor, the sandbox's pid 1). The parent links
read from ``/proc`` give ``ppid`` and ``depth``. Agent programs, which need the
tree to tell their own commands from their tool calls', keep strace for the tree, and a ``Watch`` of
their own for each exec's program and argv (``bot.replay.trace.exec_images``, ``Watch.execs``).
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import select
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bot import settings
from bot.errors import InfrastructureError
from bot.replay.sandbox import procfs
from bot.replay.trace import kernel as kernel_trace
from bot.replay.trace.exec_filter import Abi, Machine, available, executor_args, filter_program, machine  # noqa: F401
from bot.replay.trace import programs
from bot.replay.trace.events import CommandEvent, ShellEvent

# <linux/seccomp.h>
_NOTIF_RECV, _NOTIF_SEND, _NOTIF_ID_VALID = 0xC0502100, 0xC0182101, 0x40082102
_FLAG_CONTINUE = 1
_NOTIF = struct.Struct("=QII iI Q 6Q")  # id, pid, flags, data.{nr, arch, instruction_pointer, args[6]}
_RESP = struct.Struct("=QqiI")  # id, val, error, flags
_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000

RECORD_CAP = 32 << 20  # bytes of argv kept for one sandbox; past it nothing more is kept and the trial is unscored
_SWEEP_S = 0.002


STRACE_ALONE_WARNING = (
    "WARNING: the trial's sandbox is traced by strace alone (REPLAYBOOK_KERNEL_TRACE=strace, or no seccomp user "
    "notification on this kernel): a program is recorded by the name its caller passed, not by the file the "
    "kernel ran, so a link (`ln -s /usr/bin/git g`), a copy, a `#!` line's interpreter and a re-exec are taken "
    "as called; check outcomes with `succeeds` (docs/security.md)."
)


def session_engine() -> Machine | None:
    """How the trial's one sandbox is traced: by seccomp notification where the kernel allows it (the
    default), by strace otherwise or when ``REPLAYBOOK_KERNEL_TRACE=strace`` says so."""
    if (settings.get("REPLAYBOOK_KERNEL_TRACE") or "auto") == "strace" or not available():
        return None
    return machine()


# -- the record ---------------------------------------------------------------------------------
@dataclass
class _Attempt:
    exec: kernel_trace._Exec
    auxv: bytes
    proc_dir: int  # an fd of /proc/<tgid>: bound to that process, never to one that reuses its pid
    kernel_name: str  # the file name as the kernel keeps it (a script's interpreter gets it as an argument)
    path: str  # the name made absolute, links not yet resolved
    mem: int  # an fd of the caller's /proc/<tid>/mem: bound to the address space the exec was asked from
    fork_no_exec: bool  # the caller had not exec'd since its fork (``PF_FORKNOEXEC``)
    random_at: int | None  # where its AT_RANDOM bytes lie (``procfs.at_random``)


class Watch:
    """The harness's end of one sandbox's listener: a thread answering the kernel, and what it recorded."""

    def __init__(self, listener: int, machine_: Machine):
        self.listener, self.machine = listener, machine_
        self.procs: dict[int, kernel_trace._Proc] = {}
        self._ns: dict[int, int] = {}  # host pid -> its pid inside the sandbox
        self.nspids: dict[int, tuple[int, ...]] = {}  # host pid -> its pid in each namespace, outermost first
        self._outside: set[int] = set()  # the executor and its ancestors (``_known_ancestor``)
        self._base = _own_filters(os.getpid())  # the harness's own seccomp filters
        self._pending: dict[int, _Attempt] = {}
        self._lock = threading.Lock()
        self._bytes = 0
        self._call_from = 0.0
        self.asked = {"exec": 0, "exit": 0}  # notifications answered, by kind (what the trace costs)
        self.overflow = False
        self.failed = False  # the thread stopped answering before the sandbox ended
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="exec-notify", daemon=True)
        self._thread.start()
        # The host tools' index (``programs.host_tool``), built once a process, off the path of the first exec.
        threading.Thread(target=programs.host_tools_index, name="host-tools", daemon=True).start()

    # -- what the session asks ---------------------------------------------------------------
    def size(self) -> int:
        return RECORD_CAP + 1 if self.overflow else self._bytes

    def begin(self) -> None:
        """A request is about to go to the executor: what is recorded from now on is its call's.

        What is left from before (a call nobody asked the record of: set-up, a check) is dropped, so a
        process of this call that gets a pid one of them had is never taken for it."""
        with self._lock:
            self._call_from = time.time()
            for attempt in self._pending.values():
                _close(attempt)
            self._pending.clear()
            self.procs.clear()
            self._ns.clear()

    def request(self, ns_pid: int, *, cwd: str, root: Path, tool_call: str | None) -> list[CommandEvent | ShellEvent]:
        """The commands of the call that just ended (its process ``ns_pid`` inside); the call's processes are gone."""
        if self.failed:
            raise InfrastructureError("the kernel's exec notifications stopped being answered; the trial is unscored")
        with self._lock:
            self._settle()
            top = max((p.forked_at, pid) for pid, p in self.procs.items()
                      if self._ns.get(pid) == ns_pid and p.forked_at >= self._call_from) if self.procs else None
            events: list[CommandEvent | ShellEvent] = []
            if top is None:
                return events
            kernel_trace._walk(self.procs, top[1], 0.0, root, tool_call, events, depth=0, skip_first=True)
            # An orphan (its parent ended before it exec'd: a double fork, ``( cmd & )``) is the executor's
            # child by then (pid 1 reaps them all), so it hangs from no recorded process; it is this call's all
            # the same, as is every process between a request and its answer.
            for pid, proc in self.procs.items():
                if proc.parent is None and pid != top[1] and proc.forked_at >= self._call_from:
                    kernel_trace._walk(self.procs, pid, 0.0, root, tool_call, events, depth=0, skip_first=False)
            self.procs.clear()  # a call's record is read once
            self._ns.clear()
        events.sort(key=lambda e: e.started_at if isinstance(e, CommandEvent) else kernel_trace._EPOCH)
        return events

    def execs(self, level: int) -> tuple[dict[int, list[kernel_trace._Exec]], dict[int, int]]:
        """After the run has ended: every exec recorded, by its process's pid in the namespace ``level`` deep
        (0: the harness's), oldest first (a pid used twice holds both processes' execs, in order); and each
        process's nearest recorded ancestor when it was first seen (``_known_ancestor``), by the same pids."""
        with self._lock:
            self._settle()
            pid = {tgid: ns[min(level, len(ns) - 1)] for tgid, ns in self.nspids.items()}
            out: dict[int, list[kernel_trace._Exec]] = {}
            for tgid, proc in self.procs.items():
                out.setdefault(pid.get(tgid, tgid), []).extend(proc.execs)
            parents = {pid.get(t, t): pid.get(p.parent, p.parent) for t, p in self.procs.items() if p.parent}
        return {p: sorted(execs, key=lambda e: e.t) for p, execs in out.items()}, parents

    def close(self) -> None:
        """After the sandbox has ended: the thread stops and the listener closes."""
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        with self._lock:
            for attempt in self._pending.values():
                _close(attempt)
            self._pending.clear()

    # -- the kernel's questions ----------------------------------------------------------------
    def _serve(self) -> None:
        poll = select.poll()
        poll.register(self.listener, select.POLLIN)
        poll.register(self._wake_r, select.POLLIN)
        buf = bytearray(_NOTIF.size)
        ended = False
        try:
            while True:
                ready = poll.poll(_SWEEP_S * 1000 if self._pending else None)
                if not ready:
                    with self._lock:
                        self._sweep()
                    continue
                if any(fd == self._wake_r for fd, _ in ready) or \
                        any(ev & (select.POLLHUP | select.POLLERR) for fd, ev in ready if fd == self.listener):
                    ended = True  # closed by the session, or every process under the filter has ended
                    return
                buf[:] = bytes(_NOTIF.size)  # the kernel refuses a buffer that is not zeroed
                try:
                    fcntl.ioctl(self.listener, _NOTIF_RECV, buf, True)
                except OSError as err:
                    if err.errno in (errno.ENOENT, errno.EINTR):
                        continue  # the caller died before we read it
                    raise
                with self._lock:
                    self._answer(buf)
        finally:
            if not ended:  # the calls from here fail (ENOSYS): the harness's failure, never the agent's
                self.failed = True
            os.close(self.listener)  # from here every notified call fails with ENOSYS, never runs unseen

    def _answer(self, buf: bytearray) -> None:
        nid, tid, _flags, nr, arch, _ip, *args = _NOTIF.unpack(buf)
        refuse = False
        try:
            refuse = self._note(nid, tid, nr, arch, args)
        finally:
            answer = _RESP.pack(nid, 0, -errno.EACCES, 0) if refuse else _RESP.pack(nid, 0, 0, _FLAG_CONTINUE)
            try:
                fcntl.ioctl(self.listener, _NOTIF_SEND, bytearray(answer), True)
            except OSError:
                pass  # it died meanwhile

    def _note(self, nid: int, tid: int, nr: int, arch: int, args: list[int]) -> bool:
        """Record one notification; True: refuse the exec (``EACCES``), since what it names cannot be read
        (memory the tracer may not read, ``memfd_secret``; or past the record's cap): none runs unseen."""
        m = self.machine
        abi = m.native if arch == m.native.audit_arch else m.compat
        if abi is None:
            return False
        now = time.time()
        status = procfs.status(tid)
        if status is None:
            return False
        tgid = int(status.get("Tgid", tid))
        if nr in (abi.execve, abi.execveat):
            self.asked["exec"] += 1
            attempt = self._attempt(tid, tgid, nr == abi.execveat, abi, args, now)
            if attempt is None:
                return True
            if not _valid(self.listener, nid):  # it died while we read: what we read may be another's
                _close(attempt)
                return False
            proc = self._proc(tgid, status, now)
            self._resolve(proc, tgid)
            self._pending[tgid] = attempt
            return False
        elif nr == abi.exit_group or (nr == abi.exit and tid == tgid and status.get("Threads") == "1"):
            self.asked["exit"] += 1
            if not _valid(self.listener, nid):
                return
            proc = self._proc(tgid, status, now)
            self._resolve(proc, tgid)
            proc.exit_code, proc.ended = args[0] & 0xFF, now
        return False

    def _proc(self, tgid: int, status: dict[str, str], now: float) -> kernel_trace._Proc:
        proc = self.procs.get(tgid)
        if proc is not None:
            return proc
        proc = self.procs[tgid] = kernel_trace._Proc(tgid, forked_at=now)
        ns = status.get("NSpid", "").split()
        self._ns[tgid] = int(ns[-1]) if ns else tgid
        self.nspids[tgid] = tuple(int(n) for n in ns) or (tgid,)
        parent = self._known_ancestor(int(status.get("PPid", "0")))
        if parent is not None:
            proc.parent = parent
            self.procs[parent].children.append((now, tgid, self._ns[tgid]))
        return proc

    def _known_ancestor(self, pid: int) -> int | None:
        """The nearest ancestor already recorded (a subshell that never execs is passed through).

        The walk stops at the executor, which is never recorded: above it nothing is under our filter.
        A process under no more filters than the harness itself is not under ours (every process
        below the executor inherits ours on top of the harness's), so it is one of the executor's
        ancestors, and the filtered process just below it is the executor; all of them live as long
        as the sandbox, so no pid of theirs can be reused by a process of the trial while this watch
        lasts, and each is remembered (``_outside``): from the second call on a call's first process
        costs no read above it (it was five ``/proc`` reads up to the host's init)."""
        below = None
        for _ in range(64):
            if pid in self.procs:
                return pid
            if pid <= 1 or pid in self._outside:
                return None
            status = procfs.status(pid)
            if status is None:
                return None
            filters = procfs.filters(status)
            if filters is not None and self._base is not None and filters <= self._base:
                self._outside.add(pid)
                if below is not None:
                    self._outside.add(below)
                return None
            below, pid = pid, int(status.get("PPid", "0"))
        return None

    def _attempt(self, tid: int, tgid: int, at: bool, abi: Abi, args: list[int], now: float) -> _Attempt | None:
        try:
            proc_dir = os.open(f"/proc/{tgid}", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return None
        mem_fd = -1
        try:
            mem_fd = os.open(f"/proc/{tid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            dirfd, name_at, argv_at, flags = (_signed(args[0]), args[1], args[2], args[4]) if at \
                else (_AT_FDCWD, args[0], args[1], 0)
            mem = procfs.Memory(mem_fd)
            name = mem.string(name_at)
            argv = mem.argv(argv_at, abi.pointer)
            fork_no_exec = tid == tgid and procfs.fork_no_exec(proc_dir)  # a thread's own flag is not its process's
            cwd = os.readlink(f"/proc/{tid}/cwd")
            program = path = kernel_name = name  # the caller's name; the path the kernel walks; the name it keeps
            if at and dirfd != _AT_FDCWD and (not name.startswith("/") or (not name and flags & _AT_EMPTY_PATH)):
                base = os.readlink(f"/proc/{tid}/fd/{dirfd}")
                program = os.path.join(base, name).rstrip("/") if name else base
                path, kernel_name = f"{base}/{name}", f"/dev/fd/{dirfd}/{name}" if name else f"/dev/fd/{dirfd}"
            elif not name.startswith("/"):
                program, path = os.path.normpath(os.path.join(cwd, name)), f"{cwd}/{name}"
            auxv = procfs.read_at(proc_dir, "auxv")
        except (OSError, ValueError):
            os.close(proc_dir)
            if mem_fd >= 0:
                os.close(mem_fd)
            return None
        self._bytes += sum(len(a) for a in argv) + len(program)
        if self._bytes > RECORD_CAP:
            self.overflow = True  # the sandbox reads that as the trace's bound broken: memory stays bounded
            os.close(proc_dir)
            os.close(mem_fd)
            return None
        return _Attempt(kernel_trace._Exec(now, program, argv, cwd, called=program), auxv, proc_dir, kernel_name,
                        path, mem_fd, fork_no_exec, procfs.at_random(auxv, abi.pointer))

    def _resolve(self, proc: kernel_trace._Proc, tgid: int, *, sweeping: bool = False) -> None:
        """The pending exec of ``tgid``: confirmed if it ran (``_ran``), dropped if not (unless sweeping)."""
        attempt = self._pending.get(tgid)
        if attempt is None:
            return
        try:
            ran = _ran(attempt)
        except OSError:
            return  # gone: settled as unconfirmed
        if not ran:
            if not sweeping:
                del self._pending[tgid]
                _close(attempt)
            return
        del self._pending[tgid]
        ex = attempt.exec
        try:  # what the kernel ran, from the new image: the caller's memory may have changed after our read
            claim = ex.argv
            ex.program, ex.argv, whole = programs.image(attempt.proc_dir, attempt.kernel_name, attempt.path, claim)
            exe = os.readlink("exe", dir_fd=attempt.proc_dir).removesuffix(" (deleted)")
            copy = programs.host_tool(attempt.proc_dir, "exe" if ex.program == exe else "root" + ex.program)
            ex.program = copy or ex.program
            ex.module = programs.workspace_module(attempt.proc_dir, ex.argv, ex.program)
            # A process tracing its own child can rewrite the new image's argv before we read it: kept both.
            ex.claimed = None if procfs.same_argv(whole, claim) else claim
        except OSError:
            pass  # gone meanwhile: what the caller named, as read
        finally:
            _close(attempt)
        proc.execs.append(ex)

    def _sweep(self) -> None:
        for tgid in list(self._pending):
            proc = self.procs.get(tgid)
            if proc is not None:
                self._resolve(proc, tgid, sweeping=True)

    def _settle(self) -> None:
        """The call has ended: what is still pending never showed a new image (it was killed at once)."""
        self._sweep()
        for tgid, attempt in list(self._pending.items()):
            proc = self.procs.get(tgid)
            _close(attempt)
            del self._pending[tgid]
            if proc is not None:
                attempt.exec.confirmed = False
                proc.execs.append(attempt.exec)
        for proc in self.procs.values():
            if proc.execs and proc.exit_code is None:
                proc.exit_code = -9  # ended by a signal the notification does not name


def _ran(attempt: _Attempt) -> bool:
    """Whether the exec ``attempt`` asked for has replaced the process's image (OSError: the process is gone).

    A process that had not exec'd since its fork carries ``PF_FORKNOEXEC`` until an exec succeeds, and nothing
    else clears it: exact. Else (a re-exec) a new auxiliary vector says so; a same-length re-exec of the same
    file under ``setarch -R`` keeps the vector byte-identical, not the address space: the exec released the one
    the attempt was made from (its ``mem``, held open since, reads nothing) or, where another process shares
    it (``CLONE_VM``), the 16 bytes ``AT_RANDOM`` points to differ between the two (the kernel draws them
    afresh at every exec). Read as current, old, current, so a thread of a failed exec rewriting its own bytes
    between two reads proves no run."""
    if procfs.read_at(attempt.proc_dir, "auxv") != attempt.auxv:
        return True
    if attempt.fork_no_exec:
        return not procfs.fork_no_exec(attempt.proc_dir)
    at = attempt.random_at
    if at is None:
        return False
    try:
        old = os.pread(attempt.mem, 16, at)
    except OSError:
        old = b""
    if len(old) < 16:
        return True  # the address space the exec was asked from is gone: the exec replaced it
    fd = os.open("mem", os.O_RDONLY | os.O_CLOEXEC, dir_fd=attempt.proc_dir)
    try:
        first, again = os.pread(fd, 16, at), None
        old = os.pread(attempt.mem, 16, at)
        again = os.pread(fd, 16, at)
    finally:
        os.close(fd)
    return first == again and len(first) == 16 and first != old


def _close(attempt: _Attempt) -> None:
    os.close(attempt.proc_dir)
    os.close(attempt.mem)


@functools.lru_cache(maxsize=4)
def _own_filters(pid: int) -> int | None:
    """The seccomp filters this process runs under: only the process itself can add one, and the harness never
    does, so it is read once (by pid: a forked child is read anew), not at every sandbox's start."""
    return procfs.filters(procfs.status(pid) or {})


def _valid(listener: int, nid: int) -> bool:
    try:
        fcntl.ioctl(listener, _NOTIF_ID_VALID, bytearray(struct.pack("=Q", nid)), True)
        return True
    except OSError:
        return False


def _signed(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value
