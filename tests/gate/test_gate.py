"""The admit gate: every reject reason, admission at the cap, the cache, two gates at once.

Scenarios here are tiny (a marker file and a `test -f` check) so a replay
costs tens of milliseconds; the simulated model decides what the agent does.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import yaml
from helpers import snapshot, write
from support.gate import book, candidate, gate, mini_scenario, setup


def test_a_rule_that_fixes_its_scenario_is_admitted(root):
    result = gate(root, setup(root))
    assert result.decision == "admit", result.reason
    assert (result.before.passes, result.before.n) == (0, 3)
    assert (result.after.passes, result.after.n) == (4, 4)  # stops as soon as 4 of 5 is reached
    assert result.model_calls > 0 and result.cost_usd > 0 and result.simulated


def test_cheap_checks_reject_before_any_replay(root):
    setup(root)
    cases = {
        "rule-0002": (dict(text="Be careful with monorepos."), "states no condition"),
        "rule-0003": (dict(text="When a test fails, look. Then fix it. Then report it."), "3 sentences"),
        "rule-0004": (dict(cites=("inc-a", "inc-zzz")), "'inc-zzz' does not exist"),
        "rule-0005": (dict(sid="nowhere"), "no such scenario"),
    }
    for rule_id, (kw, expected) in cases.items():
        result = gate(root, candidate(root, rule_id, **kw))
        assert result.decision == "reject" and expected in result.reason, (rule_id, result.reason)
        assert result.replays == 0


def test_a_near_duplicate_of_an_admitted_rule_is_rejected_naming_its_twin(root):
    path = setup(root)
    assert book(root).admit(path, on=__import__("datetime").date(2026, 11, 30))
    twin = candidate(root, "rule-0002", text="When a task says make it right, always write right.txt, never wrong.txt.")
    result = gate(root, twin)
    assert result.decision == "reject" and "near-duplicate of admitted rule-0001" in result.reason


def test_a_rule_whose_scenario_is_broken_is_rejected(root):
    setup(root)
    mini_scenario(root, "own", broken=True)
    result = gate(root, root / "playbook" / "proposed" / "rule-0001.yaml")
    assert result.decision == "reject" and "not valid YAML" in result.reason


def test_not_discriminative_says_which_side_broke(root):
    path = setup(root)
    mini_scenario(root, "own", branch_on="a phrase no rule has")  # the agent never takes the rule's branch
    result = gate(root, path)
    assert result.decision == "reject"
    assert "still failed with the rule (0/" in result.reason and "succeeds test -f right.txt" in result.reason
    mini_scenario(root, "own", inverse=True, branch_on="a phrase no rule has")  # passes without the rule
    result = gate(root, path)
    assert result.decision == "reject" and "passed without the rule (1/1)" in result.reason


def test_a_regression_in_the_suite_is_named(root):
    path = setup(root)
    mini_scenario(root, "victim", inverse=True)  # the candidate's text makes the agent fail here
    mini_scenario(root, "bystander", branch_on="unrelated phrase", inverse=True)  # passes either way
    result = gate(root, path)
    assert result.decision == "reject" and result.reason == "regressed victim"
    by_name = {e.scenario: e for e in result.suite}
    assert by_name["victim"].regressed and (by_name["victim"].baseline.passes, by_name["victim"].candidate.passes) == (3, 0)
    assert by_name["bystander"].judged and not by_name["bystander"].regressed


def test_a_suite_with_an_unscorable_scenario(root):
    path = setup(root)
    mini_scenario(root, "stuck", hang=True)  # always times out: never scored
    result = gate(root, path, max_unscored=1)
    stuck = {e.scenario: e for e in result.suite}["stuck"]
    assert not stuck.judged and "could not be scored" in stuck.note
    # Unjudged, it could hide a regression (a fixture made to hang is as good as a broken one): no admission.
    assert result.decision == "error" and "suite incomplete" in result.reason and "stuck" in result.reason


def test_unscored_own_trials_are_retried_then_the_gate_errors(root):
    path = setup(root)
    mini_scenario(root, "own", hang=True)
    result = gate(root, path, max_unscored=1)
    assert result.decision == "error" and "could not be scored" in result.reason
    assert result.before.n == 0 and result.before.unscored == 2


def test_rerunning_an_unchanged_gate_makes_no_model_call(root):
    path = setup(root)
    first = gate(root, path)
    second = gate(root, path)
    assert first.model_calls > 0
    assert second.model_calls == 0 and second.replays == 0 and second.cache_hits == first.replays
    assert second.decision == first.decision


def test_the_cache_is_invalidated_by_any_input(root):
    path = setup(root)
    gate(root, path)
    changes = [
        lambda: (root / "scenarios" / "own" / "repo" / "README.md").write_text("fixture v2\n"),
        lambda: (root / "scenarios" / "own" / "policy.yaml").write_text(
            (root / "scenarios" / "own" / "policy.yaml").read_text() + "\n# changed\n"),
        lambda: path.write_text(path.read_text().replace("never wrong.txt", "never wrong.txt at all")),
    ]
    for change in changes:
        change()
        assert gate(root, path).replays > 0
        assert gate(root, path).replays == 0
    assert gate(root, path, seed=7).replays > 0  # the simulated model's seed and noise are inputs too
    assert gate(root, path, noise=0.01, seed=7).replays > 0


def test_before_runs_are_shared_across_candidates(root):
    path = setup(root)
    gate(root, path)
    other = candidate(root, "rule-0002", text="When asked to make it right, write right.txt every time.")
    result = gate(root, other)
    assert result.before.n == 3 and all(t.run_dir is None for t in result.before.trials)
    assert result.replays == result.after.n  # only the after-runs are new


def test_admit_at_the_cap_retires_the_coldest_in_one_change(cli, root):
    path = setup(root)
    mini_scenario(root, "old")
    write(root / "playbook" / "rules" / "rule-0009.yaml",
          yaml.safe_dump({"id": "rule-0009", "rule": "When the sky is grey, carry an umbrella.", "cites": ["inc-a", "inc-b"],
                          "replay": "scenarios/old", "created": "2026-01-01", "last_hit": "2026-02-01"}))
    write(root / ".replaybook.yml", "cap: 1\n")
    cli("playbook", "render")
    result = cli("gate", str(path), "--admit", "--json", "--trials", "3")
    data = json.loads(result.out)
    assert result.code == 0 and data["decision"] == "admit"
    assert data["admitted"] == {"retired": ["rule-0009"], "resolved": ["inc-a", "inc-b"], "retired_itself": False}
    assert sorted(p.name for p in (root / "playbook" / "rules").glob("*.yaml")) == ["rule-0001.yaml"]
    assert (root / "playbook" / "archive" / "rule-0009.yaml").exists()
    assert cli("playbook", "check").code == 0


def test_a_rejected_gate_changes_nothing_and_exits_1(cli, root):
    setup(root)
    mini_scenario(root, "own", branch_on="a phrase no rule has")
    cli("playbook", "render")
    before = snapshot(root / "playbook") | snapshot(root / "incidents")
    result = cli("gate", str(root / "playbook" / "proposed" / "rule-0001.yaml"), "--admit",
                 "--report", str(root / "out" / "report.md"))
    assert result.code == 1 and "❌ Replaybook gate: reject `rule-0001`" in result.out
    assert (root / "out" / "report.md").read_text() == result.out
    assert snapshot(root / "playbook") | snapshot(root / "incidents") == before


def test_two_gates_at_once_admit_both_without_clobbering(root):
    setup(root)
    mini_scenario(root, "other", branch_on="write right.txt")
    second = candidate(root, "rule-0002", text="Whenever asked for it right, write right.txt promptly.", sid="other")
    first = root / "playbook" / "proposed" / "rule-0001.yaml"
    results = {}

    def run(path):
        result = gate(root, path)
        if result.decision == "admit":
            book(root).admit(path, on=__import__("datetime").date(2026, 11, 30))
        results[path.stem] = result

    threads = [threading.Thread(target=run, args=(p,)) for p in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {k: r.decision for k, r in results.items()} == {"rule-0001": "admit", "rule-0002": "admit"}
    assert [r.id for r in book(root).admitted()] == ["rule-0001", "rule-0002"]
    assert book(root).check() == []


def test_the_gate_stops_at_its_budget(root):
    path = setup(root)
    result = gate(root, path, max_cost_usd=0.000001, cache_dir=None)
    assert result.decision == "inconclusive" and "budget" in result.reason  # not a reject: it decided nothing
    assert result.replays == 2  # the do-nothing control (free: no model call), then one replay


def test_a_screen_that_shows_no_effect_rejects_early(root):
    path = setup(root)
    mini_scenario(root, "own", branch_on="a phrase no rule has")
    result = gate(root, path, screen_model="scripted")
    assert result.decision == "reject" and result.reason.startswith("screen:")
    assert result.before is None and result.replays == 3  # the do-nothing control, then one screen run each way


def test_a_rule_whose_scenario_passes_with_no_agent_is_rejected(root):
    path = setup(root)
    folder = root / "scenarios" / "own"
    data = yaml.safe_load((folder / "scenario.yaml").read_text())
    data["pass_if"] = [{"succeeds": {"run": "test -f README.md"}}, {"not_ran": {"command": "rm"}}]
    write(folder / "scenario.yaml", yaml.safe_dump(data))
    result = gate(root, path)
    assert result.decision == "reject"
    assert result.reason.startswith("unsound scenario `own`: ") and "when the agent does nothing" in result.reason
    assert result.before is None  # no replay of the agent was spent on it


def broken_suite(root: Path) -> None:
    """Three suite scenarios broken three ways, beside a healthy one."""
    mini_scenario(root, "bad-yaml", broken=True)
    write(mini_scenario(root, "bad-policy") / "policy.yaml", "branch_on: x\nwith_rule: [{bash: true, reapeat: 2}]\n")
    write(root / "outside.txt", "secret")
    (mini_scenario(root, "escaping-link") / "repo" / "leak").symlink_to(root / "outside.txt")
    mini_scenario(root, "healthy", branch_on="unrelated phrase", inverse=True)


def test_broken_suite_scenarios_are_named_and_the_gate_does_not_admit_past_them(root):
    path = setup(root)
    broken_suite(root)
    result = gate(root, path)
    assert result.decision == "error", result.reason  # an unjudged scenario could hide the regression
    assert result.reason.startswith("could not decide: suite incomplete")
    assert [e.scenario for e in result.broken] == ["bad-policy", "bad-yaml", "escaping-link"]
    assert "suite incomplete: 3 scenario(s) could not be loaded or replayed: bad-policy, bad-yaml, escaping-link" \
        in result.reason
    notes = {e.scenario: e.note for e in result.suite}
    assert "reapeat" in notes["bad-policy"] and "not valid YAML" in notes["bad-yaml"]
    assert "symlink leak" in notes["escaping-link"]
    assert {e.scenario: e.judged for e in result.suite}["healthy"]


def test_a_broken_suite_scenario_does_not_hide_a_regression(root):
    path = setup(root)
    broken_suite(root)
    mini_scenario(root, "victim", inverse=True)
    result = gate(root, path)
    assert result.decision == "reject" and result.reason.startswith("regressed victim (suite incomplete: 3 ")


def test_the_report_and_json_name_the_broken_suite_scenarios(cli, root):
    path = setup(root)
    broken_suite(root)
    result = cli("gate", str(path), "--trials", "3")
    assert result.code == 1, result.err  # could not decide: the job fails
    assert "**Suite incomplete:** 3 scenario(s) could not be loaded or replayed" in result.out
    assert "| `bad-yaml` | – | – | **broken**: does not load" in result.out
    data = json.loads(cli("gate", str(path), "--json", "--trials", "3").out)
    assert data["suite_incomplete"] == ["bad-policy", "bad-yaml", "escaping-link"]


def test_the_paired_test_admits_a_rule_that_fixes_its_scenario_and_refuses_one_that_changes_nothing(root):
    from bot.gate import stats

    path = setup(root)
    result = gate(root, path, test=stats.PairedTest())
    assert result.decision == "admit", result.reason
    # a deterministic agent wins every pair: admitted as soon as the wins clear the boundary
    wins = next(w for w in range(1, 30) if stats.PairedTest().decide(w, 0, w) == "pass")
    assert (result.before.passes, result.before.n, result.after.passes, result.after.n) == (0, wins, wins, wins)
    mini_scenario(root, "own", branch_on="a phrase no rule has")  # the rule changes nothing: every pair ties
    result = gate(root, path, test=stats.PairedTest())
    assert result.decision == "reject" and "did not change the pass rate" in result.reason
    # curtailed (issue 54 item 5): refused at the first pair after which ten straight wins could not admit, not at 30
    out_of_reach = next(p for p in range(1, 31) if stats.PairedTest().decide(0, 0, p) == "fail")
    assert result.before.n == result.after.n == out_of_reach == 21 < stats.PairedTest().max_pairs


def test_gate_own_test_auto_the_default_pairs_any_agent_whose_runs_differ(cli, root):
    """``auto``: the sequential test only where every run is the same run (the simulated model with no chance in
    the scenario's policy); a chance of the mistake, ``--noise``, or a real model gets the paired test."""
    from bot.gate import stats

    path = setup(root)
    plain = json.loads(cli("gate", str(path), "--json", "--trials", "3").out)
    assert plain["decision"] == "admit", plain["reason"]
    assert (plain["before"]["scored"], plain["after"]["scored"]) == (3, 4)
    assert plain["own_test"] == stats.SequentialTest().describe()
    policy = root / "scenarios" / "own" / "policy.yaml"
    deterministic = policy.read_text()
    write(policy, deterministic + "mistake: 0.6\n")  # SIMULATED: the mistake on 60% of runs without the rule
    noisy = cli("gate", str(path), "--json", "--trials", "3")
    data = json.loads(noisy.out)
    assert data["own_test"] == stats.PairedTest().describe(), data["own_test"]
    assert data["before"]["scored"] == data["after"]["scored"] > 3 and data["decision"] == "admit", data["reason"]
    assert 0 < data["before"]["passed"] < data["before"]["scored"]  # the noisy agent passed some runs without it
    assert "in pairs" in cli("gate", str(path), "--trials", "3").out
    write(policy, deterministic)
    flipped = json.loads(cli("gate", str(path), "--json", "--trials", "3", "--noise", "0.1").out)
    assert flipped["own_test"] == stats.PairedTest().describe()
    write(root / ".replaybook.yml", "gate:\n  own_test: sequential\n")  # asked for: the sequential test, noise or not
    asked = json.loads(cli("gate", str(path), "--json", "--trials", "3", "--noise", "0.1").out)
    assert asked["own_test"] == stats.SequentialTest().describe()


def test_gate_own_test_paired_in_the_config_gates_in_pairs_and_a_bad_value_is_a_clear_error(cli, root):
    from bot.gate import stats

    path = setup(root)
    write(root / ".replaybook.yml", "gate:\n  own_test: paired\n")
    result = cli("gate", str(path), "--json", "--trials", "3")
    data = json.loads(result.out)
    wins = next(w for w in range(1, 30) if stats.PairedTest().decide(w, 0, w) == "pass")
    assert result.code == 0 and data["decision"] == "admit", result.err
    assert (data["before"]["scored"], data["after"]["scored"]) == (wins, wins)  # pairs, not 3 before and 5 after
    assert "in pairs" in cli("gate", str(path), "--trials", "3").out
    write(root / ".replaybook.yml", "gate:\n  own_test: twice\n")
    before = snapshot(root)
    bad = cli("gate", str(path), "--trials", "3")
    assert bad.code == 2 and "own_test" in bad.err and ".replaybook.yml" in bad.err
    assert snapshot(root) == before
