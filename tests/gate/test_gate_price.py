"""The exact figures of a gate under a budget (``bot.gate.price``) against a seeded simulation of the same gate
through the product's tests (``price.walk``, deciding with ``stats.PairedTest``, ``SequentialTest``, ``SuiteTest``).

Enough runs that a wrong table fails: each check is within 4 standard errors, and the budget's effect (the
unbounded figure) lies well outside that band, so a table that ignored the budget would fail.
"""

from __future__ import annotations

import math
import random

import pytest

from bot.gate import price, stats

RUNS = 4000


def _simulate(own_test, p_before, p_after, rates, budget, seed):
    rng = random.Random(seed)
    suite = stats.SuiteTest()
    admitted = spent = 0
    for _ in range(RUNS):
        baselines = {f"s{i}": [rng.random() < b for _ in range(suite.baseline_n)] for i, (b, _) in enumerate(rates)}
        if isinstance(own_test, stats.BaselineTest):
            baselines["own"] = [rng.random() < p_before for _ in range(own_test.baseline_n)]
        cand = {f"s{i}": c for i, (_, c) in enumerate(rates)}

        def draw(side, sid, index):
            p = {"before": p_before, "after": p_after}.get(side) if sid == "own" else cand[sid]
            return rng.random() < p

        walked = price.walk(draw, own_test, "own", suite, baselines, budget)
        admitted += walked.decision == "admit"
        spent += walked.replays
        assert budget is None or walked.replays <= budget
    return admitted / RUNS, spent / RUNS


@pytest.mark.parametrize("own_test,p_before,p_after,budget", [
    (stats.PairedTest(), 0.2, 0.9, 60),
    (stats.SequentialTest(), 0.0, 0.8, 30),
    (stats.BaselineTest(), 0.4, 0.85, 40),
])
def test_the_exact_budget_table_matches_a_simulation_through_the_decision_code(own_test, p_before, p_after, budget):
    rates = [(0.9, 0.9), (0.9, 0.7), (0.8, 0.8)]
    suite = stats.SuiteTest()
    exact = price.gate_price(price.own_dist(own_test, p_before, p_after),
                             [price.suite_dist(suite, b, c, len(rates)) for b, c in rates], budget)
    observed, mean_spent = _simulate(own_test, p_before, p_after, rates, budget, seed=46)
    se = math.sqrt(exact.p_admit * (1 - exact.p_admit) / RUNS)
    assert abs(observed - exact.p_admit) <= 4 * se + 1e-9, (observed, exact)
    assert abs(exact.p_admit_unbounded - exact.p_admit) > 8 * se  # the budget matters here: ignoring it would fail
    assert abs(mean_spent - exact.expected_replays) <= 0.05 * exact.expected_replays, (mean_spent, exact)
    assert exact.expected_replays <= budget


def test_the_exact_tables_agree_with_stats():
    """``own_dist`` and ``suite_dist`` sum to the figures ``bot.gate.stats`` computes another way."""
    ok, bad = price.own_dist(stats.BaselineTest(), 0.4, 0.85)
    assert sum(ok.values()) + sum(bad.values()) == pytest.approx(1.0, abs=1e-9)
    for test, pb, pa, want in ((stats.PairedTest(), 0.5, 0.5, stats.paired_characteristics),
                               (stats.SequentialTest(), 0.0, 0.9, stats.operating_characteristics)):
        ok, bad = price.own_dist(test, pb, pa)
        assert sum(ok.values()) == pytest.approx(want(test, pb, pa).p_admit, abs=1e-12)
        assert sum(ok.values()) + sum(bad.values()) == pytest.approx(1.0, abs=1e-12)
    from dataclasses import replace

    suite = stats.SuiteTest()
    ok, bad = price.suite_dist(suite, 0.9, 0.5, 3)
    cached = stats.suite_scenario_characteristics(replace(suite, on_demand=False), 0.9, 0.5, 3)
    assert sum(bad.values()) == pytest.approx(cached.p_regressed, abs=1e-12)
    assert sum(r * p for d in (ok, bad) for r, p in d.items()) == pytest.approx(cached.expected_runs, abs=1e-9)


def test_a_budget_never_raises_a_false_admission():
    own = price.own_dist(stats.PairedTest(), 0.5, 0.5)
    suite = [price.suite_dist(stats.SuiteTest(), 0.9, 0.9, 3)] * 3
    figures = [price.gate_price(own, suite, b) for b in (10, 20, 40, 80, None)]
    admits = [f.p_admit for f in figures]
    assert admits == sorted(admits) and admits[-1] == figures[-1].p_admit_unbounded
