"""Replay runs on disk, for the trace store and chronicle tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from bot.replay.trace.events import (
    CommandEvent,
    RunDir,
    RunEndEvent,
    RunStartEvent,
    ToolCallEvent,
)

T0 = datetime(2026, 7, 14, 9, 32, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def replay_run(tmp_path: Path) -> RunDir:
    """A replay run of four events (start, a tool call, a failed ``pytest -q``, the end) under ``tmp_path/runs``."""
    run = RunDir(tmp_path / "runs" / "run-1").create()
    with run.writer(run_start=0.0) as writer:
        writer.append(RunStartEvent(scenario="s", agent="builtin", started_at=T0, t=0.0))
        writer.append(ToolCallEvent(name="Bash", input={"command": "pytest"}, t=1.0))
        writer.append(CommandEvent(argv=["pytest", "-q"], cwd=".", exit_code=1, duration_ms=12.5,
                                   started_at=at(1.5), t=1.5))
        writer.append(RunEndEvent(status="failed", reason="check failed", t=3.0))
    return run
