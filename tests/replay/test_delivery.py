"""Delivered or not: whether the rule under test reached the agent, seen by the gateway, for every agent.

The builtin agent runs against the simulated model; Codex, opencode, mini-swe-agent and Claude Code run
for real (pinned, installed into the user's cache as tests/replay/test_more_agents.py does) against the
same gateway. Each agent has a trial whose rule arrives and one whose rule does not.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from bot.errors import BadInput
from bot.replay import delivery
from bot.replay.engine import run_trial
from bot.replay.trace.events import read_trace

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


# -- only what the agent sent as its instructions (issue 53 item 3) --------------------------------------------
def test_the_task_text_never_delivers_the_rule():
    needle = delivery.normalise(RULE)
    task = "Fix the build. " + RULE
    request = {"system": "You are an agent.", "messages": [{"role": "user", "content": task}]}
    assert not delivery.seen(request, needle, task)
    request["system"] += "\n" + RULE  # and once the agent did send it, the task's copy hides nothing
    assert delivery.seen(request, needle, task)


def test_the_models_own_words_and_what_follows_them_never_deliver_the_rule():
    needle = delivery.normalise(RULE)
    echoed = {"system": "be careful", "messages": [
        {"role": "user", "content": "Do the task."}, {"role": "assistant", "content": [{"type": "text", "text": RULE}]},
        {"role": "user", "content": "<output>" + RULE + "</output>"}]}  # mini-swe-agent's observation
    assert not delivery.seen(echoed, needle)
    chat = {"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "go"},
                         {"role": "tool", "tool_call_id": "1", "content": RULE}]}
    assert not delivery.seen(chat, needle)
    responses = {"input": [{"type": "message", "role": "user", "content": "go"},
                           {"type": "function_call", "name": "sh", "arguments": "{}"},
                           {"type": "message", "role": "user", "content": RULE}]}
    assert not delivery.seen(responses, needle)
    assert delivery.seen({"input": [{"type": "message", "role": "developer", "content": RULE}]}, needle)


def test_builtins_scoped_rule_block_after_a_tool_result_delivers_it_and_a_copy_in_tool_output_does_not():
    """builtin hands a path-scoped rule over beside the tool result that fired its trigger, after the model spoke
    (``agents.scoped_delivery.reminder``): that block of its own counts; the same text in a tool's output, in an
    observation string or in the model's words does not."""
    from bot.replay.agents.scoped_delivery import reminder

    needle = delivery.normalise(RULE)
    spoke = [{"role": "user", "content": "Do the task."},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "read", "input": {}}]}]
    given = {"system": "be careful", "messages": [*spoke, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "app()"}, {"type": "text", "text": reminder(RULE)}]}]}
    assert delivery.seen(given, needle)
    in_output = {"system": "be careful", "messages": [*spoke, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": reminder(RULE)}]}]}]}
    assert not delivery.seen(in_output, needle)
    as_string = {"system": "be careful", "messages": [*spoke, {"role": "user", "content": reminder(RULE)}]}
    assert not delivery.seen(as_string, needle)
    quoted = {"system": "be careful", "messages": [*spoke, {"role": "user", "content": [
        {"type": "text", "text": "note: " + reminder(RULE)}]}]}
    assert not delivery.seen(quoted, needle)
    # Claude Code 2.1.x sends the loaded scoped rule file as a block of its own beside the tool's result (seen here)
    loaded = ("<system-reminder>\nContents of /tmp/x/root/" + delivery.CLAUDE_RULE_FILE + ":\n\n" + RULE
              + "\n\n</system-reminder>")
    claude = {"system": "be careful", "messages": [*spoke, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "1\tx = 1"}, {"type": "text", "text": loaded}]}]}
    assert delivery.seen(claude, needle)
    other_file = loaded.replace(delivery.CLAUDE_RULE_FILE, "docs/notes.md")  # a file Claude Code showed, not the rule
    assert not delivery.seen({"system": "x", "messages": [*spoke, {"role": "user", "content": [
        {"type": "text", "text": other_file}]}]}, needle)


def test_typographic_quotes_and_markdown_around_the_rule_still_deliver_it():
    rule = "When a test fails, don't rerun it blindly: read \"the first error\" and fix `conftest.py` first."
    rendered = ("## Playbook\n\n- **When a test fails**, don\u2019t rerun it blindly: read \u201cthe first error\u201d"
                " and fix conftest.py first.\n")
    assert delivery.seen({"system": rendered}, delivery.normalise(rule))
    assert delivery.seen({"system": "> " + rule.replace(" ", "\n> ")}, delivery.normalise(rule))


