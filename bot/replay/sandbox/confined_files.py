"""The builtin agent's file tools, done by the executor inside the trial's sandbox: never outside the root.

Part of the executor's program (``bot.replay.sandbox.session.EXECUTOR_SOURCE`` is this source, then
``bot.replay.sandbox.executor``'s, compiled as one): builtin modules only, as the executor itself (it runs under
``python -I -S`` with no ``bot`` on the path). The harness imports it too, for the error and for tests.
"""

import _stat
import posix

try:
    from posix import _path_normpath  # posixpath.normpath's own C code (3.11+), without importing os
except ImportError:  # not every interpreter has it
    from posixpath import normpath as _path_normpath

READ_CAP = 8 << 20  # a file tool reads at most this much
_HOPS = 40


class FileToolError(Exception):
    pass


def open_beneath(root: str, rel: str, flags: int, *, make_dirs: bool = False, mode: int = 0o644) -> int:
    """Open ``rel`` below ``root`` one component at a time, each relative to its folder's fd.

    A link is followed only where it leads inside ``root`` (resolved here, by
    name); every open is ``O_NOFOLLOW``, so a link swapped in between two
    steps makes the open fail instead of leaving root.
    """
    if "\0" in rel:
        raise FileToolError("`path` holds a NUL byte; no file can be named so")
    root = _path_normpath(root) or "."  # posixpath.normpath
    todo = [p for p in rel.split("/") if p not in ("", ".")]
    if not todo:
        raise FileToolError(f"{rel}: is the repository root, not a file")
    stack = [posix.open(root, posix.O_RDONLY | posix.O_DIRECTORY)]
    hops = 0
    try:
        while todo:
            name = todo.pop(0)
            if name == "..":
                if len(stack) == 1:
                    raise FileToolError(f"{rel} is outside the repository")
                posix.close(stack.pop())
                continue
            try:
                st = posix.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if not todo:
                    break
                if not make_dirs:
                    raise FileToolError(f"{rel}: no such file") from None
                posix.mkdir(name, 0o755, dir_fd=stack[-1])
                st = posix.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            if _stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > _HOPS:
                    raise FileToolError(f"{rel}: too many levels of links")
                target = posix.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    norm = _path_normpath(target)
                    if norm != root and not norm.startswith(root + "/"):
                        raise FileToolError(f"{rel} is outside the repository")
                    for fd in stack[1:]:
                        posix.close(fd)
                    del stack[1:]
                    target = norm[len(root):]
                todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
            if todo:
                stack.append(posix.open(name, posix.O_RDONLY | posix.O_DIRECTORY | posix.O_NOFOLLOW, dir_fd=stack[-1]))
        if name == "..":
            raise FileToolError(f"{rel}: is a folder, not a file")
        return posix.open(name, flags | posix.O_NOFOLLOW | posix.O_CLOEXEC, mode, dir_fd=stack[-1])
    except OSError as err:
        if err.errno == 40:  # ELOOP: a link appeared where a file or folder was a moment ago
            raise FileToolError(f"{rel}: changed into a link while it was opened") from None
        raise
    finally:
        for fd in stack:
            posix.close(fd)


def read_file(root: str, path: str) -> str:
    fd = open_beneath(root, path, posix.O_RDONLY | posix.O_NONBLOCK)
    with open(fd, "rb") as f:
        if not _stat.S_ISREG(posix.fstat(f.fileno()).st_mode):
            raise FileToolError(f"{path}: no such file")
        return f.read(READ_CAP).decode("utf-8", errors="replace")


def write_file(root: str, path: str, content: str) -> None:
    fd = open_beneath(root, path, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC | posix.O_NONBLOCK, make_dirs=True)
    with open(fd, "wb") as f:
        if not _stat.S_ISREG(posix.fstat(f.fileno()).st_mode):
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
