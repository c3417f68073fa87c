"""What ``/proc`` says of a process the kernel stopped for the harness: its status fields, its files, its memory.

Read by ``bot.replay.trace.exec_notify`` while the caller waits for the listener's answer; bounded, so a
hostile argv costs at most the caps below.
"""

from __future__ import annotations

import os
import stat
import struct

ARG_CAP = 65536  # of one argv string, as strace's -s
ARGV_CAP = 4096  # argv entries read
EXEC_CAP = 8 << 20  # argv bytes read for one exec: the kernel refuses more than 6 MiB (E2BIG) anyway


STATUS_KEYS = tuple((key, f"\n{key}:".encode()) for key in ("Tgid", "PPid", "NSpid", "Threads", "Seccomp_filters"))


def status(pid: int) -> dict[str, str] | None:
    """The fields of ``/proc/PID/status`` the record needs (found, not every line split: it runs per notification)."""
    try:  # os.open, not open(): a Python file object costs more than the kernel's whole answer here
        fd = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = _read_all(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    out = {}
    for key, tag in STATUS_KEYS:
        at = raw.find(tag)
        if at >= 0:
            at += len(tag)
            end = raw.find(b"\n", at)
            out[key] = raw[at:end if end >= 0 else len(raw)].decode("ascii", "replace").strip()
    return out


def filters(status: dict[str, str]) -> int | None:
    """How many seccomp filters the process runs under (``None``: this kernel does not say, before 5.9)."""
    value = status.get("Seccomp_filters", "")
    return int(value) if value.isdigit() else None


_PF_FORKNOEXEC = 0x40  # <linux/sched.h>: forked but did not exec
_AT_RANDOM = 25


def fork_no_exec(proc_dir: int) -> bool:
    """Whether the process (its ``/proc/PID`` fd) has not exec'd since its fork: ``PF_FORKNOEXEC``, in ``stat``'s
    flags (field 9), which the kernel sets at fork and clears at the exec that succeeds, and nothing else sets."""
    raw = read_at(proc_dir, "stat")
    fields = raw[raw.rfind(b")") + 2:].split()  # the name before ")" may hold spaces
    return bool(int(fields[6]) & _PF_FORKNOEXEC)


def at_random(auxv: bytes, width: int) -> int | None:
    """Where the 16 random bytes the kernel gave the image lie (``AT_RANDOM``), from its auxiliary vector
    (``width``: the bytes of one of its words, the process's ABI's pointer size)."""
    fmt = "=QQ" if width == 8 else "=II"
    for at in range(0, len(auxv) - 2 * width + 1, 2 * width):
        kind, value = struct.unpack_from(fmt, auxv, at)
        if kind == _AT_RANDOM:
            return value
        if kind == 0:
            break
    return None


def read_at(dirfd: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        return _read_all(fd)
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


class Memory:
    """Another process's memory, read through ``/proc/PID/mem`` (an fd) a 4 KiB chunk at a time, each chunk once.

    An exec's argv pointers and strings lie together on a page or two of the caller's memory: read so,
    one ``pread`` brings them all, where a read per pointer and per string (each a seek and a read)
    was two system calls apiece. A chunk never crosses a page, so an unmapped page fails alone, as
    before. At most what the caps below allow is ever held.
    """

    CHUNK = 4096

    def __init__(self, fd: int):
        self.fd = fd
        self._chunks: dict[int, bytes] = {}

    def _chunk(self, start: int) -> bytes:
        data = self._chunks.get(start)
        if data is None:
            data = self._chunks[start] = os.pread(self.fd, self.CHUNK, start)
            if not data:
                raise ValueError("unreadable memory")
        return data

    def read(self, at: int, size: int) -> bytes:
        out = b""
        while len(out) < size:
            start = (at + len(out)) // self.CHUNK * self.CHUNK
            offset = at + len(out) - start
            piece = self._chunk(start)[offset:offset + size - len(out)]
            if not piece:
                raise ValueError("unreadable memory")
            out += piece
        return out

    def string(self, at: int) -> str:
        out = b""
        while len(out) < ARG_CAP:
            start = (at + len(out)) // self.CHUNK * self.CHUNK
            piece = self._chunk(start)[at + len(out) - start:][:ARG_CAP - len(out)]
            if not piece:
                raise ValueError("unreadable string")
            end = piece.find(b"\0")
            if end >= 0:
                out += piece[:end]
                break
            out += piece
        return out.decode("utf-8", "backslashreplace")

    def argv(self, at: int, width: int) -> list[str]:
        if at == 0:
            return []
        out: list[str] = []
        fmt = "=Q" if width == 8 else "=I"
        total = 0
        while len(out) < ARGV_CAP and total < EXEC_CAP:
            (ptr,) = struct.unpack(fmt, self.read(at + len(out) * width, width))
            if ptr == 0:
                break
            out.append(self.string(ptr))
            total += len(out[-1]) + 1
        return out


# -- comparing and resolving what an exec ran (``bot.replay.trace.programs``) -----------------------------------------------
_HOPS = 40


def same_argv(image: list[str], claim: list[str]) -> bool:
    """Whether the new image's argv is the one the caller passed: equal, or the kernel's own rewrite of it for an
    interpreter it loaded (``INTERP [ARG] NAME argv[1:]``), or equal as far as the caller's was read (its caps)."""
    if image == claim:
        return True
    k = len(image) - len(claim)
    if k in (1, 2) and image[k + 1:] == claim[1:]:
        return True
    if len(image) < len(claim) or (len(image) > len(claim) and len(claim) < ARGV_CAP):
        return False
    # A string read up to ARG_CAP bytes was cut there: the image's may go on past it, nothing else may differ.
    return all(i == c or (len(c.encode("utf-8", "replace")) >= ARG_CAP and i.startswith(c[:-4]))
               for i, c in zip(image, claim))


def real_path(proc_dir: int, path: str) -> str | None:
    """``path`` (absolute) with every link resolved as the process sees its files (its root, its mounts), one
    component at a time below ``PROC/root``, so no link is followed from the harness's own root; None when it
    does not resolve."""
    todo = [p for p in path.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while todo:
        name = todo.pop(0)
        if name == "..":
            if done:
                done.pop()
            continue
        here = "root/" + "/".join([*done, name])
        try:
            st = os.lstat(here, dir_fd=proc_dir)
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                target = os.readlink(here, dir_fd=proc_dir)
                if hops > _HOPS:
                    return None
                if target.startswith("/"):
                    done = []
                todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
        except OSError:
            return None
        done.append(name)
    return "/" + "/".join(done)
