"""A real model misbehaves: malformed tool calls, empty answers, repeats, a runaway loop, a hang.

The model here is a fake local model server on 127.0.0.1 (the Messages API, as
``bot.model.local.server`` speaks it) that misbehaves on cue; the replay reaches
it exactly as ``--model local`` does: through the gateway, as its upstream,
with the placeholder key. Each case must end as the agent's failure (scored,
docs/replay.md "Verdicts") or as unscored, never as a crash of the harness,
and never later than the scenario's budget.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

import pytest
from support.servers import Handler, serving

from bot.model import served
from bot.replay.engine import run_trial
from bot.replay.trace.events import ToolCallEvent, read_trace

LABEL = "real local model Fake Coder 0.1B (Q4_K_M)"
NEVER = {"succeeds": {"run": "test -f DONE.txt"}}  # nothing the fake does creates it: a scored run fails this check


def tool_use(name, input, id_="toolu_x"):
    block = {"type": "tool_use", "name": name, "input": input}
    if id_ is not None:
        block["id"] = id_
    return block


def message(content, stop_reason="tool_use"):
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "local", "content": content,
            "stop_reason": stop_reason, "stop_sequence": None, "usage": {"input_tokens": 50, "output_tokens": 7}}


class FakeLocalModel(Handler):
    """Answers ``/v1/messages`` with ``script(n)``, n the call's index; ``None`` hangs until released."""

    script = staticmethod(lambda n: message([{"type": "text", "text": "done"}], "end_turn"))
    received: list[dict] = []
    release = threading.Event()

    def do_POST(self) -> None:
        body = json.loads(self.body() or b"{}")
        index = len(self.received)
        self.received.append(body)
        answer = self.script(index)
        if answer is None:
            self.release.wait(60)
            return
        if isinstance(answer, tuple):  # ("late", answer): held until released, then answered
            self.release.wait(60)
            answer = answer[1]
        if isinstance(answer, bytes):
            self.reply(200, answer)
            return
        self.reply_json(200, answer)


@pytest.fixture
def local_model():
    """``local_model(script)`` -> ReplayOptions kwargs that reach the fake as ``--model local`` would."""
    FakeLocalModel.received = []
    FakeLocalModel.release = threading.Event()
    with serving(FakeLocalModel) as url:

        def use(script):
            FakeLocalModel.script = staticmethod(script)
            return {"model": served.LOCAL, "api_key": served.LOCAL_KEY, "upstream_url": url, "model_label": LABEL}

        yield use
        FakeLocalModel.release.set()


def tool_calls(result) -> list[ToolCallEvent]:
    return [e for e in read_trace(result.run_dir + "/trace.jsonl") if isinstance(e, ToolCallEvent)]


def test_malformed_tool_calls_are_told_to_the_model_and_the_run_is_scored(local_model, make_scenario, opts):
    bad = [tool_use("bash", "ls -la"), tool_use("bash", ["ls"], id_=None), tool_use("no_such_tool", {}),
           tool_use("bash", None), tool_use("", {"command": "ls"}), tool_use(["bash"], {"command": "ls"})]
    loaded = make_scenario(pass_if=[NEVER], budget={"max_turns": 10})
    kw = local_model(lambda n: message([bad[n]]) if n < len(bad) else message([{"type": "text", "text": "ok"}], "end_turn"))
    result = run_trial(loaded, "", opts(**kw), 0)
    assert (result.verdict, result.agent_status) == ("failed", "finished"), result.reason
    calls = tool_calls(result)
    assert len(calls) == len(bad) and all(c.is_error for c in calls)
    # every malformed call got its answer, under an id the next request could name
    results = [b for m in FakeLocalModel.received[-1]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert len(results) == len(bad) and all(isinstance(r["tool_use_id"], str) and r["tool_use_id"] for r in results)
    assert "JSON object" in results[0]["content"]


def test_an_empty_answer_ends_the_run_as_the_agents_failure(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER])
    result = run_trial(loaded, "", opts(**local_model(lambda n: message([], "end_turn"))), 0)
    assert (result.verdict, result.agent_status) == ("failed", "finished")
    assert result.model_calls == 1 and not result.simulated


def test_a_model_that_repeats_itself_uses_every_turn_and_is_scored(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER], budget={"max_turns": 4})
    result = run_trial(loaded, "", opts(**local_model(lambda n: message([tool_use("bash", {"command": "ls"})]))), 0)
    assert (result.verdict, result.agent_status) == ("failed", "max_turns")
    assert result.model_calls == 4 and len(tool_calls(result)) == 4


