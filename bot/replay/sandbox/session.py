"""One long-lived sandbox per trial: the harness's side of ``bot.replay.sandbox.executor`` (issue 27 item 4).

Before, every tool call and every check started its own bwrap under its own
strace (4–6 namespace set-ups and tracer starts a trial). Now one bwrap runs the
executor for the whole trial, under one strace started from outside; each
request is one child of the executor, so the kernel trace still ties every
command to its tool call by process tree (``kernel_trace.Reader.request``).

Why a socket pair and not a FIFO or a listening socket: a pair has no name in
any file system, so nothing in the sandbox can connect to it; it carries the
call's stdin/stdout/stderr as descriptors, so output reaches the harness's
pipes (and its caps) directly; and only the harness's end is on the host.

The harness still watches the bounds from the host (processes under the
sandbox, output bytes, disk), kills the call through the executor, and, when the
executor does not answer in time (stopped or killed by the agent), kills the
whole sandbox: the next call gets a fresh one.
"""

from __future__ import annotations

import json
import marshal
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Mapping, Sequence

from bot.errors import InfrastructureError
from bot.replay.sandbox import confined_files, isolation
from bot.replay.sandbox import executor as executor_mod
from bot.replay.sandbox.process import LIVE, LIVE_LOCK, STOP, Bounds, Capture, Completed, Interrupted, Watch, kill_group
from bot.replay.trace import exec_notify
from bot.replay.trace import kernel as kernel_trace

_START_TIMEOUT_S = 30
_KILL_ANSWER_S = 3.0  # after a kill request, how long the executor may take to answer
_DRAIN_S = 0.5
# Its source: the executor runs wherever the package is installed, even in a folder the sandbox masks (a
# checkout or venv under /tmp, a home), and no file of the host is followed to start it.
# Two sources, one program: the file tools', then the executor's (which finds them defined).
EXECUTOR_SOURCE = Path(confined_files.__file__).read_text(encoding="utf-8") + "\n" + \
    Path(executor_mod.__file__).read_text(encoding="utf-8")
# ... compiled once here, for this interpreter: compiling it is 3 ms of every trial's start.
_EXECUTOR_CODE = marshal.dumps(compile(EXECUTOR_SOURCE, "replaybook-executor", "exec"))
# What ``python -c`` runs: it reads the program from the harness's socket (argv[1]; one frame, a 4-byte length
# first, that only the harness can write) and runs it. The program went in the ``-c`` argument itself before:
# 76 KB of hex that the kernel copies and the interpreter decodes at every start (about 1.5 ms a trial), and
# 128 KiB away from E2BIG.
_BOOT = ("import _socket,sys\n"
         "s=_socket.socket(fileno=int(sys.argv[1]))\n"
         "b=s.recv(int.from_bytes(s.recv(4,_socket.MSG_WAITALL),'big'),_socket.MSG_WAITALL)\n"
         "s.detach()\n")  # the fd stays open: the executor makes its own socket of it
_BOOT_CODE = _BOOT + "import marshal\nc=marshal.loads(b)\ndel s,b\nexec(c)\n"
_BOOT_SOURCE = _BOOT + "c=compile(b,'replaybook-executor','exec')\ndel s,b\nexec(c)\n"


def executor_program(python: str) -> tuple[str, bytes]:
    """What ``python -c`` runs, and the frame to send it on the socket: the executor compiled for this
    interpreter, else its source (another interpreter's bytecode may differ)."""
    boot, body = (_BOOT_CODE, _EXECUTOR_CODE) if python == sys.executable else \
        (_BOOT_SOURCE, EXECUTOR_SOURCE.encode("utf-8"))
    return boot, len(body).to_bytes(4, "big") + body


def send_program(sock: socket.socket, frame: bytes, timeout: float = _START_TIMEOUT_S) -> None:
    """The executor's program to its bootstrap. It fits a socket's default buffer, so this rarely waits, and
    never longer than a start may take; a sandbox that is gone or silent is found out by the start's own
    checks (unscored, never a hang)."""
    sock.settimeout(timeout)
    try:
        sock.sendall(frame)
    except OSError:  # socket.timeout among them
        pass


