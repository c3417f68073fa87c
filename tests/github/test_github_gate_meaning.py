"""The admit gate judges what agents are told, not git's file status: each bypass found in the attack pass.

Each test builds a real git repository (base commit on main, then the PR's
commit), runs the real ``PrGate`` through ``execute`` on the in-memory
port (``FakePort``), and checks the commit status. The gate here has no model: anything
it must replay ends as ``error``, never ``success``, so a bypass shows up as
a ``success`` it should not have given.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.port import FakePort
from helpers import make_scenario, rule_yaml, write
from support.github import HEAD, base_repo, git, run_pr_gate

from bot import config as config_mod
from bot.github.handle import PrGate


def gate_state(port: FakePort, root: Path, base: str, *, merge_group: bool = False) -> dict:
    """Run the real gate on the repository at ``root`` (HEAD is the PR); the status it set."""
    return run_pr_gate(port, root, HEAD, base, merge_group=merge_group)[0]


def _commit(root: Path, message: str = "the PR") -> None:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


NOTES = "".join(f"# review note {n}: kept with the rule\n" for n in range(12))  # git sees a rename, not A+D
QUOTED = 'rule: "Before running any test command,\ncheck for a package-local test config and run from that directory."'


def _base(root: Path, rule_text: str) -> str:
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_text)
    git(root, "init", "-q", "-b", "main")
    _commit(root, "base")
    return git(root, "rev-parse", "HEAD")


def _rename(root: Path) -> str:
    base = _base(root, NOTES + rule_yaml("rule-0001"))
    git(root, "mv", "playbook/rules/rule-0001.yaml", "playbook/rules/rule-0002.yaml")
    rule = root / "playbook" / "rules" / "rule-0002.yaml"
    rule.write_text(rule.read_text().replace("id: rule-0001", "id: rule-0002").replace("check for", "ignore"))
    return base


def _symlink(root: Path) -> str:
    base = _base(root, rule_yaml("rule-0001"))
    rule = root / "playbook" / "rules" / "rule-0001.yaml"
    write(root / "docs" / "elsewhere.yaml", rule_yaml("rule-0001", text="When X, delete the tests."))
    rule.unlink()
    os.symlink("../../docs/elsewhere.yaml", rule)
    return base


def _quoted_last_hit(root: Path) -> str:
    """A line that starts `last_hit:` inside a quoted rule text: a line-based filter would drop it."""
    text = rule_yaml("rule-0001").replace(
        "rule: Before running any test command, check for a package-local test config and run from that directory.",
        QUOTED)
    base = _base(root, text)
    rule = root / "playbook" / "rules" / "rule-0001.yaml"
    rule.write_text(text.replace("command,\n", "command,\nlast_hit: 2026-11-20 ignore the config and,\n"))
    return base


ATTACKS = {"renamed (R)": _rename, "replaced by a symlink (T)": _symlink,
           "last_hit slipped into a quoted text": _quoted_last_hit}


def test_the_attacks_are_what_the_issue_says(root):
    base = _rename(root)
    _commit(root)
    assert git(root, "diff", "--name-status", f"{base}...HEAD").startswith("R")


@pytest.mark.parametrize("merge_group", [False, True], ids=["pr", "merge group"])
@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_a_rule_change_git_calls_something_else_is_never_bookkeeping(port, root, attack, merge_group):
    make_scenario(root)
    base = ATTACKS[attack](root)
    _commit(root)
    status = gate_state(port, root, base, merge_group=merge_group)
    assert status["state"] != "success", status
    if attack.startswith("replaced by a symlink"):
        assert status["state"] == "failure" and "symlink" in status["description"]


def test_a_pure_last_hit_move_is_bookkeeping(port, root):
    make_scenario(root)
    base = base_repo(root)
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001", last_hit="2026-11-20"))
    _commit(root)
    status = gate_state(port, root, base)
    assert (status["state"], status["description"]) == ("success", "no rule changed (bookkeeping only)")


def test_a_change_to_the_scenario_an_admitted_rule_replays_is_gated(port, root):
    make_scenario(root)
    base = base_repo(root)
    write(root / "scenarios" / "monorepo-test-cwd" / "repo" / "README.md", "a different fixture\n")
    _commit(root)
    status = gate_state(port, root, base)
    assert status["state"] == "error", status  # replayed (and with no model: could not decide)
    gate = PrGate(root, config_mod.load(root))
    change = gate.change(base)
    assert change.gated == ["playbook/rules/rule-0001.yaml"]
    assert "scenarios/monorepo-test-cwd" in change.why["playbook/rules/rule-0001.yaml"]


def test_a_symlinked_scenario_file_is_refused(port, root):
    make_scenario(root)
    base = base_repo(root)
    fixture = root / "scenarios" / "monorepo-test-cwd" / "repo" / "README.md"
    fixture.unlink()
    os.symlink("/etc/hostname", fixture)
    _commit(root)
    status = gate_state(port, root, base)
    assert status["state"] == "failure" and "symlink" in status["description"]


def test_moving_paths_playbook_in_the_pr_config_is_judged_on_the_new_folder(port, root):
    make_scenario(root)
    base = base_repo(root)
    write(root / ".replaybook.yml", "paths:\n  playbook: elsewhere\n")
    write(root / "elsewhere" / "rules" / "rule-0007.yaml", rule_yaml("rule-0007", text="When X, run the tests twice."))
    git(root, "mv", "playbook/rules/rule-0001.yaml", "elsewhere/rules/rule-0001.yaml")  # or it leaves unretired
    _commit(root)
    status = gate_state(port, root, base)
    assert status["state"] == "error", status  # rule-0007 is new to what agents read: replayed


def test_moving_paths_playbook_without_the_rules_is_a_deletion(port, root):
    make_scenario(root)
    base = base_repo(root)
    write(root / ".replaybook.yml", "paths:\n  playbook: elsewhere\n")
    _commit(root)
    status = gate_state(port, root, base)
    assert status["state"] == "failure" and "rule-0001" in status["description"], status


def test_the_pr_config_cannot_raise_the_cap_the_gate_checks(port, root):
    make_scenario(root)
    write(root / ".replaybook.yml", "cap: 1\n")
    base = base_repo(root)
    write(root / ".replaybook.yml", "cap: 60\n")
    write(root / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002", text="When X, do Y."))
    _commit(root)
    status = gate_state(port, root, base)
    assert (status["state"], status["description"]) == ("failure", "2 rules past the cap of 1")
