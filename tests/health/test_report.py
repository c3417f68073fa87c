"""``replaybook report``: the gate ledger sums what real gates measured; crafted histories give the rest."""

from __future__ import annotations

import json
from datetime import date

import yaml
from helpers import incident_yaml, write
from support.gate import candidate, mini_scenario, setup


def test_cost_per_admission_sums_every_gate_the_gateway_measured_rejected_ones_included(cli, root):
    admit_path = setup(root)
    mini_scenario(root, "inert", branch_on="a phrase no rule has")  # the rule changes nothing: still fails, rejected
    reject_path = candidate(root, "rule-0002", "When a file says inert, leave it alone and write nothing.",
                            sid="inert")
    cli("playbook", "render")
    admitted = json.loads(cli("gate", str(admit_path), "--admit", "--json", "--trials", "3").out)
    rejected = json.loads(cli("gate", str(reject_path), "--json", "--trials", "3").out)
    assert (admitted["decision"], rejected["decision"]) == ("admit", "reject")
    assert admitted["cost_usd"] > 0 and rejected["cost_usd"] > 0
    result = cli("report", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    gates = data["gates"]
    total = admitted["cost_usd"] + rejected["cost_usd"]
    assert (gates["gates"], gates["admitted"], gates["rejected"]) == (2, 1, {"no_effect": 1})
    assert abs(gates["cost_usd"] - total) < 1e-4 and abs(gates["cost_per_admission_usd"] - total) < 1e-4
    assert gates["simulated"] is True
    assert data["admitted"] == 1 and data["proposed"] == 1
    text = cli("report").out
    assert "Cost per admission: **$" in text and "includes simulated estimates" in text
    assert "no effect 1" in text


def _history(root):
    write(root / "scenarios" / "x" / "repo" / "README.md", "fixture\n")
    write(root / "scenarios" / "x" / "scenario.yaml", yaml.safe_dump({
        "id": "x", "task": "t", "repo": "repo", "pass_if": [{"succeeds": {"run": "true"}}]}))
    write(root / "incidents" / "a1.yaml", incident_yaml("a1", created="2026-07-06T09:00:00Z", cost_minutes="60"))
    write(root / "incidents" / "a2.yaml", incident_yaml("a2", created="2026-07-07T09:00:00Z", cost_minutes="60",
                                                        repeat_of="[a1]"))
    for n, day in enumerate(("2026-07-14", "2026-07-15")):
        write(root / "incidents" / f"r{n}.yaml", incident_yaml(f"r{n}", created=f"{day}T09:00:00Z",
                                                               repeat_of="rule-0001"))
    write(root / "incidents" / "t1.yaml", incident_yaml(
        "t1", created="2026-07-16T09:00:00Z", triage="true",
        trigger='"CI failed <!-- replaybook:dashboard --> cc @admin, closes #1"'))
    write(root / "playbook" / "rules" / "rule-0001.yaml", yaml.safe_dump({
        "id": "rule-0001", "rule": "When tests run, run them from the package folder.", "cites": ["a1", "a2"],
        "replay": "scenarios/x", "created": "2026-07-10", "last_hit": "2026-07-20", "hits": 2}))
    (root / ".replaybook").mkdir()
    (root / ".replaybook" / "gates.jsonl").write_text("{not json\n")


def test_a_crafted_history_reports_repeats_per_week_an_ignored_rule_and_the_triage_queue(cli, root):
    _history(root)
    data = json.loads(cli("report", "--json", "--date", "2026-07-20").out)
    assert [(w["week"], w["incidents"], w["repeats"]) for w in data["weeks"]] == [("2026-W28", 2, 1),
                                                                                  ("2026-W29", 3, 2)]
    assert (data["incidents"], data["repeats"], data["repeat_share"]) == (5, 3, 0.6)
    [rule] = data["rules"]
    assert (rule["repeats"], rule["compliance"], rule["hits"]) == (["r0", "r1"], "ignored", 2)
    assert (rule["cited_minutes"], rule["prevented_minutes"], rule["score"]) == (120, 120, 241)
    assert [t["id"] for t in data["triage"]] == ["t1"]
    assert data["gates"]["unreadable"] == 1 and data["open_prs"] is None
    text = cli("report", "--date", "2026-07-20").out
    assert '    x-axis ["2026-W28", "2026-W29"]' in text and "    bar [50, 67]" in text
    assert "ignored: r0, r1" in text
    # the incident's hostile trigger is data: no marker, no mention, no reference survives
    assert "<!-- replaybook:dashboard" not in text and "@admin" not in text and "#1" not in text


def test_ignored_after_comes_from_the_config(cli, root):
    _history(root)
    write(root / ".replaybook.yml", "health:\n  ignored_after: 3\n")
    data = json.loads(cli("report", "--json", "--date", "2026-07-20").out)
    assert data["rules"][0]["compliance"] == "repeated"
    assert date.fromisoformat(data["generated"]) == date(2026, 7, 20)