class Session:
    """One sandbox, its strace and its executor; ``run`` one call at a time, ``close`` at the end of the trial."""

    def __init__(self, backend: isolation.Backend, plan: isolation.Plan, *, cwd: Path, python: str,
                 trace_dir: Path | None, notify: exec_notify.Machine | None = None):
        """``trace_dir``: trace under strace, one file per process there; ``notify`` (with a ``trace_dir``):
        trace by seccomp notification instead (``bot.replay.trace.exec_notify``); the folder is then never used,
        and need not exist."""
        self.plan = plan
        self.notify = notify if trace_dir is not None else None
        self.trace_dir = trace_dir if self.notify is None else None
        self.reader: kernel_trace.Reader | exec_notify.Watch | None = \
            kernel_trace.Reader(trace_dir) if self.trace_dir is not None else None
        self.dead = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        status_r, status_w = os.pipe()
        # The session's stderr is a pipe drained into a bounded tail, never a host file: bwrap's own init
        # (pid 1 inside) holds it, and a call could reach it through /proc/1/fd/2 and grow the file past
        # every bound. Only start-up errors quote it, and no call has run before start-up ends.
        err_r, err_w = os.pipe()
        self._stderr: deque[bytes] = deque(maxlen=8)
        self._drain = threading.Thread(target=_drain, args=(err_r, self._stderr), daemon=True)
        try:
            boot, program = executor_program(python)
            argv = [python, "-I", "-S", "-B", "-c", boot, str(theirs.fileno()),
                    str(plan.limits.file_kib),
                    *(exec_notify.executor_args(self.notify) if self.notify else ()), executor_mod.MARKER]
            # direct: the executor sets its own file-size limit, so with no bridge to start bwrap runs it with no
            # bash between (one interpreter less per trial)
            host_argv, host_env = backend.command(argv, cwd=str(cwd), env={"PATH": "/usr/bin:/bin"}, plan=plan,
                                                  status_fd=status_w, direct=True)
            if self.trace_dir is not None:
                host_argv = kernel_trace.command(host_argv, self.trace_dir)
            self.proc = subprocess.Popen(host_argv, cwd=cwd, env=host_env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err_w, start_new_session=True,
                                         pass_fds=(status_w, theirs.fileno()))
        finally:
            os.close(status_w)
            os.close(err_w)
            theirs.close()
        self._drain.start()
        with LIVE_LOCK:
            LIVE.add(self.proc.pid)
        self.sock = ours
        send_program(ours, program)
        started = _started(status_r, _START_TIMEOUT_S)
        ready, fds = self._answer_with_fds(_START_TIMEOUT_S) if started else (None, [])
        if not ready or "ready" not in ready:
            for fd in fds:
                os.close(fd)
        if ready and "error" in ready:
            why = str(ready["error"])[:200].replace("{", "{{").replace("}", "}}")  # our executor's own words
            self._fail(f"the sandbox could not start its exec trace ({why}); the trial is unscored")
        if not ready or "ready" not in ready:
            self._fail("the sandbox could not start (bwrap exit {rc}): {err}")
        if self.notify is None or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            if self.notify is not None:
                self._fail("the sandbox's executor sent no exec listener; the trial is unscored")
        else:
            self.reader = exec_notify.Watch(fds[0], self.notify)
        if self.trace_dir is not None and not any(self.trace_dir.iterdir()):
            self._fail("strace could not trace the sandbox (exit {rc}): {err}")
        # What runs in the sandbox before any call: bwrap, its init, the executor and the bridges.
        self.baseline_procs = _count(self.proc.pid)
        self._replies = _Replies(self.sock)  # from here no reply carries a descriptor

    # -- the wire --------------------------------------------------------------------------
    def _answer_with_fds(self, timeout: float) -> tuple[dict | None, list[int]]:
        self.sock.settimeout(timeout)
        try:
            return executor_mod.read_reply(self.sock)
        except (OSError, ValueError):
            return None, []
        finally:
            self.sock.settimeout(None)

    def _fail(self, why: str) -> None:
        self.sock.close()
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        err = self._stderr_tail()
        self.close()
        raise InfrastructureError(why.format(rc=rc, err=err))

    def _stderr_tail(self) -> str:
        self._drain.join(timeout=1)
        return b"".join(self._stderr)[-400:].decode("utf-8", errors="replace").strip()

    # -- calls ------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str], stdin: str | bytes | None,
            timeout_s: float, output_cap: int, watch: Watch) -> tuple[Completed, int | None]:
        """Run one call; returns what it did and its pid inside (for the trace), None if it never started."""
        if STOP.is_set():
            raise Interrupted()
        start = time.monotonic()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_fd = _stdin_fd(stdin)
        if isinstance(self.reader, exec_notify.Watch):
            self.reader.begin()
        try:
            executor_mod.send_request(self.sock, {"op": "run", "argv": list(argv), "cwd": cwd, "env": dict(env)},
                              [in_fd, out_w, err_w])
        except OSError:
            self._kill()
        finally:
            for fd in (in_fd, out_w, err_w):
                os.close(fd)
        out, err = Capture(output_cap), Capture(output_cap)
        pid, rc, timed_out, limit = self._pump(out_r, err_r, out, err, start + timeout_s, watch)
        if STOP.is_set():
            raise Interrupted()
        if rc is None:  # the executor was stopped or killed: the sandbox went with it
            rc = -9
            err.add(b"\nreplaybook: the sandbox's executor stopped answering; the sandbox was ended\n")
        done = Completed(rc, out.text(), err.text(), timed_out, round(time.monotonic() - start, 4),
                         out.truncated, err.truncated, limit)
        return done, pid

    def _pump(self, out_r: int, err_r: int, out: Capture, err: Capture, deadline: float, watch: Watch):
        # poll, not a selector: epoll's set-up and tear-down were six system calls of every call
        poll, sock = select.poll(), self.sock.fileno()
        caps = {out_r: out, err_r: err}
        for fd in (*caps, sock):
            poll.register(fd, select.POLLIN)
        shifted = Watch(max_procs=None if watch.max_procs is None else watch.max_procs + self.baseline_procs,
                        max_output_bytes=watch.max_output_bytes, max_disk_bytes=watch.max_disk_bytes, disk=watch.disk)
        bounds = Bounds(shifted, self.proc.pid, [out, err])
        pid = rc = None
        timed_out, limit, asked, ended_at = False, None, None, None
        while True:
            now = time.monotonic()
            if ended_at is None and rc is None and asked is None:
                if STOP.is_set():
                    asked = self._ask_kill(now)
                elif now >= deadline:
                    timed_out, asked = True, self._ask_kill(now)
                elif (limit := bounds.broken(now)):
                    asked = self._ask_kill(now)
            if asked is not None and rc is None and now - asked > _KILL_ANSWER_S:
                self._kill()  # it does not answer: the whole sandbox goes
                ended_at = now
            if ended_at is not None and (now - ended_at > _DRAIN_S or not caps):
                break
            for fd, _ in poll.poll(20):
                if fd == sock:
                    self._replies.fill()
                    while rc is None and (msg := self._replies.pop()) is not None:  # a pid and its rc may come as one
                        pid, rc = msg.get("pid", pid), msg.get("rc")
                    if rc is not None or self._replies.ended:
                        if rc is None:  # the stream ended, or broke, with no answer
                            self._kill()
                        poll.unregister(sock)
                        ended_at = ended_at or time.monotonic()
                    continue
                data = os.read(fd, 65536)
                if data:
                    caps[fd].add(data)
                else:
                    poll.unregister(fd)
                    del caps[fd]
        os.close(out_r)
        os.close(err_r)
        if limit is None and watch.disk is not None and watch.max_disk_bytes is not None:
            if watch.disk(watch.max_disk_bytes) >= watch.max_disk_bytes:
                limit = f"disk limit: the sandbox holds {watch.max_disk_bytes >> 20} MiB or more"
        return pid, rc, timed_out, limit

    def _ask_kill(self, now: float) -> float:
        try:
            executor_mod.send_request(self.sock, {"op": "kill"})
        except OSError:
            self._kill()
        return now

    def file_tool(self, request: dict) -> dict:
        """A builtin file tool done by the executor, inside; ``{"ok": text}`` or ``{"error": why}``."""
        try:
            executor_mod.send_request(self.sock, request)
        except OSError:
            self._kill()
            return {"error": "the sandbox is gone"}
        answer = self._replies.next(60)
        if answer is None:
            self._kill()
            return {"error": "the sandbox stopped answering"}
        return answer

    # -- the end -----------------------------------------------------------------------------
    def _kill(self) -> None:
        self.dead = True
        kill_group(self.proc.pid)

    def close(self) -> None:
        """Closing the socket is the executor's signal to kill what is left and exit; then the sandbox ends."""
        try:
            self.sock.close()
        except OSError:
            pass
        if not _wait(self.proc, 2.0):
            kill_group(self.proc.pid)
            self.proc.wait()
        kill_group(self.proc.pid)
        with LIVE_LOCK:
            LIVE.discard(self.proc.pid)
        self._drain.join(timeout=1)
        if isinstance(self.reader, exec_notify.Watch):
            self.reader.close()
        self.dead = True


