"""``procfs.Memory``: an exec's argv read from another process's memory, as the listener reads it (here: our own)."""

from __future__ import annotations

import ctypes
import mmap
import os
import struct

import pytest

from bot.replay.sandbox import procfs


@pytest.fixture
def memory():
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    yield procfs.Memory(fd)
    os.close(fd)


def _pages(count: int) -> tuple[mmap.mmap, int]:
    """``count`` fresh pages and the address of the first: layouts that straddle a page boundary on purpose."""
    buf = mmap.mmap(-1, count * mmap.PAGESIZE)
    return buf, ctypes.addressof(ctypes.c_char.from_buffer(buf))


def test_argv_whose_pointers_and_strings_straddle_a_page_boundary(memory):
    buf, base = _pages(3)
    page = mmap.PAGESIZE
    strings = [b"python3", b"-c", b"x" * 300, "é".encode()]
    at, addrs = page - 5, []  # the first string runs across the first boundary
    for s in strings:
        buf[at:at + len(s) + 1] = s + b"\0"
        addrs.append(base + at)
        at += len(s) + 1
    table = 2 * page - 12  # the pointer table runs across the second boundary
    buf[table:table + 8 * 5] = struct.pack("=5Q", *addrs, 0)
    assert memory.argv(base + table, 8) == ["python3", "-c", "x" * 300, "é"]
    assert memory.string(addrs[0]) == "python3"
    del buf


def test_each_exec_gets_a_fresh_reader(memory):
    """A reader keeps what it read (one exec's argv is read from one snapshot); the next exec's reader reads anew."""
    buf, base = _pages(1)
    buf[:4] = b"ab\0\0"
    assert memory.string(base) == "ab"
    buf[:4] = b"cd\0\0"
    assert memory.string(base) == "ab"
    assert procfs.Memory(memory.fd).string(base) == "cd"
    del buf


def test_a_string_is_cut_at_the_cap_and_an_unmapped_address_fails(memory):
    buf, base = _pages(procfs.ARG_CAP // mmap.PAGESIZE + 2)
    buf[:procfs.ARG_CAP + 10] = b"y" * (procfs.ARG_CAP + 10)  # no NUL within the cap
    assert memory.string(base) == "y" * procfs.ARG_CAP
    with pytest.raises((OSError, ValueError)):
        memory.string(8)  # the first page is never mapped
    assert memory.argv(0, 8) == []
    del buf
