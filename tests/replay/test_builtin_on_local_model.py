"""The builtin agent on the REAL local model (``local_model``: skipped when it is not installed, failed under
REPLAYBOOK_REQUIRE_LOCAL_MODEL=1): every turn is a tool call or ``finish`` (``tool_choice`` any, held by the
server's grammar), and a command that fails again is named back to the model. The model is never scripted; what is
asserted is what the agent and the grammar guarantee, whatever the model chooses to do."""

from __future__ import annotations

import json

import pytest

from bot.model import served
from bot.replay.engine import run_trial
from bot.replay.trace.events import ModelCallEvent, ToolCallEvent, read_trace

pytestmark = pytest.mark.local_model

TASK = ("Run exactly this command and nothing else: `python3 tools/check.py`. It must print OK. "
        "If it fails, run it again.")


def test_every_turn_is_a_call_and_a_repeated_failure_is_named_back(local_server, make_scenario, opts):
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "test -f DONE.txt"}}], task=TASK,
                           budget={"max_turns": 4, "timeout_s": 900})
    result = run_trial(loaded, "", opts(model=served.LOCAL, api_key="test-key", upstream_url=local_server.base_url,
                                        model_label=local_server.label), 0)
    assert result.verdict == "failed", result.reason  # nothing makes DONE.txt exist: scored, the agent's failure
    assert result.agent_status in ("finished", "max_turns"), result.reason
    events = read_trace(result.run_dir + "/trace.jsonl")
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    model_calls = [e for e in events if isinstance(e, ModelCallEvent)]
    # forced calls: every answer was a call; only a `finish` (which runs nothing) is not in the trace
    assert len(calls) == len(model_calls) - (result.agent_status == "finished"), (len(calls), len(model_calls))
    assert calls, "the model's first answer was a call to a tool, not prose"
    seen: dict[str, int] = {}
    for call in calls:
        key = json.dumps([call.name, call.input], sort_keys=True)
        failed = call.is_error or (call.name == "bash" and not (call.output_excerpt or "").startswith("exit code 0"))
        if failed:
            seen[key] = seen.get(key, 0) + 1
        named = "has now failed" in (call.output_excerpt or "")
        assert named == (failed and seen[key] >= 2), (call.input, call.output_excerpt)
