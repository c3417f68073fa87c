"""The trace: typed events, append-only JSONL, and the run directory."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from bot.errors import BadInput
from bot.replay.sandbox.workspace import FileChange
from bot.replay.trace import events as tr
from bot.replay.trace.events import CommandEvent, RunDir, RunEndEvent, RunStartEvent, TraceWriter, excerpt, read_trace

RUN_START = 1_800_000_000.0


def command(offset_s: float) -> CommandEvent:
    return CommandEvent(
        argv=["pytest", "-q"], cwd="packages/api", exit_code=1, duration_ms=12.5,
        started_at=datetime.fromtimestamp(RUN_START + offset_s, tz=timezone.utc),
    )


def test_round_trip_keeps_every_kind(tmp_path):
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path, run_start=RUN_START) as w:
        w.append(RunStartEvent(scenario="monorepo-test-cwd", agent="claude-code"))
        w.append(command(2.5))
        w.append(tr.ToolCallEvent(name="Bash", input={"command": "pytest"}, id="t1", is_error=False))
        w.append(tr.ModelCallEvent(model="claude-x", input_tokens=10, output_tokens=5, cost_usd=0.01, simulated=True))
        w.extend(tr.file_change_events([FileChange("a.py", "M", "diff --git a/a.py b/a.py\n+x\n")]))
        w.append(tr.AgentOutputEvent(text="done [rule-0041]"))
        w.append(RunEndEvent(status="passed"))
    events = read_trace(path)
    assert [e.kind for e in events] == [
        "run_start", "command", "tool_call", "model_call", "file_change", "agent_output", "run_end",
    ]
    assert [e.seq for e in events] == list(range(7))
    assert all(e.t is not None for e in events)
    cmd = events[1]
    assert isinstance(cmd, CommandEvent) and cmd.t == 2.5 and cmd.command == "pytest"
    assert cmd.started_at == command(2.5).started_at
    assert events[4].path == "a.py" and "+x" in events[4].diff_excerpt
    assert events[3].simulated is True and events[6].status == "passed"


def test_one_line_per_event_and_reopening_continues_seq(tmp_path):
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as w:
        w.append(RunStartEvent())
        assert len(path.read_text().splitlines()) == 1  # flushed as it goes
    with TraceWriter(path) as w:
        stamped = w.append(RunEndEvent(status="unscored", reason="re-scored"))
    assert stamped.seq == 1
    assert [e.seq for e in read_trace(path)] == [0, 1]


def test_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as w:
        w.append(RunStartEvent())
    with path.open("a") as f:
        f.write('{"kind": "run_end", "status": "maybe"}\n')
    with pytest.raises(BadInput, match=r"trace\.jsonl:2: .*status"):
        read_trace(path)
    path.write_text('{"kind": "teleport"}\n')
    with pytest.raises(BadInput, match=r"trace\.jsonl:1"):
        read_trace(path)
    with pytest.raises(BadInput, match="run the replay first"):
        read_trace(tmp_path / "missing.jsonl")


def test_run_dir_layout(tmp_path):
    run = RunDir(tmp_path / "runs" / "r1").create()
    run.write_agent_raw('{"type":"result"}\n')
    run.write_diff("diff --git a/x b/x\n")
    with run.writer() as w:
        w.append(RunStartEvent())
    assert run.trace.name == "trace.jsonl" and run.agent_raw.name == "agent.raw"
    assert run.diff_patch.read_text().startswith("diff --git")
    assert run.read_agent_raw() == '{"type":"result"}\n'
    assert [e.kind for e in run.events()] == ["run_start"]


def test_excerpt_says_what_it_cut():
    assert excerpt("short") == "short"
    cut = excerpt("x" * 50, limit=10)
    assert cut.startswith("x" * 10) and "40 more characters cut" in cut
