"""Redundancy re-tests on crafted playbooks: replay each rule's scenario without it, via the sequential test."""

from __future__ import annotations

import json

import yaml
from helpers import write
from support.gate import mini_scenario
from support.gate import redundancy_playbook as playbook


def test_a_rule_the_agent_no_longer_needs_is_redundant_with_its_evidence(cli, root):
    playbook(root)
    result = cli("playbook", "retest", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    verdicts = {r["rule_id"]: (r["verdict"], r["evidence"]) for r in data["results"]}
    assert verdicts["rule-0001"][0] == "needed"
    assert verdicts["rule-0002"] == ("redundant", "passes 4/4 without it on scripted")
    assert data["simulated"] and data["cost_usd"] > 0 and data["retired"] == []
    again = json.loads(cli("playbook", "retest", "--json").out)  # from the cache: nothing replayed, nothing spent
    assert again["cost_usd"] == 0 and again["results"] == data["results"]
    retired = json.loads(cli("playbook", "retest", "--retire", "--json").out)
    assert retired["retired"] == ["rule-0002"]
    archived = (root / "playbook" / "archive" / "rule-0002.yaml").read_text()
    assert yaml.safe_load(archived)["retired_reason"] == "redundant: passes 4/4 without it on scripted"


def test_the_budget_stops_the_retest_and_the_rest_is_unknown(cli, root):
    playbook(root)
    data = json.loads(cli("playbook", "retest", "--no-cache", "--max-cost-usd", "0", "--json").out)
    assert [r["verdict"] for r in data["results"]] == ["unknown", "unknown"]


def test_an_unknown_rule_is_bad_input(cli, root):
    playbook(root)
    result = cli("playbook", "retest", "rule-0042")
    assert result.code == 2 and "rule-0042: not admitted" in result.err


def test_compliance_replays_tell_ignores_it_from_no_longer_reproduces(cli, root):
    playbook(root)
    mini_scenario(root, "deaf", branch_on="a phrase no rule has")  # fails with or without its rule
    write(root / "playbook" / "rules" / "rule-0003.yaml", yaml.safe_dump({
        "id": "rule-0003", "rule": "When a task says make it right, do not write wrong.txt.",
        "cites": ["inc-a", "inc-b"], "replay": "scenarios/deaf", "created": "2026-08-01"}))
    data = json.loads(cli("playbook", "retest", "--compliance", "--json").out)
    got = {r["rule_id"]: (r["verdict"], r["compliance"]) for r in data["results"]}
    assert got == {"rule-0001": ("needed", "obeys it"), "rule-0002": ("redundant", "no longer reproduces"),
                   "rule-0003": ("needed", "ignores it")}
