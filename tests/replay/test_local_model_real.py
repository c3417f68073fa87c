"""One real replay on the real local model: its tool call runs in the sandbox, lands in the trace, and the
report says a real local model answered. Not skipped in CI: `.ci/run` installs the model and sets
REPLAYBOOK_REQUIRE_LOCAL_MODEL=1, which fails these tests instead of skipping them when it is missing.

It asserts the pipeline, never that a 1.5B model passes: the model is real and is not scripted. Its
behaviour varies (it may just say "Hello"), so the test gives it up to five short replays (two turns each) to
make one tool call that reads the file in the sandbox.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import write_scenario

from bot.replay.trace.events import CommandEvent, ModelCallEvent, RunStartEvent, ToolCallEvent, read_trace

# Sized for a 1.5B model: asked so, it calls `read` (4 of 4 tries here) or `bash`; spelling the call out as
# JSON made it answer "Hello" (2 of 2).
TASK = "Print the contents of NOTE.txt."


@pytest.fixture
def installed(local_model, monkeypatch):
    """The installed model (skipped when it is not, failed instead in CI: tests/support/local_model.py), found
    by ``--model local`` in the cache it was found in (every test has a HOME of its own)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(local_model.gguf.parents[3]))  # <cache>/replaybook/models/<m>/model.gguf
    return local_model


def test_a_real_replay_turn_on_the_local_model_runs_its_tool_call_in_the_sandbox(installed, cli, root, tmp_path):
    write_scenario(root, scenario_id="note", files={"NOTE.txt": "pelican\n"}, task=TASK,
                   pass_if=[{"succeeds": {"run": "test -f NOTE.txt"}}],
                   budget={"max_turns": 2, "timeout_s": 900})
    runs = tmp_path / "runs"
    for _ in range(5):
        result = cli("replay", "run", str(root / "scenarios" / "note"), "--model", "local", "--json",
                     "--runs-dir", str(runs))
        assert result.code in (0, 1), result.err
        data = json.loads(result.out)
        [trial] = data["trials"]
        assert trial["verdict"] != "unscored", trial["reason"]
        events = read_trace(Path(trial["run_dir"]) / "trace.jsonl")
        # the file's word in a tool's output: the call ran against the fixture, in the sandbox
        read = [e for e in events if isinstance(e, ToolCallEvent) and not e.is_error
                and "pelican" in (e.output_excerpt or "") and "not found" not in (e.output_excerpt or "")]
        if read:
            break
    else:
        pytest.fail("in five replays the local model made no tool call that read NOTE.txt")
    # the report: a real local model, by name and quantisation; no money, tokens counted
    assert data["simulated"] is False and "real local model" in data["model_label"]
    assert installed.name in data["model_label"] and installed.quant in data["model_label"]
    assert trial["cost_usd"] == 0 and trial["input_tokens"] > 0 and trial["output_tokens"] > 0
    start = next(e for e in events if isinstance(e, RunStartEvent))
    assert start.meta["model"] == "local" and start.meta["model_label"] == data["model_label"]
    assert all(not e.simulated for e in events if isinstance(e, ModelCallEvent))
    # a bash call ran in the sandbox: the kernel trace saw its processes, under the tool call that started them
    for call in (e for e in read if e.name == "bash" and (e.output_excerpt or "").startswith("exit code 0")):
        assert [e for e in events if isinstance(e, CommandEvent) and e.tool_call == call.id], call


def test_mini_swe_agent_reaches_the_local_model_only_through_the_gateway(installed, make_scenario, opts, monkeypatch):
    """An agent CLI on the local model: litellm speaks the Messages API to the gateway, which forwards to the
    local server with the server's token; the agent's process sees the per-run token only."""
    from bot import config
    from bot.replay.agents import install as agents_install
    from bot.replay.engine import run_trial

    pin = agents_install.pin("mini-swe-agent")  # installed into the user's cache as test_more_agents.py does
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "replaybook" / f"{pin.agent}-{pin.version}"
    monkeypatch.setenv(pin.env, agents_install.install("mini-swe-agent", cache))
    local = config.local_model()
    loaded = make_scenario(files={"NOTE.txt": "pelican\n"}, task=TASK + " When done, run "
                           "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.",
                           pass_if=[{"succeeds": {"run": "test -f NOTE.txt"}}], budget={"max_turns": 2, "timeout_s": 900},
                           with_rule=[{"bash": "env > env.txt"}])
    result = run_trial(loaded, "", opts(agent="mini-swe-agent", model="local", api_key=local.api_key,
                                        upstream_url=local.base_url, model_label=local.label), 0)
    assert result.agent_status not in ("crashed", "api_error"), result.reason
    events = read_trace(Path(result.run_dir) / "trace.jsonl")
    calls = [e for e in events if isinstance(e, ModelCallEvent)]
    assert calls and all(not e.simulated and e.cost_usd == 0 and e.input_tokens > 0 for e in calls)
    assert result.cost_usd == 0 and result.model_calls == len(calls)
    for path in Path(result.run_dir).iterdir():  # the server's token stays in the gateway
        assert local.api_key not in path.read_text(errors="replace"), path.name
