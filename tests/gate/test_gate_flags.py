"""The gate's cheap flags (issue 49): leakage and conflicts are named in the report and its JSON, never decided on."""

from __future__ import annotations

import datetime

import yaml
from helpers import write
from support.gate import book, candidate, gate, setup

from bot.gate import report
from bot.gate import stats


def test_a_leaky_scenario_and_a_conflicting_rule_are_flagged_by_name(root):
    path = setup(root)
    scenario = root / "scenarios" / "own" / "scenario.yaml"
    data = yaml.safe_load(scenario.read_text())
    data["task"] = "make it right: write right.txt, never wrong.txt"
    write(scenario, yaml.safe_dump(data, sort_keys=False))
    assert book(root).admit(path, on=datetime.date(2026, 11, 30))
    opposite = candidate(root, "rule-0002",
                         text="When a task says make it right, never write right.txt; write wrong.txt.")
    result = gate(root, opposite)
    assert set(result.flags) == {"leakage", "conflicts"}, result.flags
    assert "the task already says what the rule says (terms: right.txt, wrong.txt)" in result.flags["leakage"][0]
    assert result.flags["conflicts"][0].startswith("conflicts with admitted rule-0001: one says to do what the other")
    assert "by word overlap" in result.flags["conflicts"][0]  # the tests run without the embedding model
    assert report.as_json(result)["flags"] == result.flags
    text = report.markdown(result, stats.SequentialTest())
    assert "🚩 **leakage**" in text and "🚩 **conflicts**" in text


def test_a_clean_candidate_carries_no_flag(root):
    result = gate(root, setup(root))
    assert result.decision == "admit" and result.flags == {} and report.as_json(result)["flags"] == {}
