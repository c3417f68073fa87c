"""The noisy preset of the loop benchmark (SIMULATED agent): its draws, its gates' admit rates, its JSON, and
issue 46's honest benchmark (reporting seeds apart from tuning seeds, the fair comparator, the oracle, the
summary's fields, the paired tests over seeds).

Nothing here pins an outcome of the benchmark; the admit-rate tests check the
simulation against the rates the noise model and ``bot.gate.stats`` imply,
within their sampling error.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import loop  # noqa: E402
from loopbench import noisy, simgate, targets  # noqa: E402
from loopbench.catalogue import Mode  # noqa: E402
from loopbench.noise import Noise, NoiseConfig, Proposal  # noqa: E402
from loopbench.run import LoopConfig, Week  # noqa: E402
from loopbench.stream import StreamConfig, make_stream  # noqa: E402

from bot.gate import stats, suite_check  # noqa: E402

STREAM = StreamConfig(weeks=4)


class Recording(Noise):
    """A Noise that records every draw a policy asks for, by key."""

    def __init__(self, *args):
        super().__init__(*args)
        self.tasks: dict = {}
        self.proposals: dict = {}

    def run(self, mode, rules, q, *key, guard=""):
        ok = super().run(mode, rules, q, *key, guard=guard)
        if key[0] == "task":
            self.tasks[key] = (mode, ok, tuple(r.id for r in rules), guard)
        return ok

    def proposal(self, mode, k, not_redundant=False):
        p = super().proposal(mode, k, not_redundant)
        self.proposals[(mode, k)] = p
        return p


def _runs(seed: int) -> dict[str, Recording]:
    stream = make_stream(STREAM, seed)
    out = {}
    for name, gate in [("none", None), ("unvalidated", None), *noisy.gates(13).items()]:
        noise = Recording(NoiseConfig(), seed, stream.modes, noisy.suite_modes(stream))
        noisy.NoisyRun(name, stream, noise, LoopConfig(seed=seed), gate, 3, True).run()  # learning on
        out[name] = noise
    return out


def test_the_draws_are_deterministic_per_seed_and_differ_between_seeds():
    stream = make_stream(STREAM, 3)
    a, b, c = (Noise(NoiseConfig(), s, stream.modes, noisy.suite_modes(stream)) for s in (3, 3, 4))
    modes = sorted(stream.modes)
    assert [a.mistake(m) for m in modes] == [b.mistake(m) for m in modes]
    assert [a.proposal(m, k) for m in modes for k in range(3)] == [b.proposal(m, k) for m in modes for k in range(3)]
    assert [a.mistake(m) for m in modes] != [c.mistake(m) for m in modes]
    # order does not matter: a draw is a function of (seed, key), not of what was drawn before
    assert [a.proposal(m, 0) for m in reversed(modes)] == [b.proposal(m, 0) for m in modes][::-1]


def test_every_policy_sees_the_same_streams():
    runs = _runs(5)
    base = runs["none"]
    assert len(base.tasks) == STREAM.weeks * STREAM.tasks_per_week
    for name, noise in runs.items():
        # the same task with the same playbook has the same outcome in every policy
        same = [k for k in base.tasks if noise.tasks[k][2:] == ((), "")]
        assert same and all(noise.tasks[k][:2] == base.tasks[k][:2] for k in same), name
        # the k-th proposal for a mode is the same proposal whichever policy asked for it
        for key, proposal in noise.proposals.items():
            assert proposal == runs["unvalidated"].proposals.get(key, proposal), (name, key)
    assert runs["unvalidated"].proposals  # the loop did propose


def _admit_rate(gate, p: float, n: int) -> float:
    """The share of n no-effect proposals the gate admits, on a scenario with mistake rate p and no suite."""
    mode = Mode("m", "recurring", "a task", "a rule", "a rule")
    noise = Noise(NoiseConfig(), 11, {"m": mode}, ["m"])
    noise.mistake = lambda _mode: p  # a stated rate instead of a Beta draw
    run = noisy.NoisyRun("x", None, noise, LoopConfig(q0=1.0, q_slope=0.0), gate)
    run.cache = False  # independent proposals: no trial kept from the last one (the product's cache would)
    week = Week(1)
    return sum(run._gate(week, Proposal("m", k, "redundant", 0.0)) == "" for k in range(n)) / n


def _within(rate: float, expected: float, n: int) -> bool:
    return abs(rate - expected) <= 4 * math.sqrt(max(expected * (1 - expected), 1e-4) / n) + 1e-9


@pytest.mark.parametrize("p", [0.3, 0.6])
def test_single_run_admits_a_no_effect_rule_at_the_rate_the_noise_implies(p):
    n = 2000
    passes = (1 - p) * (1 - NoiseConfig().flaky)
    implied = (1 - passes) * passes  # fails once without the rule, passes once with it
    assert _within(_admit_rate(noisy.gates(13)["single_run"], p, n), implied, n)


@pytest.mark.parametrize("p", [0.3, 0.6])
def test_the_statistical_gates_admit_a_no_effect_rule_at_the_rate_stats_computes(p):
    n = 600
    passes = (1 - p) * (1 - NoiseConfig().flaky)
    paired = stats.paired_characteristics(stats.PairedTest(), passes, passes).p_admit
    sequential = stats.operating_characteristics(stats.SequentialTest(), passes, passes).p_admit
    assert _within(_admit_rate(noisy.gates(13)["replaybook"], p, n), paired, n)
    assert _within(_admit_rate(noisy.gates(13)["replaybook_v1"], p, n), sequential, n)


def test_the_paired_test_keeps_the_gates_targets():
    test = stats.PairedTest()
    assert stats.paired_characteristics(test, 0.5, 0.5).p_admit <= 0.025
    assert stats.paired_characteristics(test, 0.4, 0.4).p_admit <= 0.025
    assert stats.paired_characteristics(test, 0.0, 0.9).p_admit >= 0.9
    # A good rule under noise: 0.62 (0.76 before the minimal-effect null), where 0-of-3-before admits 0.2.
    assert stats.paired_characteristics(test, 0.4, 0.85).p_admit >= 0.6
    assert stats.operating_characteristics(stats.SequentialTest(), 0.4, 0.85).p_admit < 0.25


def test_the_paired_test_refuses_a_rule_too_weak_to_be_useful_as_one_with_no_effect():
    """A useless rule (it cuts a 0.6 mistake rate by less than a tenth: 0.4 -> 0.46) is admitted at most 0.5%
    of the time, under a third of what a null of "no effect" (theta0 0.5) gives it (1.65%)."""
    from dataclasses import replace

    test, plain = stats.PairedTest(), replace(stats.PairedTest(), theta0=0.5)
    weak, weak_plain = (stats.paired_characteristics(t, 0.4, 0.46).p_admit for t in (test, plain))
    assert weak <= 0.005 and weak < weak_plain / 3
    with pytest.raises(ValueError):
        replace(test, theta0=0.95)  # a null above H1 is no test


def test_the_preset_json_has_the_documented_shape():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert loop.main(["--preset", "noisy", "--quick", "--seeds", "2", "--json"]) == 0
    data = json.loads(out.getvalue())
    assert data["simulated"] is True and "SIMULATED" in data["model"]
    assert data["parameters"]["seeds"] == [1000, 1001] and "noise" in data["parameters"]
    assert set(data["policies"]) == set(noisy.NOISY_POLICIES)
    for name, policy in data["policies"].items():
        weeks, per_seed = policy["weeks"], policy["seeds"]
        assert [w["week"] for w in weeks] == [1, 2, 3, 4] and set(per_seed) == {"1000", "1001"}
        for i, week in enumerate(weeks):
            for key in ("failures", "repeats", "replays", "admitted", "good_rejected", "useless_admitted",
                        "harmful_admitted", "playbook_size"):
                assert week[key] == sum(s[i][key] for s in per_seed.values()), (name, key)
            share = week["repeats"] / week["failures"] if week["failures"] else 0.0
            assert week["repeat_share"] == pytest.approx(share, abs=1e-4)
        for key in ("failures", "repeat_share_last4", "useless_admitted", "good_rejected", "bad_admitted"):
            assert key in policy["figures"] and key in policy["spread"]
        assert set(policy["spread"]["failures"]) == {"mean", "min", "max"}
    assert {t["target"] for t in data["targets"]}


def test_the_product_simulated_agent_takes_per_scenario_mistake_rates_from_its_policy():
    from bot.errors import BadInput
    from bot.replay.gateway.policy import parse_policy

    def request(system: str) -> dict:
        return {"system": system, "messages": [{"role": "user", "content": "do it"}]}

    steps = {"branch_on": "the rule", "with_rule": [{"say": "right"}], "without_rule": [{"say": "wrong"}]}
    plain = parse_policy(steps)
    assert plain.branch_for(request("the rule")) == "with_rule"  # the defaults: the scripted agent as before
    assert plain.branch_for(request("nothing")) == "without_rule"
    noisy_policy = parse_policy({**steps, "mistake": 0.6, "effect": 0.5})
    n = 4000
    without = sum(noisy_policy.seeded(noise=0.0, seed=s).branch_for(request("nothing")) == "without_rule"
                  for s in range(n)) / n
    with_rule = sum(noisy_policy.seeded(noise=0.0, seed=s).branch_for(request("the rule")) == "without_rule"
                    for s in range(n)) / n
    assert _within(without, 0.6, n) and _within(with_rule, 0.3, n)
    with pytest.raises(BadInput) as bad:
        parse_policy({**steps, "mistake": 1.5})
    assert any("`mistake`" in p for p in bad.value.problems)


def test_the_paired_table_in_docs_gate_is_what_stats_computes():
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "gate.md").read_text(encoding="utf-8")
    text = text[text.index("### For a noisy agent"):text.index("## 3. The whole suite")]
    text = text[text.index("| before → after pass rate |"):]
    text = text[:text.index("\n\n")]  # that table only
    rows = re.findall(r"^\| ([\d.]+) → ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert len(rows) == 9
    for b, a, p, runs, sp, sruns in rows:
        paired = stats.paired_characteristics(stats.PairedTest(), float(b), float(a))
        seq = stats.operating_characteristics(stats.SequentialTest(), float(b), float(a))
        assert (f"{paired.p_admit:.4f}", f"{paired.expected_runs:.1f}") == (p, runs), (b, a)
        assert (f"{seq.p_admit:.4f}", f"{seq.expected_runs:.1f}") == (sp, sruns), (b, a)


def test_the_suite_baseline_on_demand_decides_as_the_whole_baseline_for_fewer_replays():
    """The noisy preset's gate in the product's order (the baseline on demand) against the whole 40-trial
    baseline up front, on the same draws: every week's decisions are the same, the replays fewer."""
    from dataclasses import replace

    stream = make_stream(STREAM, 7)

    def run(on_demand: bool):
        gate = noisy.gates(13)["replaybook"]
        table = {"replaybook": replace(gate, suite=replace(gate.suite, on_demand=on_demand))}
        return noisy.run_seed(stream, 7, LoopConfig(), NoiseConfig(), ["replaybook"], table=table)["replaybook"]

    lazy, full = run(True), run(False)
    decided = lambda weeks: [(w.admitted, w.admitted_harmful, dict(w.rejections)) for w in weeks]  # noqa: E731
    assert decided(lazy) == decided(full) and sum(w.admitted for w in lazy) > 0
    assert sum(w.replays for w in lazy) < sum(w.replays for w in full)


