"""`gate --agent A --agent B`: a rule proven per agent, a report column per agent, rendered only where proven."""

from __future__ import annotations

import json

from helpers import snapshot, write
from support.gate import setup


def test_a_rule_proven_on_one_agent_only_is_rendered_only_into_its_files(cli, root):
    path = setup(root)
    write(root / ".replaybook.yml", "render: [claude, agents]\n")
    assert cli("playbook", "render").code == 0
    # `command` here is an agent that does nothing: the rule cannot help it, so it is not proven there.
    result = cli("gate", str(path), "--agent", "builtin", "--agent", "command", "--command", "true {task}",
                 "--trials", "3", "--admit")
    assert result.code == 0, result.err
    out = result.out
    assert "|  | builtin | command |" in out
    assert "| decision | admit | reject |" in out
    assert "| task types dropping | none | none |" in out and "| efficiency (reported, not decided on) |" in out
    assert "proven on builtin only; rendered only into their files" in out
    assert "Not proven on command" in out and "agents: [builtin]" in out
    admitted = (root / "playbook/rules/rule-0001.yaml").read_text()
    assert "agents: [builtin]" in admitted
    assert cli("playbook", "render").code == 0
    # builtin stands for Claude Code (bot.playbook.scope.STANDS_FOR): its proof renders into CLAUDE.md; Codex's
    # AGENTS.md never had it proven
    assert b"[rule-0001] When a task" in (root / "CLAUDE.md").read_bytes()
    assert b"[rule-0001] When a task" not in (root / "AGENTS.md").read_bytes()
    assert cli("playbook", "check").code == 0


def test_per_agent_json_and_a_rule_proven_nowhere(cli, root):
    path = setup(root)
    write(root / ".replaybook.yml", "replay: {agents: [builtin]}\n")
    before = snapshot(root / "playbook")
    result = cli("gate", str(path), "--agent", "command", "--agent", "builtin", "--command", "true {task}",
                 "--trials", "3", "--json")
    data = json.loads(result.out)
    assert result.code == 0 and data["proven_on"] == ["builtin"] and data["partial"] is True
    assert set(data["agents"]) == {"command", "builtin"} and data["agents"]["command"]["decision"] == "reject"
    assert snapshot(root / "playbook") == before  # no --admit: nothing changed
    none = cli("gate", str(path), "--agent", "command", "--agent", "builtin", "--command", "false {task}",
               "--trials", "3", "--json")
    assert none.code == 1 or json.loads(none.out)["decision"] == "admit"  # builtin still proves it


def test_config_agents_must_be_gate_agents(cli, root):
    path = setup(root)
    write(root / ".replaybook.yml", "replay: {agents: [builtin, vim]}\n")
    result = cli("gate", str(path))
    assert result.code == 2 and "replay.agents" in result.err and "vim" in result.err
