"""``replaybook scenario validate``: each malformed case named, the do-nothing control, exit 0/1/2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from helpers import REPO, write

from bot.replay import validate as sv
from bot.replay.cache import ReplayCache

RULE = "When a task says make it right, write right.txt and never wrong.txt."


def sound(root: Path, sid: str = "own", **over) -> Path:
    """A sound scenario: the agent must write right.txt, which the fixture lacks."""
    folder = root / "scenarios" / sid
    write(folder / "repo" / "README.md", "fixture\n")
    policy = {"branch_on": "write right.txt", "with_rule": [{"bash": "echo ok > right.txt"}, {"say": "done"}],
              "without_rule": [{"bash": "echo no > wrong.txt"}, {"say": "done"}]}
    write(folder / "policy.yaml", yaml.safe_dump(over.pop("policy", policy)))
    scenario = {"id": sid, "task": "make it right", "repo": "repo",
                "pass_if": [{"succeeds": {"run": "test -f right.txt"}}, {"exists": ["README.md"]}],
                "budget": {"max_turns": 5, "timeout_s": 60, "max_cost_usd": 1.0},
                "solution": ["echo ok > right.txt"], **over}
    write(folder / "scenario.yaml", yaml.safe_dump(scenario, sort_keys=False))
    write(folder / "rule.yaml", yaml.safe_dump({"id": "rule-0001", "rule": RULE, "cites": ["a"],
                                                "replay": f"scenarios/{sid}", "created": "2026-11-01"}))
    return folder


def test_a_sound_scenario_and_the_bundled_suite_pass(cli, root):
    sound(root)
    result = cli("scenario", "validate")
    assert result.code == 0 and result.out == "ok: own\n", result.err
    bundled = cli("--root", str(REPO), "scenario", "validate", "--no-cache", str(REPO / "scenarios"))
    assert bundled.code == 2 and "no scenario here" in bundled.err  # a suite folder is not one scenario
    every = cli("scenario", "validate", *(str(p) for p in sorted((REPO / "scenarios").glob("*/"))
                                           if (p / "scenario.yaml").exists()))
    assert every.code == 0, every.out + every.err
    assert every.out.count("ok: ") == len([p for p in (REPO / "scenarios").glob("*/") if (p / "scenario.yaml").exists()])


@pytest.mark.parametrize("case, change, expected", [
    ("sentence pass_if", dict(pass_if="the tests pass"), "is a sentence; write structured checks"),
    ("missing fixture", dict(repo="nowhere"), "fixture folder"),
    ("unknown check", dict(pass_if=[{"succeeds": {"run": "true"}}, {"passes": {"run": "true"}}]),
     "each check is a mapping with one key among"),
    ("no succeeds", dict(pass_if=[{"exists": ["README.md"]}]), "has no `succeeds` check (nor a `fails` check)"),
    ("misspelt key", dict(budjet={"max_turns": 3}), "field `budjet`: is not a known field; did you mean `budget`?"),
    ("misspelt check key", dict(pass_if=[{"succeeds": {"run": "true", "cdw": "."}}]), "is not a known field"),
    ("misspelt check key's nearest", dict(pass_if=[{"succeeds": {"run": "true", "cdw": "."}}]), "did you mean `cwd`?"),
    ("unknown check named", dict(pass_if=[{"succeeds": {"run": "true"}}, {"succeed": {"run": "true"}}]),
     "`succeed` is not a known key (did you mean `succeeds`?)"),
    ("repo outside the suite", dict(repo="../../elsewhere"), "points outside"),
    ("unchanged names nothing", dict(pass_if=[{"succeeds": {"run": "test -f right.txt"}}, {"unchanged": ["READEM.md"]}]),
     "`unchanged` path READEM.md names nothing in the fixture"),
    ("exists names nothing", dict(pass_if=[{"succeeds": {"run": "test -f right.txt"}}, {"exists": ["README.md", "docs"]}]),
     "`exists` path docs names nothing in the fixture"),
])
def test_bad_scenario_files_are_bad_input(cli, root, case, change, expected):
    sound(root, **change)
    write(root / "elsewhere" / "README.md", "x")
    result = cli("scenario", "validate")
    assert result.code == 2, (case, result.out, result.err)
    assert expected in result.out, (case, result.out)
    assert "bad input: own" in result.out and "1 of 1 scenario(s) cannot prove a rule: own" in result.err


@pytest.mark.parametrize("case, policy, expected", [
    ("misspelt step key", {"branch_on": "write right.txt", "with_rule": [{"write": {"path": "a", "contnet": "x"}}],
                           "without_rule": [{"say": "no"}]}, "unknown keys ['contnet']"),
    ("misspelt repeat", {"branch_on": "write right.txt", "with_rule": [{"bash": "true", "reapeat": 2}],
                         "without_rule": [{"say": "no"}]}, "unknown keys ['reapeat']"),
    ("unknown top key", {"branch_on": "write right.txt", "with_rule": [], "without_rule": [], "with_rules": []},
     "`with_rules`: unknown key"),
])
def test_a_misspelt_policy_key_is_named(cli, root, case, policy, expected):
    sound(root, policy=policy)
    result = cli("scenario", "validate", "--no-control")
    assert result.code == 2 and expected in result.out, (case, result.out)


def test_an_escaping_symlink_is_bad_input(cli, root):
    folder = sound(root)
    write(root / "secret.txt", "s3cret")
    os.symlink(root / "secret.txt", folder / "repo" / "leak")
    os.symlink("../../../secret.txt", folder / "repo" / "leak2")
    os.symlink("README.md", folder / "repo" / "fine")
    result = cli("scenario", "validate")
    assert result.code == 2
    assert "symlink leak ->" in result.out and "symlink leak2 -> ../../../secret.txt" in result.out
    assert "symlink fine" not in result.out


def test_no_policy_and_a_branch_text_the_rule_never_says_are_unsound(cli, root):
    folder = sound(root)
    (folder / "policy.yaml").unlink()
    result = cli("scenario", "validate")
    assert result.code == 1 and "policy.yaml: missing" in result.out and "unsound: own" in result.out
    sound(root, policy={"branch_on": "read the manual", "with_rule": [{"bash": "echo ok > right.txt"}],
                        "without_rule": [{"say": "no"}]})
    result = cli("scenario", "validate")
    assert result.code == 1
    assert "'read the manual' occurs in no rule that replays this scenario (rule-0001)" in result.out
    sound(root, policy={"branch_on": "cite its id", "with_rule": [], "without_rule": []})
    write(root / "scenarios" / "own" / "rule.yaml", yaml.safe_dump({
        "id": "rule-0001", "rule": "When done, cite its id.", "cites": ["a"], "replay": "scenarios/own",
        "created": "2026-11-01"}))
    result = cli("scenario", "validate")
    assert result.code == 1 and "even without the rule" in result.out  # the playbook's own boilerplate says it


def test_a_scenario_that_passes_when_the_agent_does_nothing_is_unsound(cli, root):
    sound(root, pass_if=[{"succeeds": {"run": "test -f README.md"}}, {"not_ran": {"command": "rm"}}])
    result = cli("scenario", "validate")
    assert result.code == 1 and "every check holds when the agent does nothing" in result.out


def test_a_succeeds_that_already_holds_is_unsound_even_when_a_command_check_fails(cli, root):
    # Fails for the do-nothing agent only because pytest never ran: an agent that runs pytest and fixes nothing passes.
    sound(root, pass_if=[{"ran": {"command": "pytest"}}, {"succeeds": {"run": "test -f README.md"}}])
    result = cli("scenario", "validate")
    assert result.code == 1
    assert "every `succeeds`/`fails` check already holds on the untouched fixture (succeeds test -f README.md)" \
        in result.out


def test_the_control_is_a_cached_replay(root):
    folder = sound(root)
    cache = ReplayCache(root / ".cache")
    first = sv.validate(folder, cache=cache)
    assert first.ok and first.control.verdict == "failed" and cache.hits == 0
    assert first.control.model_calls == 0 and first.control.cost_usd == 0
    again = sv.validate(folder, cache=cache)
    assert again.ok and cache.hits == 2  # the control and the reference solution
    write(folder / "repo" / "right.txt", "already here\n")  # a changed fixture is a new key, and now unsound
    changed = sv.validate(folder, cache=cache)
    assert cache.hits == 2 and not changed.ok and changed.control.verdict == "passed"  # none read from the cache


def test_json_output_and_one_path(cli, root):
    sound(root, "own")
    sound(root, "other", pass_if=[{"succeeds": {"run": "true"}}])
    result = cli("scenario", "validate", "--json", str(root / "scenarios" / "own"))
    assert result.code == 0
    assert [(f["scenario"], f["ok"], f["control"]) for f in json.loads(result.out)] == [("own", True, "failed")]
    both = cli("scenario", "validate", "--json")
    assert both.code == 1 and [f["ok"] for f in json.loads(both.out)] == [False, True]


def test_ci_runs_the_validation_of_the_bundled_suite(capsys):
    # `.ci/run` runs the tests; this is the one that validates the repository's own suite.
    from bot.cli.main import run

    assert run(["--root", str(REPO), "scenario", "validate", "--no-cache"]) == 0, capsys.readouterr()


def test_playbook_check_validates_each_admitted_rules_scenario(cli, root):
    from bot.playbook.store import Playbook

    write(root / "incidents" / "a.yaml", __import__("helpers").incident_yaml("a"))
    sound(root, pass_if=[{"succeeds": {"run": "test -f README.md"}}])  # holds on the fixture
    write(root / "playbook" / "rules" / "rule-0001.yaml", yaml.safe_dump({
        "id": "rule-0001", "rule": RULE, "cites": ["a"], "replay": "scenarios/own", "created": "2026-11-01"}))
    Playbook(root / "playbook", root=root).render()
    result = cli("playbook", "check")
    assert result.code == 1 and "scenario own cannot prove its rule" in result.err, result.err
    sound(root)
    assert cli("playbook", "check").code == 0