# -- issue 46: the honest benchmark ------------------------------------------------------------------------

SUMMARY = ("candidates_gated", "admissions", "harmful_admitted", "useless_admitted", "replays", "failures_last4",
           "repeat_share_last4", "replays_per_gated_candidate", "replays_per_admission")


def _main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = loop.main(["--preset", "noisy", "--quick", "--workers", "1", *argv])
    return code, out.getvalue(), err.getvalue()


def test_a_reporting_run_refuses_tuning_seeds_and_says_which_seeds_it_ran():
    code, out, err = _main("--seed", "7", "--policies", "none")
    assert code == 2 and out == "" and "tuning seeds" in err and "--tuning" in err
    code, out, _ = _main("--seeds", "2", "--policies", "none", "--json")
    par = json.loads(out)["parameters"]
    assert code == 0 and par["seeds"] == [1000, 1001] and not par["tuning"]
    assert par["seed_rule"].startswith("reporting seeds 1000 + i, i = 0..1")
    code, out, _ = _main("--tuning", "--seeds", "2", "--policies", "none", "--json")
    par = json.loads(out)["parameters"]
    assert code == 0 and par["tuning"] and max(par["seeds"]) < 1000 and par["seed_rule"].startswith("TUNING")
    assert _main("--tuning", "--seed", "999", "--seeds", "2", "--policies", "none")[0] == 2  # would cross 1000


