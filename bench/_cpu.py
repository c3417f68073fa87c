"""CPU seconds used by this process and everything it starts, sandboxed processes included.

``RUSAGE_CHILDREN`` misses every process inside a bwrap pid namespace (measured here: a 0.5 s
busy loop under ``bwrap --unshare-all`` reads 0.003 s), so a bench that reads it measures the
harness, not the sandboxed work. A cgroup does not: membership is inherited by every process
started, in whatever namespace, and the kernel sums their time. ``Meter`` moves this process into
a cgroup of its own (cgroup v2's ``cpu.stat``, else v1's ``cpuacct``), and moves it back on
``close``. Where neither can be written (not root, no cgroupfs), it reads the whole machine's busy
time from ``/proc/stat`` instead, and says so in ``source``: honest only on an otherwise idle machine.

Standard library only: bench/inspect_compare.py prepends this file to the task it runs in
inspect_ai's own venv, so both sides are measured alike.
"""

from __future__ import annotations

import os


def _mounts() -> list[tuple[str, str, str]]:
    with open("/proc/self/mounts") as f:
        return [(p[1], p[2], p[3]) for p in (line.split() for line in f) if len(p) >= 4]


def _own(kind_v1: str | None) -> str:
    """This process's cgroup path in the v2 hierarchy (``kind_v1`` None) or in v1's ``kind_v1`` one."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (kind_v1 is None and controllers == "") or (kind_v1 and kind_v1 in controllers.split(",")):
                return path
    raise OSError("no such cgroup")


class Meter:
    def __init__(self) -> None:
        self.source, self._dir, self._home = "machine", "", ""
        for mount, fstype, options in _mounts():
            try:
                if fstype == "cgroup2":
                    self._enter(mount, _own(None), "cpu.stat")
                elif fstype == "cgroup" and "cpuacct" in options.split(","):
                    self._enter(mount, _own("cpuacct"), "cpuacct.usage")
                else:
                    continue
                return
            except OSError:
                continue

    def _enter(self, mount: str, own: str, counter: str) -> None:
        home = os.path.join(mount, own.lstrip("/"))
        mine = os.path.join(home, f"replaybook-bench-{os.getpid()}")
        os.makedirs(mine, exist_ok=True)
        try:
            with open(os.path.join(mine, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            os.rmdir(mine)
            raise
        self._dir, self._home, self._counter = mine, home, counter
        self.source = "cgroup"
        self.read()

    def read(self) -> float:
        if self.source == "machine":
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
            user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
            return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
        with open(os.path.join(self._dir, self._counter)) as f:
            if self._counter == "cpuacct.usage":
                return int(f.read()) / 1e9
            for line in f:
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1e6
        raise OSError(f"{self._dir}: no usage in {self._counter}")

    def close(self) -> None:
        if self.source != "cgroup":
            return
        try:
            with open(os.path.join(self._home, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            os.rmdir(self._dir)
        except OSError:
            pass  # a straggler still in it: the empty cgroup is left, named for this pid
