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
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            raw = f.read()
    except OSError:
        return None
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
    fd = os.open(name, os.O_RDONLY, dir_fd=dirfd)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def string(mem, at: int) -> str:
    out = bytearray()
    while len(out) < ARG_CAP:
        mem.seek(at + len(out))
        chunk = mem.read(min(4096 - (at + len(out)) % 4096, ARG_CAP - len(out)))  # never across a page at once
        if not chunk:
            raise ValueError("unreadable string")
        end = chunk.find(b"\0")
        if end >= 0:
            out += chunk[:end]
            break
        out += chunk
    return out.decode("utf-8", "backslashreplace")


def argv(mem, at: int, width: int) -> list[str]:
    if at == 0:
        return []
    out: list[str] = []
    fmt = "=Q" if width == 8 else "=I"
    total = 0
    while len(out) < ARGV_CAP and total < EXEC_CAP:
        mem.seek(at + len(out) * width)
        raw = mem.read(width)
        if len(raw) != width:
            raise ValueError("unreadable argv")
        (ptr,) = struct.unpack(fmt, raw)
        if ptr == 0:
            break
        out.append(string(mem, ptr))
        total += len(out[-1]) + 1
    return out
