"""Each exec's program and argv from its new image, for a run strace traces (an agent program's).

strace reads an exec's file name and argv from the caller's memory at the call's entry: a link's name
(``ln -s /usr/bin/git g; ./g push --force`` recorded as ``./g``), a name another thread rewrites after the
read. It cannot give the file the kernel ran. So a run strace traces also runs under the seccomp
notification filter of ``bot.replay.trace.exec_notify``: the harness's Landlock step inside the sandbox
(``isolation.confined``, ``--notify``) installs it before it becomes the agent program and sends the
listener over a socket only the harness holds the other end of, keeping no copy; every process the agent
program starts inherits the filter. The notification's ``Watch`` confirms each exec and reads its program
(``/proc/PID/exe``, links resolved) and argv (``cmdline``) from the new image while the process waits at its
next exec or exit, the caller's name kept as ``called``. strace still gives the process tree (each
``clone``, orphans included, with the parent that made them), the working directories and the exit codes;
``kernel_trace.read_run`` takes every exec below the Landlock step from here instead of strace's lines.

The notification takes precedence over strace's own seccomp stop for ``execve`` (``SECCOMP_RET_USER_NOTIF``
outranks ``SECCOMP_RET_TRACE``), so strace sees some of those execs and not others; none of strace's is used.
"""

from __future__ import annotations

import socket
import sys
import threading

from bot.errors import InfrastructureError
from bot.replay.trace import exec_notify
from bot.replay.trace import kernel as kernel_trace


class RunImages:
    """The listener of one traced run: give ``confine_args()`` to the Landlock step and ``pass_fds()`` to the
    process, then ``execs()`` once the run has ended (``close()`` in any case)."""

    def __init__(self, machine: exec_notify.Machine):
        self.machine = machine
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._theirs.set_inheritable(True)
        self.watch: exec_notify.Watch | None = None
        self._thread = threading.Thread(target=self._receive, name="exec-images", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls) -> "RunImages | None":
        """One for a run to be traced, where the kernel has seccomp user notification; else None."""
        machine = exec_notify.machine() if exec_notify.available() else None
        return cls(machine) if machine is not None else None

    def confine_args(self) -> tuple[str, ...]:
        return ("--notify", str(self.machine.seccomp), exec_notify.filter_program(self.machine).hex(),
                str(self._theirs.fileno()))

    def pass_fds(self) -> tuple[int, ...]:
        return (self._theirs.fileno(),)

    def _receive(self) -> None:
        try:
            _, ancillary, _, _ = self._ours.recvmsg(1, socket.CMSG_SPACE(4))
        except OSError:
            return
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS and len(data) >= 4:
                self.watch = exec_notify.Watch(int.from_bytes(data[:4], sys.byteorder),
                                               self.machine)

    def execs(self) -> tuple[dict[int, list[kernel_trace._Exec]], dict[int, int]]:
        """The run has ended: its execs, and each process's parent as the notification saw it, by pid as strace
        names them (``kernel_trace.tracer_namespace``)."""
        self._end_receiving()
        if self.watch is None:
            raise InfrastructureError("the agent program's sandbox never handed over its exec notifications "
                                      "(the Landlock step could not install the filter); the trial is unscored")
        if self.watch.failed:
            raise InfrastructureError("the kernel's exec notifications stopped being answered; the trial is unscored")
        if self.watch.overflow:
            raise InfrastructureError("the exec record passed its cap; the trial is unscored")
        return self.watch.execs(1 if kernel_trace.tracer_namespace() else 0)

    def _end_receiving(self) -> None:
        if self._theirs.fileno() >= 0:
            self._theirs.close()  # every copy inside is closed by now: a receive still waiting returns
        self._thread.join(timeout=10)

    def __enter__(self) -> "RunImages":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._end_receiving()
        if self.watch is not None:
            self.watch.close()
        self._ours.close()