def test_a_scenario_whose_task_quotes_the_rule_does_not_deliver_it(make_scenario, opts):
    """Under ``deliver: files`` the builtin agent reads no file, so the rule never reaches it; a task that quotes
    the rule made the trial count as delivered."""
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT, task="Do it. " + RULE)
    result = run_trial(loaded, "- " + RULE, opts(rule=RULE, deliver="files"), 0)
    assert result.delivered is False and result.verdict == "unscored", result.reason


def test_builtin_delivered_in_its_system_prompt(make_scenario, opts):
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    playbook = "# Playbook\n\n- [rule-0001] " + " ".join(RULE.split()) + "\n"
    result = run_trial(loaded, playbook, opts(rule=RULE), 0)
    assert (result.verdict, result.delivered) == ("passed", True), result.reason
    assert result.delivery["first_request"] == 1 and "system prompt" in result.delivery["how"]
    assert result.delivery["requests_with_rule"] == result.delivery["requests"] == result.model_calls
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


# -- the agent CLIs, for real, against the gateway --------------------------------------------------

BIG = "# Project notes\n\n" + "".join(f"- note {i:05d}: keep this module tidy and documented.\n" for i in range(700))


@pytest.mark.parametrize("agent", ["codex", "opencode"])
def test_cli_agent_delivered_by_its_prompt_channel(agent, agent_bin, make_scenario, opts):
    agent_bin(agent)
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    result = run_trial(loaded, "- " + RULE, opts(agent=agent, rule=RULE), 0)
    assert result.delivered is True, (result.reason, result.delivery)
    assert result.verdict == "passed", result.reason


@pytest.mark.parametrize("agent", ["codex", "opencode"])
def test_cli_agent_delivered_by_the_repositorys_agents_md(agent, agent_bin, make_scenario, opts):
    agent_bin(agent)
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT,
                           files={"README.md": "tiny\n", "AGENTS.md": "# Project notes\n\nBe brief.\n"})
    result = run_trial(loaded, "- " + RULE, opts(agent=agent, rule=RULE, deliver="files"), 0)
    assert result.delivered is True, (result.reason, result.delivery)
    assert result.delivery["how"] == "the repository's AGENTS.md"
    assert "AGENTS.md" not in Path(result.run_dir).joinpath("diff.patch").read_text()  # the fixture as given


def test_codex_chain_over_its_budget_cuts_the_rule(agent_bin, make_scenario, opts):
    agent_bin("codex")
    assert len(BIG.encode()) > delivery.CODEX_MAX_BYTES
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT,
                           files={"README.md": "tiny\n", "AGENTS.md": BIG})
    result = run_trial(loaded, "- " + RULE, opts(agent="codex", rule=RULE, deliver="files"), 0)
    assert result.delivered is False, result.delivery
    assert result.verdict == "unscored"
    assert "over its project_doc_max_bytes of 32,768 bytes" in result.reason and "was cut" in result.reason


def test_mini_swe_agent_delivered_in_its_template_and_never_by_agents_md(agent_bin, make_scenario, opts):
    agent_bin("mini-swe-agent")
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT,
                           files={"README.md": "tiny\n", "AGENTS.md": "# Project notes\n"})
    given = run_trial(loaded, "- " + RULE, opts(agent="mini-swe-agent", rule=RULE), 0)
    assert given.delivered is True, (given.reason, given.delivery)
    assert "system_template" in given.delivery["how"]
    # mini-swe-agent reads no AGENTS.md: a rule rendered there never reaches it
    rendered = run_trial(loaded, "- " + RULE, opts(agent="mini-swe-agent", rule=RULE, deliver="files"), 0)
    assert rendered.delivered is False and rendered.delivery["requests"] >= 1, rendered.delivery
    assert rendered.reason.startswith("rule not delivered: mini-swe-agent reads no instruction file")


def test_claude_code_delivered_by_prompt_and_by_claude_md(claude_code_agent, make_scenario, opts):
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    appended = run_trial(loaded, "- " + RULE, opts(agent="claude-code", rule=RULE), 0)
    assert appended.delivered is True, (appended.reason, appended.delivery)
    assert appended.verdict == "passed", appended.reason
    rendered = run_trial(loaded, "- " + RULE, opts(agent="claude-code", rule=RULE, deliver="files"), 0)
    assert rendered.delivered is True, (rendered.reason, rendered.delivery)
    assert rendered.delivery["how"] == "the repository's CLAUDE.md"
    assert rendered.verdict == "passed", rendered.reason  # the simulated model reads its system reminders


