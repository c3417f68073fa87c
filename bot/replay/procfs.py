"""What ``/proc`` says of a process the kernel stopped for the harness: its status fields, its files, its memory.

Read by ``bot.replay.exec_notify`` while the caller waits for the listener's answer; bounded, so a
hostile argv costs at most the caps below.
"""

from __future__ import annotations

import os
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
