"""Delivered or not: whether the rule under test reached the agent, seen by the gateway, for every agent.

The builtin agent runs against the simulated model; Codex, opencode, mini-swe-agent and Claude Code run
for real (pinned, installed into the user's cache as tests/replay/test_more_agents.py does) against the
same gateway. Each agent has a trial whose rule arrives and one whose rule does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.errors import BadInput
from bot.replay import delivery
from bot.replay.engine import run_trial
from bot.replay.trace import read_trace

RULE = "MAGIC RULE: before any test command,   check for a package-local config\nand run from its folder."
PASS_IF = [{"succeeds": {"run": "test -f done.txt"}}]
WITH = [{"bash": "touch done.txt"}, {"say": "done"}]
WITHOUT = [{"bash": "true"}, {"say": "done"}]


def _run_end(result):
    return [e for e in read_trace(Path(result.run_dir) / "trace.jsonl") if e.kind == "run_end"][0]


def test_seen_reads_instructions_and_messages_but_not_tool_output():
    needle = delivery.normalise(RULE)
    wrapped = "Rules:\n- " + RULE.replace(" ", "\n  ")
    assert delivery.seen({"system": [{"type": "text", "text": wrapped}], "messages": []}, needle)
    assert delivery.seen({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>" + RULE + "</system-reminder>"}]}]}, needle)
    assert delivery.seen({"instructions": "x", "input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "# AGENTS.md instructions\n" + RULE}]}]}, needle)
    tool_only = {"system": "be careful", "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": RULE}]}]}]}
    assert not delivery.seen(tool_only, needle)
    assert not delivery.seen({"input": [{"type": "function_call_output", "output": RULE}]}, needle)
    assert not delivery.seen({"system": RULE[:40]}, needle)  # half a rule is not the rule


def test_builtin_delivered_in_its_system_prompt(make_scenario, opts):
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    playbook = "# Playbook\n\n- [rule-0001] " + " ".join(RULE.split()) + "\n"
    result = run_trial(loaded, playbook, opts(rule=RULE), 0)
    assert (result.verdict, result.delivered) == ("passed", True), result.reason
    assert result.delivery["first_request"] == 1 and "system prompt" in result.delivery["how"]
    assert _run_end(result).delivery["delivered"] is True


def test_builtin_not_delivered_is_unscored_never_failed(make_scenario, opts):
    # Under deliver: files the builtin agent reads no AGENTS.md: the rule never reaches it, and the
    # trial (which would fail its checks) is not counted as the agent ignoring the rule.
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    result = run_trial(loaded, "- " + RULE, opts(rule=RULE, deliver="files"), 0)
    assert result.delivered is False
    assert result.verdict == "unscored" and result.reason.startswith("rule not delivered: builtin reads no")
    assert result.failed_checks, "the checks are still decided and kept"
    end = _run_end(result)
    assert end.status == "unscored" and end.delivery["delivered"] is False and end.delivery["requests"] >= 1


def test_no_rule_under_test_records_nothing(make_scenario, opts):
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    result = run_trial(loaded, "", opts(), 0)
    assert result.delivered is None and result.delivery == {} and _run_end(result).delivery is None


def test_an_unknown_delivery_is_bad_input(make_scenario, opts):
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH)
    with pytest.raises(BadInput, match="deliver 'email'"):
        run_trial(loaded, RULE, opts(rule=RULE, deliver="email"), 0)


def test_codex_chain_is_measured_root_first(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "AGENTS.md").write_text("a" * 30_000 + "\n\n- " + RULE + "\n")
    (tmp_path / "pkg" / "AGENTS.md").write_text("b" * 5_000)
    assert [rel for rel, _ in delivery.codex_chain(tmp_path, tmp_path / "pkg")] == ["AGENTS.md", "pkg/AGENTS.md"]
    assert delivery.codex_cut(tmp_path, RULE) == ""  # from the root alone the chain fits
    (tmp_path / "AGENTS.md").write_text("a" * 33_000 + "\n\n- " + RULE + "\n")
    why = delivery.codex_cut(tmp_path, RULE)
    assert "over its project_doc_max_bytes of 32,768 bytes" in why and "the rule at byte 33,004 was cut" in why
