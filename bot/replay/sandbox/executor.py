"""The executor: one small server inside a trial's one long-lived sandbox (issue 27 item 4).

Started by ``bot.replay.sandbox.session`` as the sandbox's program (``python -I -S -c BOOT FD FILE_KIB
[--notify …]``, straight from bwrap when no bridge needs a launcher, so it sets the file-size limit
itself; ``BOOT`` reads this program, compiled, as the first frame on ``FD``), it serves the harness over
``FD``, one end of a Unix socket pair whose other end only the harness holds; there is no path to
connect to. A frame is a 4-byte big-endian length and a JSON object; a ``run`` request carries its
stdin, stdout and stderr as file descriptors (``SCM_RIGHTS``), so the output goes to the harness's
pipes and never through this process.

Requests, one at a time:

- ``{"op": "run", "argv", "cwd", "env"}`` + 3 fds: ``posix_spawn`` in a new session.
  Replies ``{"pid": N}`` (its pid inside), then ``{"rc": N}`` once it has
  exited **and every other process of the sandbox is gone** (killed: a
  background writer, a ``setsid`` daemon, a double fork); nothing a call
  starts outlives it. ``{"op": "kill"}`` while it runs (the deadline, a
  bound): SIGTERM to all, a grace, then SIGKILL.
- ``{"op": "read"|"write"|"edit", "root", "path", …}``: the builtin agent's
  file tools, done here, inside, by ``open_beneath`` (``bot.replay.sandbox.confined_files``, whose source is sent
  before this one in the same frame).

Why nothing inside can forge a reply or a request: the socket is close-on-exec
(no child inherits it), and this process is made non-dumpable, so a process of
the sandbox (same uid, no capabilities) cannot open ``/proc/<pid>/fd/FD`` or
ptrace it; the harness's end lives on the host. It is the sandbox's pid 1 (bwrap's ``--as-pid-1``), so
no process inside can kill it either (pid 1 takes no signal it has no handler for from its own namespace),
every orphan is its child, and its end ends every process of the sandbox. Every process it starts is in a
Landlock domain (``_confine``): none can attach to, or write the memory of, a process outside it (the
endpoint bridges). If the harness kills it, the call ends with no reply: the sandbox goes, a new one starts.

With ``--notify NR HEX`` (``bot.replay.trace.exec_notify``) it first installs that seccomp
program with a listener, so the kernel asks the harness about every ``execve`` and
exit of every process it starts, and hands the listener over with its ``ready``
reply, keeping no copy.

Only builtin modules: it runs under ``-I -S`` with no ``bot`` on the path, and it starts once per
trial, so what it imports is paid on every trial: ``json``, ``subprocess``, ``selectors``, ``socket``
and ``signal`` cost 25 ms of start here, ``ctypes`` 1.5 ms (``_Libc`` is on ``_ctypes``), ``os`` 0.9 ms
(``posix`` is what it wraps), even ``from __future__`` 0.1 ms. So a request is ``marshal`` (the harness
wrote it: the executor trusts its harness), and a reply is JSON written by hand (``_dumps``: flat
objects of strings and integers), which the harness parses with ``json``, safe against any bytes.
"""

import _signal
import _socket
import errno
import marshal
import posix
import select
import sys
import time

try:  # the executor's program is ``bot.replay.sandbox.confined_files``'s source, then this one (``session.EXECUTOR_SOURCE``)
    file_tool, FileToolError  # noqa: B018
except NameError:  # imported by the harness, which has the package
    from bot.replay.sandbox.confined_files import FileToolError, edit_file, file_tool, open_beneath, read_file, write_file  # noqa: F401

MARKER = "replaybook-executor"  # argv[-1]: how the trace reader finds this process
MAX_FRAME = 64 << 20
_GRACE_S = 0.5
_SOL_SOCKET, _SCM_RIGHTS = _socket.SOL_SOCKET, _socket.SCM_RIGHTS


# -- the wire ------------------------------------------------------------------------------
def send_request(sock, msg: dict, fds: list[int] = ()) -> None:
    """The harness's side: one request, and the fds that go with it."""
    _send(sock, marshal.dumps(msg), fds)


def read_reply(sock) -> tuple[dict | None, list[int]]:
    """The harness's side: one reply and its fds; (None, []) at end of stream. ValueError if it is not JSON."""
    import json  # the harness has it loaded; the executor never calls this

    body, fds = _read(sock)
    if body is None:
        return None, []
    msg = json.loads(body)
    if not isinstance(msg, dict):
        raise ValueError("a reply that is not an object")
    return msg, fds


def _send_reply(sock, msg: dict, fds: list[int] = ()) -> None:
    _send(sock, _dumps(msg).encode("utf-8", "backslashreplace"), fds)