def test_the_json_summary_has_every_field_for_every_policy_and_the_oracle_is_one_of_them():
    code, out, _ = _main("--seeds", "1", "--json")
    data = json.loads(out)
    assert code == 0 and set(data["policies"]) == set(noisy.NOISY_POLICIES)
    assert {"none", "single_run", "single_run_fair", "unvalidated", "replaybook", "oracle"} <= set(data["policies"])
    for name, policy in data["policies"].items():
        s = policy["summary"]
        assert all(k in s for k in SUMMARY), name
        assert any(k.startswith("usd_per_admission Sonnet") for k in s) and any("Haiku" in k for k in s)
        assert s["replays"] == sum(w["replays"] for w in policy["weeks"])
    o = data["policies"]["oracle"]["summary"]
    assert o["harmful_admitted"] == o["useless_admitted"] == o["replays"] == 0 and o["admissions"] > 0
    kinds = {row["kind"] for row in data["parameters"]["table"]}
    assert {"cited", "assumed"} <= kinds and all(row["source"] for row in data["parameters"]["table"])
    assert {t["target"] for t in data["targets"]} and data["ranking"]


def _one_mode(p: float) -> tuple[noisy.NoisyRun, Noise]:
    mode = Mode("m", "recurring", "a task", "a rule", "a rule", task_type="t")
    done = Mode("d", "done-right", "another task", "", "", task_type="t")
    noise = Noise(NoiseConfig(), 3, {"m": mode, "d": done}, ["m", "d"])
    noise.mistake = lambda m: p if m == "m" else 0.0
    return noisy.NoisyRun("single_run_fair", None, noise, LoopConfig(), noisy.gates(2)["single_run_fair"]), noise