class _Replies:
    """The executor's replies as they arrive, read without waiting: one ``recvmsg`` takes what is there, which
    may be more than one frame (a ``pid`` and its ``rc``), and what is left is kept for the next ask.

    The framing is ``executor``'s (a 4-byte length, then a JSON object). Its ``read_reply`` reads a frame in
    four system calls, the socket's timeout set and unset around them: per call, more of the harness's
    CPU than the rest of the wire together. ``ended``: the stream ended or broke (a frame not an object,
    or over ``MAX_FRAME``); nothing more is read from it.
    """

    def __init__(self, sock: socket.socket):
        self.sock, self.buf, self.ended = sock, bytearray(), False
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    def pop(self) -> dict | None:
        """The next whole reply already read, else None."""
        if len(self.buf) < 4:
            return None
        size = int.from_bytes(self.buf[:4], "big")
        if size > executor_mod.MAX_FRAME or len(self.buf) < 4 + size:
            self.ended = self.ended or size > executor_mod.MAX_FRAME
            return None
        body = bytes(self.buf[4:4 + size])
        del self.buf[:4 + size]
        try:
            msg = json.loads(body)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            self.ended = True
            return None
        return msg

    def fill(self) -> None:
        """Take what has arrived; never waits."""
        try:
            data, anc, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(16 * 4), socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data, anc = b"", []
        for level, kind, raw in anc:  # none is sent after ``ready``: whatever comes is closed
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                for i in range(0, len(raw) - len(raw) % 4, 4):
                    os.close(int.from_bytes(raw[i:i + 4], sys.byteorder, signed=True))
        self.ended = self.ended or not data
        self.buf += data

    def next(self, timeout: float) -> dict | None:
        """The next reply within ``timeout`` seconds; None when none came whole (the caller ends the sandbox)."""
        deadline = time.monotonic() + timeout
        while (msg := self.pop()) is None and not self.ended:
            left = deadline - time.monotonic()
            if left <= 0 or not self._poll.poll(left * 1000):
                return None
            self.fill()
        return msg


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    """Whether ``proc`` ended within ``timeout``; woken by its pidfd the moment it does (``Popen.wait``'s
    timeout polls with sleeps that double up to 50 ms, most of a session's close)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:  # already reaped
        return proc.poll() is not None
    try:
        select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    return proc.poll() is not None


def _started(fd: int, timeout: float) -> bool:
    """Whether the sandbox says it started: the launcher's byte, or bwrap's whole ``--info-fd`` JSON.

    Read to the message's end, not to EOF: strace and its ``unshare``, between us and bwrap, hold the
    pipe's write end for the session's life. Not less either: bwrap writes its JSON in pieces, and a piece
    written after our end closed would kill it with SIGPIPE. Nothing within ``timeout`` seconds: not
    started (unscored, never a hang). Closes ``fd``.
    """
    got, deadline = b"", time.monotonic() + timeout
    try:
        while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0] and (chunk := os.read(fd, 4096)):
            got += chunk
            if got == b"1" or got.rstrip().endswith(b"}") or len(got) > 1 << 16:
                break
    finally:
        os.close(fd)
    return got != b""


def _drain(fd: int, tail: deque[bytes]) -> None:
    """Read the session's stderr to its end, keeping only the last few chunks."""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(1 << 16):
            tail.append(chunk)


def _count(pid: int) -> int:
    from bot.replay.sandbox.process import count_tree

    return count_tree(pid, 1 << 16)


def _stdin_fd(stdin: str | bytes | None) -> int:
    if stdin is None:
        return os.open(os.devnull, os.O_RDONLY)
    f = tempfile.TemporaryFile()
    f.write(stdin.encode() if isinstance(stdin, str) else stdin)
    f.seek(0)
    fd = os.dup(f.fileno())
    f.close()
    return fd
