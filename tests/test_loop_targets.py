"""Issue 46's honest benchmark (SIMULATED agent): reporting seeds apart from tuning seeds, the fair comparator,
the oracle, the summary's fields, the paired tests over seeds. Nothing here pins an outcome of the benchmark."""

from __future__ import annotations

import contextlib
import io
import json
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

from bot.gate import stats, suite_check  # noqa: E402

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