def test_claude_code_paths_rule_that_does_not_load(claude_code_agent, make_scenario, opts):
    # The rule is scoped to files the agent never reads (`paths:`): Claude Code keeps it out of the context.
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT,
                           files={"README.md": "tiny\n", "packages/api/app.py": "x = 1\n"})
    result = run_trial(loaded, "# Playbook\n\n- " + RULE, opts(agent="claude-code", rule=RULE, deliver="files",
                                                                rule_paths=("packages/api/**",)), 0)
    assert result.delivered is False, result.delivery
    # It never read a matching file, so its trigger never fired: withheld as Claude Code withholds it, and scored
    # (bot.replay.agents.scoped_delivery); the host's own explanation is kept.
    assert result.delivery["withheld"] and result.verdict == "failed", result.reason
    assert delivery.CLAUDE_RULE_FILE in result.delivery["reason"] and '"packages/api/**"' in result.delivery["reason"]
    raw = Path(result.run_dir).joinpath("agent.raw").read_text()
    assert "tool_use" in raw  # the agent did run: it was the rule that never arrived


def test_claude_codes_instructions_loaded_hook_names_what_it_loaded(claude_code_agent, make_scenario, opts):
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    result = run_trial(loaded, "# Playbook\n\n- " + RULE, opts(agent="claude-code", rule=RULE, deliver="files",
                                                                rule_paths=("packages/api/**",)), 0)
    assert result.delivered is False
    assert {"file": "CLAUDE.md", "how": "session_start"} in result.delivery["loaded"], result.delivery
    assert "InstructionsLoaded hook named CLAUDE.md (session_start), never .claude/rules/" in result.delivery["reason"]


# A command agent: one loop over the real anthropic SDK, the playbook (when its template passes one) as system.
COMMAND_AGENT = '''
import os, subprocess, sys
import anthropic
task, playbook = sys.argv[1], (open(sys.argv[2]).read() if len(sys.argv) > 2 else "")
client = anthropic.Anthropic(base_url=os.environ["ANTHROPIC_BASE_URL"], api_key=os.environ["ANTHROPIC_API_KEY"])
tools = [{"name": "bash", "description": "run", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
messages = [{"role": "user", "content": task}]
for _ in range(5):
    reply = client.messages.create(model="simulated", max_tokens=1000, system=playbook or "none", messages=messages,
                                   tools=tools)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
    uses = [b for b in reply.content if b.type == "tool_use"]
    if not uses:
        break
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": subprocess.run(
        ["bash", "-c", u.input["command"]], capture_output=True, text=True).stdout} for u in uses]})
'''


def test_command_agent_delivered_by_its_playbook_file_and_not_without_one(make_scenario, opts, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(COMMAND_AGENT)
    loaded = make_scenario(pass_if=PASS_IF, with_rule=WITH, without_rule=WITHOUT)
    base = f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))} {{task}}"
    given = run_trial(loaded, "- " + RULE, opts(agent="command", command=base + " {playbook_file}", rule=RULE), 0)
    assert (given.verdict, given.delivered) == ("passed", True), given.reason
    forgotten = run_trial(loaded, "- " + RULE, opts(agent="command", command=base, rule=RULE), 0)
    assert forgotten.delivered is False and forgotten.verdict == "unscored"
    assert "the --command template has no {playbook_file}" in forgotten.reason


def test_the_hooks_log_is_read_without_following_a_link_the_agent_planted(tmp_path):
    from bot.replay.agents.claude_code import read_loaded

    secret = tmp_path / "host-secret.json"
    secret.write_text('{"file_path": "SECRET-VALUE", "load_reason": "x"}\n')
    log = tmp_path / "sandbox-tmp" / "claude-instructions.jsonl"
    log.parent.mkdir()
    log.symlink_to(secret)
    assert read_loaded(log, tmp_path) == []
    log.unlink()
    log.write_text('{"file_path": "%s/CLAUDE.md", "load_reason": "session_start"}\n' % tmp_path)
    assert read_loaded(log, tmp_path) == [{"file": "CLAUDE.md", "how": "session_start"}]
