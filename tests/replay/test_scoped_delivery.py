"""A path-scoped rule reaches an agent only when its host's trigger fires (bot.replay.agents.scoped_delivery).

builtin stands for Claude Code: the rule arrives after the agent opens a matching file, never before.
mini-swe-agent stands for Codex: a folder-scoped rule is read at start from the root down, so never from the root.
The real Claude Code CLI (pinned) loads the rendered `.claude/rules/` file with `paths:` the same way: checked
against the gateway's record of every request.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.replay.agents import scoped_delivery
from bot.replay.engine import run_trial

RULE = "MAGIC RULE: before editing api code, run its tests from packages/api."
PLAYBOOK = "# Playbook\n\n- [rule-0001] Before any commit, run the linter.\n- [rule-0002] " + RULE + "\n"
PASS_IF = [{"succeeds": {"run": "test -f done.txt"}}]
FILES = {"README.md": "tiny\n", "packages/api/app.py": "x = 1\n", "docs/guide.md": "hi\n"}


def _requests(result) -> list[dict]:
    return json.loads(json.dumps(result.delivery))


def _scenario(make_scenario, first_step):
    # With the rule in its context the simulated model finishes the task; without it, it does not.
    return make_scenario(pass_if=PASS_IF, files=FILES,
                         with_rule=[first_step, {"bash": "touch done.txt"}, {"say": "done"}],
                         without_rule=[first_step, {"bash": "true"}, {"say": "done"}])


def test_builtin_gets_a_scoped_rule_only_after_reading_a_matching_file(make_scenario, opts):
    loaded = _scenario(make_scenario, {"read": "packages/api/app.py"})
    result = run_trial(loaded, PLAYBOOK, opts(rule=RULE, rule_paths=("packages/api/**",)), 0)
    assert (result.verdict, result.delivered) == ("passed", True), (result.reason, result.delivery)
    trigger = result.delivery["trigger"]
    assert trigger["fired_by"] == "read opened packages/api/app.py" and trigger["fired_at"] == 2
    assert result.delivery["first_request"] == 2, "never in the first request: the trigger fired after it"
    assert "error" not in result.delivery


def test_builtin_never_gets_it_when_it_reads_elsewhere(make_scenario, opts):
    loaded = _scenario(make_scenario, {"read": "docs/guide.md"})
    result = run_trial(loaded, PLAYBOOK, opts(rule=RULE, rule_paths=("packages/api/**",)), 0)
    # Withheld by its scope, as Claude Code would: the trial the host gives, scored (here: without the rule's help)
    assert result.delivered is False and result.delivery["withheld"] is True, result.delivery
    assert result.verdict == "failed", result.reason
    assert "its trigger never fired" in result.delivery["reason"] and "packages/api/**" in result.delivery["reason"]
    assert result.delivery["trigger"]["fired_by"] is None


def test_a_bash_read_fires_it_as_claude_codes_does(make_scenario, opts):
    loaded = _scenario(make_scenario, {"bash": "cat packages/api/app.py"})
    result = run_trial(loaded, PLAYBOOK, opts(rule=RULE, rule_paths=("packages/api/**",)), 0)
    assert (result.verdict, result.delivered) == ("passed", True), (result.reason, result.delivery)
    assert result.delivery["trigger"]["fired_by"] == "bash opened packages/api/app.py"


def test_a_scoped_rule_seen_without_its_trigger_is_a_delivery_error(make_scenario, opts):
    # The rule is also in the playbook text, wrapped over two lines: it reaches the agent in request 1, before any
    # read, and the trial is a delivery error, never scored.
    loaded = _scenario(make_scenario, {"read": "packages/api/app.py"})
    leaked = PLAYBOOK + "\nNotes: " + RULE.replace(" api code, ", " api code,\n  ") + "\n"
    sc = scoped_delivery.Scoped(RULE, ("packages/api/**",), "claude", "builtin")
    from bot.replay.delivery import Delivery

    got = sc.settle(Delivery(True, "x", first=1, requests=3, held=3), [True, True, True])
    assert got.error.startswith("delivery error") and "never fired" in got.error
    sc.observe("read", {"path": "packages/api/app.py"})
    sc.pending(2)
    got = sc.settle(Delivery(True, "x", first=1, requests=3, held=3), [True, True, True])
    assert "before its trigger fired" in got.error
    late = scoped_delivery.Scoped(RULE, ("packages/api/**",), "claude", "builtin")
    late.observe("read", {"path": "packages/api/app.py"})
    late.pending(3)  # fired on the last turn: no third request ever came
    got = late.settle(Delivery(False, "x", requests=2), [False, False])
    assert not got.error and got.withheld and "on the agent's last turn" in got.reason
    result = run_trial(loaded, leaked, opts(rule=RULE, rule_paths=("packages/api/**",)), 0)
    assert result.verdict == "unscored" and result.reason.startswith("delivery error"), result.reason


def test_opened_reads_file_tools_and_shell_reads_only():
    assert scoped_delivery.opened("Read", {"file_path": "/w/r/packages/api/app.py"}, "/w/r") == ["packages/api/app.py"]
    assert scoped_delivery.opened("bash", {"command": "cd x && head -n 3 a/b.py | wc -l"}) == ["a/b.py"]
    assert scoped_delivery.opened("bash", {"command": "ls packages/api; echo y > packages/api/z.py"}) == []
    assert scoped_delivery.opened("read", {"path": "../../etc/passwd"}) == []
    assert scoped_delivery.opened("bash", {"command": "cat 'unclosed"}) == []


def test_mini_swe_agent_as_codex_never_gets_a_folder_rule_from_the_root(agent_bin, make_scenario, opts):
    agent_bin("mini-swe-agent")
    loaded = _scenario(make_scenario, {"bash": "cat packages/api/app.py"})
    result = run_trial(loaded, PLAYBOOK, opts(agent="mini-swe-agent", rule=RULE, rule_paths=("packages/api/**",)), 0)
    assert result.delivered is False and result.delivery["requests"] >= 1, result.delivery
    assert result.delivery["withheld"] and result.verdict == "failed"
    assert "never started in a folder" in result.delivery["reason"] and "packages/api/**" in result.delivery["reason"]
    # A glob with no folder is Codex's root AGENTS.md, whole: given at start.
    whole = run_trial(loaded, PLAYBOOK, opts(agent="mini-swe-agent", rule=RULE, rule_paths=("**/*.py",)), 0)
    assert whole.delivered is True and whole.delivery["first_request"] == 1, whole.delivery


def test_claude_code_loads_the_rendered_rule_after_a_read_and_not_before(claude_code_agent, make_scenario, opts):
    loaded = _scenario(make_scenario, {"read": "packages/api/app.py"})
    result = run_trial(loaded, PLAYBOOK, opts(agent="claude-code", rule=RULE, deliver="files",
                                              rule_paths=("packages/api/**",)), 0)
    assert (result.verdict, result.delivered) == ("passed", True), (result.reason, result.delivery)
    assert result.delivery["first_request"] > 1 and "error" not in result.delivery
    assert result.delivery["trigger"]["fired_by"].endswith("opened packages/api/app.py")
    other = run_trial(_scenario(make_scenario, {"read": "docs/guide.md"}), PLAYBOOK,
                      opts(agent="claude-code", rule=RULE, deliver="files", rule_paths=("packages/api/**",)), 0)
    assert other.delivered is False and other.delivery["withheld"] and other.verdict == "failed", other.delivery


def test_codex_never_reads_a_folder_agents_md_below_where_it_started(agent_bin, make_scenario, opts):
    # Codex 0.169.0 joins AGENTS.md from the root down to its start folder, once: started at the root, the rule
    # rendered into packages/api/AGENTS.md never arrives, even after it reads a file there.
    agent_bin("codex")
    loaded = _scenario(make_scenario, {"bash": "cat packages/api/app.py"})
    result = run_trial(loaded, PLAYBOOK, opts(agent="codex", rule=RULE, deliver="files",
                                              rule_paths=("packages/api/**",)), 0)
    run = Path(result.run_dir)
    assert result.delivered is False and result.delivery["requests"] >= 2, result.delivery
    assert "never started in a folder matching packages/api/**" in result.delivery["reason"]
    assert "rule-0001" in result.delivery["how"] or "AGENTS.md" in result.delivery["how"]
    assert run.exists()