def _read_request(sock) -> tuple[dict | None, list[int]]:
    body, fds = _read(sock)
    return (None, []) if body is None else (marshal.loads(body), fds)


_ESCAPES = {**{i: f"\\u{i:04x}" for i in range(32)}, ord('"'): '\\"', ord("\\"): "\\\\"}


def _dumps(msg: dict) -> str:
    """JSON for a flat object of strings and integers. A lone surrogate leaves as ``\\udcXX`` (the encoder's
    ``backslashreplace``), which JSON reads back as the same code point."""
    def value(v) -> str:
        return str(int(v)) if isinstance(v, int) else '"' + str(v).translate(_ESCAPES) + '"'

    return "{" + ",".join(f"{value(str(k))}:{value(v)}" for k, v in msg.items()) + "}"


def _send(sock, data: bytes, fds) -> None:
    anc = [(_SOL_SOCKET, _SCM_RIGHTS, b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds))] \
        if fds else []
    sock.sendmsg([len(data).to_bytes(4, "big") + data], anc)


def _read(sock) -> tuple[bytes | None, list[int]]:
    """One frame and the fds that came with it; (None, []) at end of stream, any fds closed."""
    fds: list[int] = []
    head = b""
    while len(head) < 4:
        # close-on-exec as they arrive: a call inherits nothing but the three fds it is given (``_spawn``)
        chunk, anc, _, _ = sock.recvmsg(4 - len(head), _socket.CMSG_SPACE(16 * 4), _socket.MSG_CMSG_CLOEXEC)
        for level, kind, raw in anc:
            if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
                fds += [int.from_bytes(raw[i:i + 4], sys.byteorder, signed=True)
                        for i in range(0, len(raw) - len(raw) % 4, 4)]
        if not chunk:
            for fd in fds:
                posix.close(fd)
            return None, []
        head += chunk
    size = int.from_bytes(head, "big")
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(min(1 << 20, size - len(body)))
        if not chunk:
            for fd in fds:
                posix.close(fd)
            return None, []
        body += chunk
    return bytes(body), fds


# -- processes -------------------------------------------------------------------------------
def _pids(keep: set[int] = frozenset()) -> set[int]:
    """The live processes of the sandbox but ``keep``, whose state is not read (6 µs each, after every call)."""
    out = set()
    for name in posix.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):  # dead, only not yet reaped
                out.add(int(name))
    return out


_REAPED: dict[int, int] = {}  # pid -> wait status, of the call's own child when ``_reap`` took it first