def test_single_run_fair_is_one_run_without_one_with_then_the_products_suite_check():
    run, _ = _one_mode(1.0)  # the agent always makes the mistake without the rule
    product = simgate.product_options()
    assert suite_check.suite_test(run.gate).describe() == suite_check.suite_test(product).describe()  # the product's
    before, after = run._text([], run.q()), run._text([Proposal("m", 0, "good", 1.0)], run.q(1))
    runner = simgate.SimRunner(run.gate, run._draw_trial, {})
    v = simgate.decide(run.gate, runner, "m", ["m", "d"], before, after, "m#0")
    assert (v.result.before.n, v.result.after.n) == (1, 1)  # one run each way
    assert [e.scenario for e in v.result.suite] == ["d"] and v.result.suite[0].candidate.n >= 5  # judged
    assert v.decision == "admit"
    run, _ = _one_mode(0.0)  # never makes it: the one run without passes, and nothing more is run
    before, after = run._text([], run.q()), run._text([Proposal("m", 0, "good", 1.0)], run.q(1))
    runner = simgate.SimRunner(run.gate, run._draw_trial, {})
    v = simgate.decide(run.gate, runner, "m", ["m", "d"], before, after, "m#0")
    assert v.reason == "passes without the rule" and v.result.after is None and not v.result.suite
    assert runner.replays == 2  # the do-nothing control and the one run


