"""Shared helpers for the benchmarks: scenarios, playbook text, timing, tables.

Benchmarks are plain scripts (``python bench/<name>.py``), not tests. This
module sits next to them, so ``import _common`` works when a script is run.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from bot._util import bundled
from bot._util.markdown import table
from bot.playbook import rule as rules_mod
from bot.replay import engine
from bot.replay.sandbox.workspace import Sandbox
from bot.replay.trace.events import CommandEvent, RunDir, TraceEvent, read_trace
from bot.scenario import spec as sc

__all__ = ["BUNDLED", "Calls", "command_seconds", "machine", "measured_trial", "median", "playbook_text", "table",
           "timed_method"]

BUNDLED = ("monorepo-test-cwd", "dynamic-module-delete", "flaky-network-retry", "lint-disable")
HERE = Path(__file__).resolve().parent


def scenario_dir(scenario_id: str) -> Path:
    return bundled.scenarios_dir() / scenario_id


def playbook_text(scenario_id: str, *, with_rule: bool) -> str:
    """The system-prompt text a replay of the scenario's rule gets (as ``Playbook.inject`` writes it)."""
    if not with_rule:
        return ""
    rule = rules_mod.load(scenario_dir(scenario_id) / "rule.yaml", named_by_id=False)
    return (
        "Playbook rules for this task, learned from this project's past failures. When you apply one, "
        f"cite its id in square brackets, e.g. [{rule.id}], in your output, commit message or PR body.\n"
        f"- [{rule.id}] {rule.rule}\n"
    )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def command_seconds(events: list[TraceEvent]) -> float:
    """Wall time covered by the agent's own commands (depth 0), overlaps counted once."""
    spans = sorted(
        (e.started_at.timestamp(), e.started_at.timestamp() + e.duration_ms / 1000)
        for e in events if isinstance(e, CommandEvent) and e.depth == 0
    )
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


class Calls:
    """Wall time of each call to a wrapped method, with its ``record`` keyword (see ``timed_method``)."""

    def __init__(self) -> None:
        self.items: list[tuple[bool, float]] = []

    def clear(self) -> None:
        self.items.clear()

    def seconds(self, *, record: bool) -> float:
        return sum(s for r, s in self.items if r == record)


@contextmanager
def timed_method(cls: type, name: str) -> Iterator[Calls]:
    """Time every call of ``cls.name`` (benchmark instrumentation; restored on exit)."""
    original = getattr(cls, name)
    calls = Calls()

    def wrapper(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            calls.items.append((kwargs.get("record", True), time.perf_counter() - start))

    setattr(cls, name, wrapper)
    try:
        yield calls
    finally:
        setattr(cls, name, original)


def measured_trial(loaded: sc.LoadedScenario, text: str, opts: engine.ReplayOptions, trial: int, agent) -> dict:
    """``run_trial`` as the CLI calls it, split into scenario time and harness overhead.

    ``commands``: wall time of the agent's depth-0 commands (from the trace);
    ``succeeds``: wall time of the ``succeeds`` commands (``Sandbox.run`` calls
    with ``record=False``); ``overhead``: the rest. ``opts.runs_dir`` must be set.
    """
    with timed_method(Sandbox, "run") as calls:
        start = time.perf_counter()
        result = engine.run_trial(loaded, text, opts, trial, agent)
        total = time.perf_counter() - start
    commands = command_seconds(read_trace(RunDir(Path(result.run_dir)).trace))
    succeeds = calls.seconds(record=False)
    return {"verdict": result.verdict, "status": result.agent_status, "model_calls": result.model_calls,
            "total": total, "commands": commands, "succeeds": succeeds, "overhead": total - commands - succeeds}


def machine() -> str:
    """One line for the results: when, where, and how busy the machine was."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{now}; {os.cpu_count()} cores; load average {load}; "
            f"Python {platform.python_version()} on {platform.system()} {platform.machine()}")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def say(text: str = "") -> None:
    print(text, flush=True)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
