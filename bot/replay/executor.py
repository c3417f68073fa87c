"""The executor: one small server inside a trial's one long-lived sandbox (issue 27 item 4).

Started by ``bot.replay.session`` as the sandbox's program (``python -I -S
executor.py FD``), it serves the harness over ``FD``, one end of a Unix
socket pair whose other end only the harness holds; there is no path to
connect to. A frame is a 4-byte big-endian length and a JSON object; a
``run`` request carries its stdin, stdout and stderr as file descriptors
(``SCM_RIGHTS``), so the output goes to the harness's pipes and never
through this process.

Requests, one at a time:

- ``{"op": "run", "argv", "cwd", "env"}`` + 3 fds: fork, ``setsid``, exec.
  Replies ``{"pid": N}`` (its pid inside), then ``{"rc": N}`` once it has
  exited **and every other process of the sandbox is gone** (killed: a
  background writer, a ``setsid`` daemon, a double fork); nothing a call
  starts outlives it. ``{"op": "kill"}`` while it runs (the deadline, a
  bound): SIGTERM to all, a grace, then SIGKILL.
- ``{"op": "read"|"write"|"edit", "root", "path", …}``: the builtin agent's
  file tools, done here, inside, by ``open_beneath``.

Why nothing inside can forge a reply or a request: the socket is close-on-exec
(no child inherits it), and this process is made non-dumpable, so a process of
the sandbox (same uid, no capabilities) cannot open ``/proc/<pid>/fd/FD`` or
ptrace it; the harness's end lives on the host. Killing this process ends
the call with no reply: the harness kills the whole sandbox and starts a new one.

With ``--notify NR HEX`` (``bot.replay.exec_notify``) it first installs that seccomp
program with a listener, so the kernel asks the harness about every ``execve`` and
exit of every process it starts, and hands the listener over with its ``ready``
reply, keeping no copy.

Only the standard library: it runs under ``-I -S`` with no ``bot`` on the path.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import stat
import struct
import subprocess
import sys
import time

MARKER = "replaybook-executor"  # argv[-1]: how the trace reader finds this process
MAX_FRAME = 64 << 20
READ_CAP = 8 << 20  # a file tool reads at most this much
_GRACE_S = 0.5
_HOPS = 40


class FileToolError(Exception):
    pass


# -- the wire ------------------------------------------------------------------------------
def send(sock: socket.socket, msg: dict, fds: list[int] = ()) -> None:
    data = json.dumps(msg).encode()
    head = struct.pack(">I", len(data))
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
    sock.sendmsg([head + data], anc)


def recv(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """One frame and the fds that came with it; (None, []) at end of stream."""
    fds: list[int] = []
    head = b""
    while len(head) < 4:
        chunk, anc, _, _ = sock.recvmsg(4 - len(head), socket.CMSG_SPACE(16 * 4))
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += list(struct.unpack(f"{len(raw) // 4}i", raw[:len(raw) - len(raw) % 4]))
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None, []
        head += chunk
    size = struct.unpack(">I", head)[0]
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(min(1 << 20, size - len(body)))
        if not chunk:
            return None, fds
        body += chunk
    return json.loads(body), fds


# -- file tools: never outside root, whatever links the tree holds or gains ----------------
def open_beneath(root: str, rel: str, flags: int, *, make_dirs: bool = False, mode: int = 0o644) -> int:
    """Open ``rel`` below ``root`` one component at a time, each relative to its folder's fd.

    A link is followed only where it leads inside ``root`` (resolved here, by
    name); every open is ``O_NOFOLLOW``, so a link swapped in between two
    steps makes the open fail instead of leaving root.
    """
    if "\0" in rel:
        raise FileToolError("`path` holds a NUL byte; no file can be named so")
    root = os.path.normpath(root)
    todo = [p for p in rel.split("/") if p not in ("", ".")]
    if not todo:
        raise FileToolError(f"{rel}: is the repository root, not a file")
    stack = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    hops = 0
    try:
        while todo:
            name = todo.pop(0)
            if name == "..":
                if len(stack) == 1:
                    raise FileToolError(f"{rel} is outside the repository")
                os.close(stack.pop())
                continue
            try:
                st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if not todo:
                    break
                if not make_dirs:
                    raise FileToolError(f"{rel}: no such file") from None
                os.mkdir(name, 0o755, dir_fd=stack[-1])
                st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > _HOPS:
                    raise FileToolError(f"{rel}: too many levels of links")
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    norm = os.path.normpath(target)
                    if norm != root and not norm.startswith(root + "/"):
                        raise FileToolError(f"{rel} is outside the repository")
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:]
                    target = norm[len(root):]
                todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
            if todo:
                stack.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=stack[-1]))
        if name == "..":
            raise FileToolError(f"{rel}: is a folder, not a file")
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=stack[-1])
    except OSError as err:
        if err.errno == 40:  # ELOOP: a link appeared where a file or folder was a moment ago
            raise FileToolError(f"{rel}: changed into a link while it was opened") from None
        raise
    finally:
        for fd in stack:
            os.close(fd)


def read_file(root: str, path: str) -> str:
    fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise FileToolError(f"{path}: no such file")
        return f.read(READ_CAP).decode("utf-8", errors="replace")


def write_file(root: str, path: str, content: str) -> None:
    fd = open_beneath(root, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, make_dirs=True)
    with os.fdopen(fd, "wb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise FileToolError(f"{path}: is not a regular file")
        f.write(content.encode("utf-8"))


def edit_file(root: str, path: str, old: str, new: str) -> None:
    text = read_file(root, path)
    if text.count(old) != 1:
        raise FileToolError(f"`old` occurs {text.count(old)} times in {path}; it must occur exactly once")
    write_file(root, path, text.replace(old, new))


def file_tool(req: dict) -> dict:
    try:
        op, root, path = req["op"], req["root"], req["path"]
        if op == "read":
            return {"ok": read_file(root, path)}
        if op == "write":
            write_file(root, path, req["content"])
        else:
            edit_file(root, path, req["old"], req["new"])
        return {"ok": ""}
    except (FileToolError, OSError) as err:
        return {"error": str(err) if isinstance(err, FileToolError) else f"{req.get('path')}: {err.strerror or err}"}


# -- processes -------------------------------------------------------------------------------
def _pids() -> set[int]:
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):  # dead, only not yet reaped
                out.add(int(name))
    return out


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all(keep: set[int], grace: float = 0.0) -> None:
    """Every process of the sandbox but ``keep`` (PID 1, this one, the bridges) is killed and gone."""
    if grace:
        for pid in _pids() - keep:
            _signal(pid, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and _pids() - keep:
            _reap()
            time.sleep(0.01)
    for _ in range(2000):  # a fork bomb is bounded by the harness's process limit; each pass kills what it sees
        left = _pids() - keep
        if not left:
            return
        for pid in left:
            _signal(pid, signal.SIGKILL)
        _reap()
        time.sleep(0.002)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(sock: socket.socket, req: dict, fds: list[int], keep: set[int]) -> bool:
    """One ``run`` request; False when the harness has gone (end of stream)."""
    try:
        child = subprocess.Popen(req["argv"], cwd=req["cwd"], env=req["env"], stdin=fds[0], stdout=fds[1],
                                 stderr=fds[2], start_new_session=True, close_fds=True)
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        os.write(fds[2], f"replaybook: cannot start {req['argv'][:1]!r}: {err}\n".encode())
        send(sock, {"rc": 127})
        return True
    finally:
        for fd in fds:
            os.close(fd)
    send(sock, {"pid": child.pid})
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    pidfd = os.pidfd_open(child.pid)
    sel.register(pidfd, selectors.EVENT_READ)
    alive = True
    while child.poll() is None:
        for key, _ in sel.select():
            if key.fd == sock.fileno():
                msg, extra = recv(sock)
                for fd in extra:
                    os.close(fd)
                if msg is None:
                    alive = False
                    kill_all(keep)
                elif msg.get("op") == "kill":
                    kill_all(keep, grace=_GRACE_S)
    sel.close()
    os.close(pidfd)
    kill_all(keep)
    if alive:
        send(sock, {"rc": child.returncode})
    return alive


def _no_dump() -> None:
    """Non-dumpable: no process of the sandbox may open our fds under /proc, read our memory or ptrace us."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _notify_filter(nr: int, code: bytes) -> int:
    """Install ``code`` (a BPF program) for this process and all it starts; the listener's fd."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(code, len(code))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: what an unprivileged filter needs
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog)
    fd = libc.syscall(nr, 1, 8, ctypes.byref(Prog(len(code) // 8, ctypes.addressof(buf))))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER) failed")
    return fd


def main() -> int:
    fd = int(sys.argv[1])
    os.set_inheritable(fd, False)
    sock = socket.socket(fileno=fd)
    _no_dump()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    keep = _pids() | {os.getpid(), 1}  # bwrap's init, this process, the endpoint bridges started before us
    if sys.argv[2:3] == ["--notify"]:
        try:
            listener = _notify_filter(int(sys.argv[3]), bytes.fromhex(sys.argv[4]))
        except (OSError, ValueError) as err:
            send(sock, {"error": f"the exec notification filter: {err}"})
            return 1
        send(sock, {"ready": os.getpid()}, [listener])
        os.close(listener)  # the harness's copy is the only one: when it closes, every exec fails, none goes unseen
    else:
        send(sock, {"ready": os.getpid()})
    while True:
        req, fds = recv(sock)
        if req is None:
            kill_all(keep)
            return 0
        if req.get("op") == "run" and len(fds) == 3:
            if not run(sock, req, fds, keep):
                return 0
        elif req.get("op") in ("read", "write", "edit"):
            for extra in fds:
                os.close(extra)
            send(sock, file_tool(req))
        else:
            for extra in fds:
                os.close(extra)
            send(sock, {"error": f"unknown request {req.get('op')!r}"})


if __name__ == "__main__":
    sys.exit(main())
