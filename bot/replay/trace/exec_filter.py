"""The seccomp filter that asks the harness about every ``execve`` and exit (``bot.replay.trace.exec_notify``).

A BPF program per machine (its ABIs' syscall numbers), and whether this kernel lets a process install one with a
listener (seccomp user notification, Linux 5.5 and later).
"""

from __future__ import annotations

import errno
import functools
import platform
import struct
import subprocess
import sys
from dataclasses import dataclass

# <linux/seccomp.h>
_RET_ALLOW, _RET_USER_NOTIF, _RET_ERRNO = 0x7FFF0000, 0x7FC00000, 0x00050000
_X32_BIT = 0x40000000


@dataclass(frozen=True)
class Abi:
    audit_arch: int
    execve: int
    execveat: int
    exit: int
    exit_group: int
    pointer: int  # bytes


@dataclass(frozen=True)
class Machine:
    seccomp: int  # the seccomp(2) syscall number
    native: Abi
    compat: Abi | None  # a 32-bit ABI the kernel also runs (i386 on x86_64)


_I386 = Abi(0x40000003, execve=11, execveat=358, exit=1, exit_group=252, pointer=4)
MACHINES = {
    "x86_64": Machine(317, Abi(0xC000003E, execve=59, execveat=322, exit=60, exit_group=231, pointer=8), _I386),
    "aarch64": Machine(277, Abi(0xC00000B7, execve=221, execveat=281, exit=93, exit_group=94, pointer=8), None),
}


def machine() -> Machine | None:
    return MACHINES.get(platform.machine())


# -- the filter --------------------------------------------------------------------------------
def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


@functools.cache  # a function of the machine's numbers alone: built once, not at every sandbox's start
def filter_program(m: Machine) -> bytes:
    """The BPF program: notify on exec and exit in every ABI the kernel runs; any other ABI gets ``ENOSYS``.

    (An ABI the filter did not name could otherwise ``execve`` unseen; x32's calls are refused outright.)"""
    prog: list[bytes] = []

    def abi_block(abi: Abi, *, x32_guard: bool) -> list[bytes]:
        block = [_insn(_LD_W_ABS, 0, 0, 0)]  # seccomp_data.nr
        if x32_guard:
            block.append(_insn(_JGE_K, 0, 1, _X32_BIT))
            block.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS))
        calls = (abi.execve, abi.execveat, abi.exit, abi.exit_group)
        for i, nr in enumerate(calls):
            block.append(_insn(_JEQ_K, len(calls) - i, 0, nr))  # to the notify below the allow
        block.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
        block.append(_insn(_RET_K, 0, 0, _RET_USER_NOTIF))
        return block

    native = abi_block(m.native, x32_guard=m.native.audit_arch == 0xC000003E)
    compat = abi_block(m.compat, x32_guard=False) if m.compat else []
    prog.append(_insn(_LD_W_ABS, 0, 0, 4))  # seccomp_data.arch
    prog.append(_insn(_JEQ_K, 0, len(native), m.native.audit_arch))
    prog += native
    if compat:
        prog.append(_insn(_JEQ_K, 0, len(compat), m.compat.audit_arch))
        prog += compat
    prog.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS))
    return b"".join(prog)


def executor_args(m: Machine) -> list[str]:
    """What the executor is given to install the filter: ``--notify SECCOMP_NR HEX``."""
    return ["--notify", str(m.seccomp), filter_program(m).hex()]


_PROBE = r"""
import ctypes, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
class P(ctypes.Structure): _fields_ = [("n", ctypes.c_ushort), ("f", ctypes.c_void_p)]
code = bytes.fromhex(sys.argv[2]); buf = ctypes.create_string_buffer(code, len(code))
if libc.prctl(38, 1, 0, 0, 0): sys.exit(1)
fd = libc.syscall(int(sys.argv[1]), 1, 8, ctypes.byref(P(len(code) // 8, ctypes.addressof(buf))))
sys.exit(0 if fd >= 0 else 1)
"""


@functools.cache
def available() -> bool:
    """Whether this kernel lets a process install a filter with a listener (seccomp user notification)."""
    m = machine()
    if m is None:
        return False
    try:
        allow_all = _insn(_RET_K, 0, 0, _RET_ALLOW).hex()  # a listener that is never asked: the probe can exit
        return subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE, str(m.seccomp), allow_all],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