def test_a_runaway_loop_is_capped_by_max_turns_below_the_scenarios(local_model, make_scenario, opts):
    ids = itertools.count()
    loaded = make_scenario(pass_if=[NEVER], budget={"max_turns": 50})
    kw = local_model(lambda n: message([tool_use("bash", {"command": f"echo {n}"}, f"toolu_{next(ids)}")]))
    result = run_trial(loaded, "", opts(max_turns=3, **kw), 0)
    assert (result.verdict, result.agent_status) == ("failed", "max_turns")
    assert result.model_calls == 3


def test_a_runaway_answer_cut_at_max_tokens_is_named_back_and_the_run_is_scored(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER], budget={"max_turns": 3})
    ramble = message([{"type": "text", "text": "I will now " * 500}], "max_tokens")
    result = run_trial(loaded, "", opts(**local_model(lambda n: ramble)), 0)
    assert (result.verdict, result.agent_status) == ("failed", "max_turns")
    # each request asks for one call, in an answer sized to a call, and a cut answer is named to the model
    assert all(r["tool_choice"] == {"type": "any"} and r["max_tokens"] <= 1024 for r in FakeLocalModel.received)
    last = FakeLocalModel.received[-1]["messages"][-1]
    assert last["role"] == "user" and "cut off" in last["content"]


def test_the_same_failing_command_twice_is_named_back_plainly(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER], budget={"max_turns": 5})
    calls = [{"command": "cat missing.txt"}, {"command": "cat missing.txt"}, {"command": "ls"},
             {"command": "cat missing.txt"}]
    kw = local_model(lambda n: message([tool_use("bash", calls[n], f"toolu_{n}")]) if n < len(calls)
                     else message([tool_use("finish", {"summary": "gave up"}, "toolu_f")]))
    result = run_trial(loaded, "", opts(**kw), 0)
    assert (result.verdict, result.agent_status) == ("failed", "finished") and result.model_calls == 5
    results = [b["content"] for m in FakeLocalModel.received[-1]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert "failed" not in results[0] and "failed 2 times" in results[1] and "`cat missing.txt`" in results[1]
    assert "[replaybook]" not in results[2] and "failed 3 times" in results[3]


def test_the_same_call_with_the_same_output_again_is_named_back(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER], budget={"max_turns": 4})
    kw = local_model(lambda n: message([tool_use("bash", {"command": "echo same"}, f"toolu_{n}")]) if n < 2
                     else message([tool_use("finish", {"summary": "done"}, "toolu_f")]))
    run_trial(loaded, "", opts(**kw), 0)
    results = [b["content"] for m in FakeLocalModel.received[-1]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert "[replaybook]" not in results[0] and "changes nothing" in results[1]


def test_finish_ends_the_run_with_its_summary(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER], budget={"max_turns": 5})
    kw = local_model(lambda n: message([tool_use("finish", {"summary": "all done"}, "toolu_f")]))
    result = run_trial(loaded, "", opts(**kw), 0)
    assert (result.agent_status, result.model_calls) == ("finished", 1)


def test_an_answer_that_is_no_message_is_unscored_not_a_crash(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER])
    for body in (b"not json at all", b"[1, 2]", json.dumps({"content": "text, not blocks"}).encode()):
        result = run_trial(loaded, "", opts(**local_model(lambda n, body=body: body)), 0)
        assert result.verdict in ("unscored", "failed"), result.reason
        assert result.agent_status in ("api_error", "crashed", "finished"), result.reason


def test_a_model_that_hangs_ends_at_the_budget_unscored(local_model, make_scenario, opts):
    loaded = make_scenario(pass_if=[NEVER], budget={"timeout_s": 3})
    started = time.monotonic()
    result = run_trial(loaded, "", opts(**local_model(lambda n: None)), 0)
    # generous: what matters is that it ended at the budget, not after the fake's 60 s
    assert time.monotonic() - started < 50
    assert (result.verdict, result.agent_status) == ("unscored", "timeout")


def test_an_answer_that_comes_after_the_run_ended_is_not_written_into_its_trace(local_model, make_scenario, opts,
                                                                                   caplog):
    loaded = make_scenario(pass_if=[NEVER], budget={"timeout_s": 3})
    late = ("late", message([{"type": "text", "text": "done"}], "end_turn"))
    result = run_trial(loaded, "", opts(**local_model(lambda n: late)), 0)
    assert (result.verdict, result.agent_status) == ("unscored", "timeout")
    lines = Path(result.run_dir, "trace.jsonl").read_text().splitlines()
    FakeLocalModel.release.set()  # the model answers now, after the run's trace was closed
    for _ in range(40):
        if "on_call callback failed" in caplog.text:
            break
        time.sleep(0.05)
    assert "on_call callback failed" not in caplog.text and "closed file" not in caplog.text
    assert Path(result.run_dir, "trace.jsonl").read_text().splitlines() == lines
