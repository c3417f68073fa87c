"""Leakage (issue 49): a scenario whose task or fixture already tells the agent the rule is flagged, as a warning
of `scenario validate` and a flag of the gate; the bundled scenarios are not; the fixture is read as data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from helpers import REPO, write

from bot.model import meaning
from bot.playbook import rule as rules_mod
from bot.scenario import leakage
from bot.scenario import spec as sc

RULE = "Before committing, run `npm run lint` and fix what it reports."
MONOREPO = "When a test fails in a monorepo package, run pytest from that package's folder, packages/api."


def scenario(root: Path, task: str, readme: str = "A small web shop.\n", checks: list | None = None) -> Path:
    folder = root / "scenarios" / "leaky"
    write(folder / "repo" / "README.md", readme)
    write(folder / "policy.yaml", yaml.safe_dump({
        "branch_on": "npm run lint", "with_rule": [{"bash": "echo ok > done.txt"}, {"say": "done"}],
        "without_rule": [{"say": "done"}]}))
    write(folder / "scenario.yaml", yaml.safe_dump({
        "id": "leaky", "task": task, "repo": "repo",
        "pass_if": (checks or []) + [{"succeeds": {"run": "test -f done.txt"}}]}, sort_keys=False))
    write(folder / "rule.yaml", yaml.safe_dump({"id": "rule-0001", "rule": RULE, "cites": ["a"],
                                                "replay": "scenarios/leaky", "created": "2026-11-01"}))
    return folder


def test_a_task_that_states_the_rules_command_is_flagged_and_validate_still_passes(cli, root):
    scenario(root, "Add a footer to the shop page, then run npm run lint and fix what it reports.")
    result = cli("scenario", "validate", "--no-control")
    assert result.code == 0, result.err
    assert "warning: leakage: the task already says what the rule says (command: npm run lint)" in result.out


def test_a_fixture_readme_that_states_the_command_is_flagged_with_the_rule_given(cli, root, tmp_path):
    folder = scenario(root, "Add a footer to the shop page.",
                      readme="# shop\n\nContributing: before you commit, run `npm run lint`.\n")
    (folder / "rule.yaml").unlink()
    assert "leakage" not in cli("scenario", "validate", "--no-control").out  # no rule known: nothing to leak
    other = tmp_path / "rule.yaml"
    write(other, yaml.safe_dump({"id": "rule-0009", "rule": RULE, "cites": ["a"], "replay": "scenarios/other", "created": "2026-11-01"}))
    result = cli("scenario", "validate", "--no-control", "--rule", str(other), "--json")
    assert result.code == 0, result.err
    assert "leakage: the README.md already says what the rule says (command: npm run lint)" in result.out


def test_a_task_that_states_a_rule_check_is_flagged_without_any_rule(root):
    folder = scenario(root, "Fix the failing test; run pytest from packages/api.",
                      checks=[{"ran": {"command": "pytest", "cwd": "packages/api"}}])
    (folder / "rule.yaml").unlink()
    leaks = leakage.find(sc.load(folder))
    assert [(leak.where, leak.how) for leak in leaks] == [("task", "check")]
    clean = scenario(root, "Fix the failing test in packages/api/tests/test_limits.py.",
                     checks=[{"ran": {"command": "pytest", "cwd": "packages/api"}}])
    assert leakage.find(sc.load(clean)) == []


def test_the_rules_operative_terms_in_one_sentence_are_a_leak_its_condition_alone_is_not(root):
    loaded = sc.load(scenario(root, "Fix the failing test in packages/api."))
    assert leakage.find(loaded, MONOREPO, meaning.WordOverlap()) == []
    told = sc.load(scenario(root, "Fix the failing test; use pytest with --rootdir packages/api from that folder."))
    rule = "When a test fails, run `pytest --rootdir packages/api` from packages/api/tests."
    assert [leak.how for leak in leakage.find(told, rule, meaning.WordOverlap())] == ["terms"]


def measures() -> list:
    found = [meaning.WordOverlap()]
    real = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replaybook"
    try:
        from bot.model.embeddings import install

        found.append(meaning.Embeddings(install.locate(root=real)))
    except Exception:  # noqa: BLE001 - the embedding model is optional; word overlap is always measured
        pass
    return found


MEASURES = measures()


@pytest.mark.parametrize("measure", MEASURES, ids=lambda m: m.method)
def test_no_bundled_scenario_is_flagged(measure):
    for folder in sorted((REPO / "scenarios").iterdir()):
        if (folder / "rule.yaml").is_file():
            rule = rules_mod.load(folder / "rule.yaml", named_by_id=False).rule
            assert leakage.find(sc.load(folder), rule, measure) == [], folder.name


def test_the_fixture_is_read_without_following_links(tmp_path):
    fixture, outside = tmp_path / "repo", tmp_path / "secret.md"
    write(outside, "run `npm run lint`\n")
    write(fixture / "docs" / "x.md", "inside\n")
    os.symlink(outside, fixture / "README.md")
    os.symlink(tmp_path, fixture / "up")
    assert leakage.read_fixture_file(fixture, "README.md") is None
    assert leakage.read_fixture_file(fixture, "up/secret.md") is None
    assert leakage.read_fixture_file(fixture, "../secret.md") is None
    assert leakage.read_fixture_file(fixture, "docs/x.md") == "inside\n"
    write(fixture / "big.md", "x" * (leakage.MAX_READ * 2))
    assert len(leakage.read_fixture_file(fixture, "big.md")) == leakage.MAX_READ