def _reap() -> None:
    while True:
        try:
            pid, status = posix.waitpid(-1, posix.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _REAPED[pid] = status


def _wait(pid: int) -> int:
    """``pid``'s wait status, whether it is reaped now or was by ``_reap`` while it was being killed."""
    try:
        return posix.waitpid(pid, 0)[1]
    except ChildProcessError:
        return _REAPED.pop(pid, 9)  # not ours to reap and not seen: as if killed


def kill_all(keep: set[int], grace: float = 0.0) -> None:
    """Every process of the sandbox but ``keep`` (PID 1, this one, the bridges) is killed and gone."""
    if grace:
        for pid in _pids(keep):
            _kill(pid, _signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and _pids(keep):
            _reap()
            time.sleep(0.01)
    for _ in range(2000):  # a fork bomb is bounded by the harness's process limit; each pass kills what it sees
        left = _pids(keep)
        if not left:
            return
        for pid in left:
            _kill(pid, _signal.SIGKILL)
        _reap()
        time.sleep(0.002)


def _kill(pid: int, sig: int) -> None:
    try:
        posix.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _spawn(argv: list[str], cwd: str, env: dict[str, str], fds: list[int]) -> int:
    """Start ``argv`` in ``cwd`` in a new session, ``fds`` as its stdin, stdout and stderr; its pid.

    By ``posix_spawn``, a vfork: a fork copied this interpreter's page tables, then each page either side
    wrote before the exec (about 1.5 ms a call, child and parent). What the forked child did in Python is
    done here or asked of the spawn: ``cwd`` is entered here and left after (nothing else runs meanwhile),
    the PATH searched here (``_spawnp``), SIGXFSZ (Python ignores it) made default again, and no fd but the
    three is inherited: every other fd of this process is close-on-exec (``_inherit_nothing``,
    ``MSG_CMSG_CLOEXEC``). A failure is the ``OSError`` the forked child reported: the errno and its text,
    else the error's own text."""
    how = {"file_actions": [(posix.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)],
           "setsid": True, "setsigdef": (_signal.SIGXFSZ,)}
    here = posix.open(".", posix.O_PATH | posix.O_DIRECTORY)  # this process's own folder, never changed for long
    try:
        posix.chdir(cwd)
        return _spawnp(argv, env, how)
    except Exception as err:  # noqa: BLE001 - any reason a program cannot start is the caller's 127
        code = err.errno if isinstance(err, OSError) and err.errno else 0
        why = posix.strerror(code) if code else str(err)[:500].encode("utf-8", "replace").decode("utf-8", "replace")
        raise OSError(code, why) from None
    finally:
        posix.fchdir(here)
        posix.close(here)


def _spawnp(argv: list[str], env: dict[str, str], how: dict) -> int:
    """``os.execvpe``'s search of ``env``'s PATH, but no ``execve`` for a folder that holds no such file.

    A name no folder has is ruled out by ``stat``, which the kernel trace does not see, instead of by a
    failed ``execve``, which it must be asked about (``bot.replay.trace.exec_notify``): a check's ``grep`` on a
    nine-folder PATH was eight notifications before its one exec. (``os.get_exec_path`` imported
    ``warnings`` in every call's child.)"""
    if "/" in argv[0]:
        return posix.posix_spawn(argv[0], argv, env, **how)
    last = saved = None  # the last error; the first one other than "no such file"
    for folder in env.get("PATH", "/bin:/usr/bin").split(":"):  # os.get_exec_path (os.defpath)
        path = folder + argv[0] if not folder or folder.endswith("/") else f"{folder}/{argv[0]}"  # os.path.join
        try:
            posix.stat(path)
            return posix.posix_spawn(path, argv, env, **how)
        except (FileNotFoundError, NotADirectoryError) as err:
            last = err
        except OSError as err:
            last = err
            saved = saved or err
    raise saved or last or FileNotFoundError(errno.ENOENT, posix.strerror(errno.ENOENT), argv[0])


def run(sock, req: dict, fds: list[int], keep: set[int]) -> bool:
    """One ``run`` request; False when the harness has gone (end of stream)."""
    try:
        child = _spawn(list(req["argv"]), req["cwd"], dict(req["env"]), fds)
    except (OSError, ValueError, TypeError, IndexError) as err:
        posix.write(fds[2], f"replaybook: cannot start {list(req['argv'])[:1]!r}: {err}\n".encode())
        _send_reply(sock, {"rc": 127})
        return True
    finally:
        for fd in fds:
            posix.close(fd)
    _REAPED.clear()
    _send_reply(sock, {"pid": child})
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    pidfd = posix.pidfd_open(child)
    poll.register(pidfd, select.POLLIN)
    alive, status = True, None
    while status is None:
        for fd, _ in poll.poll():
            if fd == pidfd:
                status = _wait(child)
                break
            msg, extra = _read_request(sock)
            for other in extra:
                posix.close(other)
            if msg is None:
                alive = False
                kill_all(keep)
                poll.unregister(sock.fileno())
            elif msg.get("op") == "kill":
                kill_all(keep, grace=_GRACE_S)
    posix.close(pidfd)
    kill_all(keep)
    if alive:
        _send_reply(sock, {"rc": posix.waitstatus_to_exitcode(status)})
    return alive


class _Libc:
    """``ctypes.CDLL(None, use_errno=True)`` for the few calls made here, on the builtin ``_ctypes`` alone: the
    ``ctypes`` package (with ``struct`` and ``types``) was 1.5 ms of every trial's start. ``libc.name(…)``
    calls ``name`` with C ints (a ``bytes`` goes as a pointer to its bytes) and returns its C int."""

    def __init__(self) -> None:
        import _ctypes

        class Int(_ctypes._SimpleCData):  # ctypes.c_int: what CDLL's functions return
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):  # what CDLL(None, use_errno=True) makes of a name
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Int

        self.c, self._function, self.errno = _ctypes, Function, _ctypes.get_errno
        self._handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)  # this program and the libc it links

    def __getattr__(self, name: str):
        return self._function((name, self))  # looked up in ``self._handle``


