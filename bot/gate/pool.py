"""Parallel trials for the gate, consumed in trial order so a decision never depends on timing.

A gate's trials form streams: trial 0, 1, 2, … of one scenario with one
playbook text. A stream runs trials ahead of what its test has consumed (on
one pool shared by every stream of the gate, so scenarios run at once), but
the test reads them strictly by index: after each result it asks whether to
stop, exactly as a gate with one job would. The trials read are therefore a
pure function of the seed and each trial's result, whatever ``--jobs`` is or
which trial finishes first. Trials run ahead and never read are speculation:
cancelled if not started, else left to finish (and be cached); they are counted
apart, never in the decision or the report.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


def cores() -> int:
    """The cores this process may use (its CPU affinity, not the machine's total)."""
    counter = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if counter is not None:
        return counter() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Pool:
    """One executor for every trial of a gate; ``close`` cancels what has not started."""

    def __init__(self, jobs: int):
        self.jobs = max(1, jobs)
        self._executor = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="gate-trial")

    def submit(self, fn: Callable[..., T], *args) -> Future:
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class Stream(Generic[T]):
    """Trials ``run(start)``, ``run(start + 1)``, … read in order, up to ``ahead`` of them in flight."""

    def __init__(self, pool: Pool, run: Callable[[int], T], start: int = 0):
        self.pool, self.run = pool, run
        self._futures: dict[int, Future] = {}
        self._next = start  # the next index to read
        self._submitted = start

    def next(self, ahead: int) -> T:
        """The result of the next trial, with up to ``ahead`` trials (this one included) running."""
        while self._submitted < self._next + max(1, ahead):
            self._futures[self._submitted] = self.pool.submit(self.run, self._submitted)
            self._submitted += 1
        future = self._futures.pop(self._next)
        self._next += 1
        return future.result()

    def close(self) -> list[Future]:
        """Stop: cancel the trials not started; returns those that will still finish (speculation)."""
        left = [f for f in self._futures.values() if not f.cancel()]
        self._futures.clear()
        return left