def test_the_seeds_gate_keeps_nothing_from_one_gate_to_the_next_and_the_product_caches_trials():
    """single_run (the seed: no cache) draws every trial afresh for every gate; replaybook keeps them as the
    product's replay cache does, so a second proposal at the same playbook reads its 'before' trials again."""
    for policy in ("single_run", "replaybook"):
        run, _ = _one_mode(0.6)
        run = noisy.NoisyRun(policy, None, run.noise, LoopConfig(), noisy.gates(2)[policy])
        week = Week(1)
        run._gate(week, Proposal("m", 0, "good", 0.9))
        kept = {k: len(v) for k, v in run.store.items()}
        run._gate(week, Proposal("m", 1, "good", 0.9))
        if policy == "single_run":
            assert kept == {} and run.store == {}
        else:
            before = [k for k in kept if k[0] == "m" and k[2] == "baseline"]
            assert before and all(len(run.store[k]) >= kept[k] for k in before)  # the same trials, read again


def test_nothing_is_set_aside_by_the_benchmark_alone():
    run, _ = _one_mode(0.6)
    assert not hasattr(run, "parked")
    for policy in noisy.NOISY_POLICIES:  # escalation needs no gate: every policy with rules may escalate
        r = noisy.NoisyRun(policy, None, run.noise, LoopConfig(), None, 3, True)
        assert r.escalate == (policy != "none")


def test_the_paired_tests_over_seeds():
    assert targets.sign_less([1, 2, 3, 4, 5], [2, 3, 4, 5, 6])["p"] == pytest.approx(1 / 32)
    assert targets.sign_less([1, 1], [1, 1])["p"] == 1.0  # every pair tied: no evidence
    # Wilcoxon: 10 pairs, every difference −1 … −10 (no ties): W+ = 0, z = (0 − 27.5 + 0.5)/sqrt(96.25)
    w = targets.wilcoxon_less(list(range(10)), [2 * i + 1 for i in range(10)])
    assert w["w_plus"] == 0 and w["z"] == pytest.approx(-2.752, abs=1e-3) and w["p"] < 0.005
    assert targets.wilcoxon_less([5, 6], [1, 2])["p"] > 0.5  # the other way round
    assert targets.wilson_upper(0, 100) == pytest.approx(stats.wilson(0, 100)[1], abs=1e-4)


def test_the_no_effect_figure_is_the_products_exact_computation():
    got = targets.no_effect_admit(simgate.product_options())
    assert got["p_admit"] == pytest.approx(stats.paired_characteristics(stats.PairedTest(), 0.5, 0.5).p_admit,
                                           abs=1e-5) or got["p_admit"] >= 0.0014
    assert got["p_admit"] <= 0.025


# `gate.unreached: once` screens what the shipped gate judges in full; issue 54's gate does not judge it at all
@pytest.mark.parametrize("variant", [(), ("--unreached-once", "--gate-policies", "shipped")])
def test_the_replays_by_purpose_sum_to_the_replays_and_the_gates_to_the_gate_runs(variant):
    code, out, _ = _main("--seeds", "1", "--suite", "30", "--tuning", "--seed", "3",
                         "--policies", "single_run,single_run_fair,replaybook", "--json", *variant)
    assert code == 0
    for name, policy in json.loads(out)["policies"].items():
        s = policy["summary"]
        by = s["replays_by_purpose"]
        rows = {p: row for p, row in by.items() if p != "gates"}
        assert set(rows) == set(simgate.PURPOSES), name
        assert sum(row["total"] for row in rows.values()) == s["replays"] > 0, name
        for outcome, gates in by["gates"].items():  # each column sums too, and no gate ran for nothing
            if outcome != "total":
                assert sum(row[outcome] for row in rows.values()) >= gates > 0, (name, outcome)
        assert rows["control"]["total"] > 0 and rows["own_rule"]["total"] > 0, name
        assert (rows["unreached"]["total"] > 0) == (name != "single_run" and bool(variant)), name
    code, md, _ = _main("--seeds", "1", "--suite", "30", "--tuning", "--seed", "3", "--policies", "replaybook")
    assert code == 0 and "## Where the replays go" in md and "| suite_baseline |" in md
