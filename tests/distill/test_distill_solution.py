"""Distill proves each scenario it generates before proposing it: the do-nothing control must fail and the
reference solution pass every check, both replayed in the sandbox. Unsound, the model is asked once more with the
reason; unsound again, the proposal is refused, never written. Scripted answers over HTTP (simulated), real
sandboxed replays."""

from __future__ import annotations

import json

from support.distill import A1, A2, monorepo_incidents, new_scenario, reasons, rule_answer, run_with

# Its own `fails` check contradicts its `succeeds` check: no solution can pass both.
CONTRADICTORY = new_scenario(id="contradictory-gen", pass_if=[
    {"succeeds": {"run": "python -m pytest -q", "cwd": "packages/api"}},
    {"fails": {"run": "python -m pytest -q", "cwd": "packages/api"}}])
# Its fixture holds no test: pytest finds none, before or after the solution.
BROKEN = {**new_scenario(id="broken-gen"), "files": {"packages/api/pytest.ini": "[pytest]\n"},
          "solution": ["cd packages/api && python -m pytest -q"]}


def proposals(root) -> list:
    return sorted(p.name for p in (root / "playbook" / "proposed").glob("*.yaml"))


def test_a_sound_generated_scenario_is_proposed_with_its_solution(root):
    monorepo_incidents(root)
    report, book = run_with(root, ("Distill rules", json.dumps({"proposals": [json.loads(rule_answer())]})))
    assert [p.scenario for p in report.proposals] == ["monorepo-cwd-gen"], reasons(report)
    assert report.asked == 1 and not any("RETRY" in json.dumps(r) for r in book.requests)
    written = (root / "scenarios" / "monorepo-cwd-gen" / "scenario.yaml").read_text()
    assert "solution:" in written and "sed -i" in written


def test_an_unsound_scenario_is_retried_once_and_the_sound_retry_proposed(root):
    monorepo_incidents(root)
    unsound = json.dumps({"proposals": [json.loads(rule_answer(scenario={"new": CONTRADICTORY}))]})
    fixed = json.dumps({"proposals": [json.loads(rule_answer())]})
    report, book = run_with(root, ("RETRY.", fixed), ("Distill rules", unsound))
    assert [p.scenario for p in report.proposals] == ["monorepo-cwd-gen"], reasons(report)
    assert report.asked == 2 and len(book.requests) == 2
    retry = json.dumps(book.requests[1])
    assert "could not be passed by its own" in retry and "fails python -m pytest -q" in retry  # the reason, named
    assert not (root / "scenarios" / "contradictory-gen").exists()


def test_unsound_twice_is_refused_never_proposed(root):
    monorepo_incidents(root)
    broken = json.dumps({"proposals": [json.loads(rule_answer(scenario={"new": BROKEN}))]})
    contradictory = json.dumps({"proposals": [json.loads(rule_answer(scenario={"new": CONTRADICTORY}))]})
    report, book = run_with(root, ("RETRY.", contradictory), ("Distill rules", broken))
    assert report.proposals == [] and proposals(root) == [] and len(book.requests) == 2
    refused = reasons(report)
    assert "scenario 'contradictory-gen' cannot prove its rule, after one retry" in refused
    assert "check `fails python -m pytest -q" in refused
    assert not (root / "scenarios" / "broken-gen").exists() and not (root / "scenarios" / "contradictory-gen").exists()
    assert {A1, A2} <= {i for r in report.refusals for i in r.incidents}


def test_a_new_scenario_without_a_solution_is_refused(root):
    monorepo_incidents(root)
    bare = {k: v for k, v in new_scenario().items() if k != "solution"}
    report, _ = run_with(root, ("Distill rules", json.dumps({"proposals": [json.loads(rule_answer(
        scenario={"new": bare}))]})))
    assert report.proposals == [] and "no `solution`" in reasons(report)