def _no_dump(libc: _Libc) -> None:
    """Non-dumpable: no process of the sandbox may open our fds under /proc, read our memory or ptrace us."""
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(libc.errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _confine(libc: _Libc) -> bool:
    """A Landlock domain for this process and all it starts, so none of them can ``ptrace`` (or open the
    ``/proc/PID/mem`` of, or ``process_vm_writev`` into) a process outside it: the endpoint bridges the
    launcher started before us. Landlock refuses those to a process in a domain whose target is in none or
    in an outer one, whatever the user; within, calls may trace their own processes (``strace``, ``gdb``),
    and this process is non-dumpable (``_no_dump``). The domain restricts nothing else a call may do: from
    ABI 6 it only scopes signals (none reaches a process outside); before, it handles making block devices
    (which no process here can) and cross-folder renames and links, allowed everywhere by a rule on ``/``
    (a domain that handles files refuses those otherwise). False where the kernel has no Landlock, or only
    ABI 1 (Linux 5.13–5.18), whose domains refuse every cross-folder rename. Needs no-new-privs, set before."""
    abi = libc.syscall(444, 0, 0, 1)  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 2:
        return False
    refer, word = 1 << 13, lambda n, size=8: n.to_bytes(size, sys.byteorder)
    attr = word(0) + word(0) + word(2) if abi >= 6 else word(refer | 1 << 11)  # SCOPE_SIGNAL; REFER|MAKE_BLOCK
    fd = libc.syscall(444, attr, len(attr), 0)  # (444-446 in every ABI's table)
    if fd < 0:
        return False
    try:
        if abi < 6:
            root = posix.open("/", 0o10000000 | posix.O_CLOEXEC)  # O_PATH
            try:  # struct landlock_path_beneath_attr (packed): allowed_access, parent_fd
                if libc.syscall(445, fd, 1, word(refer) + word(root, 4), 0) != 0:
                    return False
            finally:
                posix.close(root)
        return libc.syscall(446, fd, 0) == 0  # landlock_restrict_self
    finally:
        posix.close(fd)


def _notify_filter(libc: _Libc, nr: int, code: bytes) -> int:
    """Install ``code`` (a BPF program) for this process and all it starts; the listener's fd."""
    class UShort(libc.c._SimpleCData):
        _type_ = "H"

    class CharP(libc.c._SimpleCData):  # a pointer to a bytes' own buffer, which it keeps alive
        _type_ = "z"

    class Prog(libc.c.Structure):  # struct sock_fprog
        _fields_ = [("len", UShort), ("filter", CharP)]

    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog)
    fd = libc.syscall(nr, 1, 8, libc.c.byref(Prog(len(code) // 8, code)))
    if fd < 0:
        raise OSError(libc.errno(), "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER) failed")
    return fd


def _set_file_limit(libc: _Libc, kib: int) -> None:
    """``ulimit -S -H -f KIB``: RLIMIT_FSIZE, soft and hard, before any call runs (a failure is ignored, as
    ``ulimit`` there ignores it: the limit can only have been lowered already). No ``resource`` (0.1 ms of
    the start): a ``struct rlimit`` is two C longs (Linux's ``rlim_t``), passed as bytes, below RLIM_INFINITY."""
    width = (sys.maxsize.bit_length() + 1) // 8
    limit = min(kib * 1024, (1 << 8 * width) - 2).to_bytes(width, sys.byteorder)
    libc.setrlimit(1, limit + limit)  # RLIMIT_FSIZE


def _inherit_nothing() -> None:
    """Every fd this process started with but 0-2 (the socket's among them) is made close-on-exec: ``_spawn``
    closes none, so a call inherits its three fds and nothing else. Python opens every other one so."""
    for name in posix.listdir("/proc/self/fd"):
        try:
            if int(name) > 2:
                posix.set_inheritable(int(name), False)
        except OSError:  # the listing's own fd, closed by now
            pass


def main() -> int:
    _inherit_nothing()
    sock = _socket.socket(fileno=int(sys.argv[1]))
    libc = _Libc()
    _set_file_limit(libc, int(sys.argv[2]))
    _no_dump(libc)
    _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    keep = _pids() | {posix.getpid(), 1}  # this process (pid 1), the endpoint bridges started before us
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: what Landlock and an unprivileged filter need
        _send_reply(sock, {"error": f"prctl(PR_SET_NO_NEW_PRIVS) failed: errno {libc.errno()}"})
        return 1
    confined = int(_confine(libc))
    if sys.argv[3:4] == ["--notify"]:
        try:
            listener = _notify_filter(libc, int(sys.argv[4]), bytes.fromhex(sys.argv[5]))
        except (OSError, ValueError) as err:
            _send_reply(sock, {"error": f"the exec notification filter: {err}"})
            return 1
        _send_reply(sock, {"ready": posix.getpid(), "confined": confined}, [listener])
        posix.close(listener)  # the harness's copy is the only one: when it closes, every exec fails, none goes unseen
    else:
        _send_reply(sock, {"ready": posix.getpid(), "confined": confined})
    while True:
        req, fds = _read_request(sock)
        if req is None:
            kill_all(keep)
            return 0
        if req.get("op") == "run" and len(fds) == 3:
            if not run(sock, req, fds, keep):
                return 0
        elif req.get("op") in ("read", "write", "edit"):
            for extra in fds:
                posix.close(extra)
            _send_reply(sock, file_tool(req))
        else:
            for extra in fds:
                posix.close(extra)
            _send_reply(sock, {"error": f"unknown request {req.get('op')!r}"})


if __name__ == "__main__":
    posix._exit(main())  # nothing to flush: no interpreter teardown at the end of every trial
