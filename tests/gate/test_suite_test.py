"""The suite side of the gate: a sequential test per scenario, and its exact operating characteristics."""

from __future__ import annotations

import re

import pytest
from helpers import REPO

from bot.gate import stats

TEST = stats.SuiteTest()


def test_the_targets_hold_exactly_for_a_suite_of_three_at_0_9():
    harmless, runs = stats.suite_characteristics(TEST, [(0.9, 0.9)] * 3)
    assert runs <= 3 * 21  # the baseline on demand: a few more candidate trials, no baseline at all mostly
    harmless, runs = stats.suite_characteristics(stats.SuiteTest(on_demand=False), [(0.9, 0.9)] * 3)
    harmful, _ = stats.suite_characteristics(TEST, [(0.9, 0.5), (0.9, 0.9), (0.9, 0.9)])
    assert harmless <= 0.05 and 1 - harmful <= 0.05
    assert runs <= 2.5 * 18  # 2.5x today's 3 baseline + 3 candidate trials per scenario, with the baseline cached


def test_a_baseline_that_never_failed_does_not_make_one_failure_a_regression():
    assert TEST.decide(40, 40, 0, 1) == "continue"
    assert TEST.decide(40, 40, 0, 2) == "continue"
    assert TEST.decide(40, 40, 0, 3) == "fail"
    assert TEST.decide(40, 40, 9, 0) == "continue" and TEST.decide(40, 40, 10, 0) == "pass"  # ten passes rule out 0.58
    assert TEST.decide(36, 40, 59, 0) == "pass" and TEST.decide(20, 40, 30, 30) == "pass"  # at most 60 trials


def test_a_larger_suite_raises_the_reject_boundary():
    assert TEST.boundary(3) == pytest.approx(4.1)
    assert TEST.boundary(10) > TEST.boundary(3) > TEST.boundary(1)
    assert stats.suite_characteristics(TEST, [(0.9, 0.9)] * 10)[0] <= 0.05


def test_the_docs_table_is_what_the_code_computes():
    text = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    cell = r" \| ([\d.]+)"
    rows = re.findall(r"^\| \**([\d.]+) → ([\d.]+)\** \| \**([\d.]+)\**" + cell * 4 + r" \|$", text, re.M)
    assert len(rows) == 11
    for b, c, p, cached, lazy, base, _ in rows:
        exact = stats.suite_scenario_characteristics(TEST, float(b), float(c), 3)
        full = stats.suite_scenario_characteristics(FIXED, float(b), float(c), 3)
        assert (round(exact.p_regressed, 4), round(full.expected_runs, 1)) == (float(p), float(cached)), (b, c)
        assert (round(exact.expected_runs, 1), round(exact.baseline_runs, 1)) == (float(lazy), float(base)), (b, c)


# -- the baseline on demand (issue 28 item 5) ---------------------------------------------------

FIXED = stats.SuiteTest(on_demand=False)
CASES = [(1, 1), (0.95, 0.95), (0.9, 0.9), (0.8, 0.8), (0.7, 0.7), (0.5, 0.5), (0.9, 0.7), (0.9, 0.5), (0.8, 0.4)]


@pytest.mark.parametrize("b,c", CASES)
def test_the_baseline_on_demand_decides_exactly_as_the_full_baseline(b, c):
    lazy = stats.suite_scenario_characteristics(TEST, b, c, 3)
    full = stats.suite_scenario_characteristics(FIXED, b, c, 3)
    assert lazy.p_regressed == pytest.approx(full.p_regressed, abs=1e-12)
    assert full.baseline_runs == 40 and lazy.baseline_runs <= 40


def test_the_error_rates_are_no_worse_than_before_and_the_first_gate_after_a_change_costs_under_half():
    harmless, runs = stats.suite_characteristics(TEST, [(0.9, 0.9)] * 3)
    harmful, _ = stats.suite_characteristics(TEST, [(0.9, 0.5), (0.9, 0.9), (0.9, 0.9)])
    assert round(harmless, 4) == 0.0323 and round(1 - harmful, 4) == 0.0115  # docs/gate.md: 3.2% and 1.2%
    assert harmless <= 0.0333 and 1 - harmful <= 0.0474  # issue 28: no worse than the 3.3% and 4.7% before
    first = runs + stats.suite_baseline_runs(TEST, [(0.9, 0.9)] * 3)
    assert first < 154.6 / 2  # the 40-trial baseline's first gate after an admission cost 154.6


def test_the_harm_that_passed_the_old_test_on_the_noisy_loop_is_now_caught():
    """seed 9's targeted-tests#0: whole-suite-after-change 0.98 -> 0.64, on a suite of 12 (docs/gate.md)."""
    old = stats.SuiteTest(max_n=30, drop=0.4, reject_at=3.3, rate_cap=0.9)
    assert stats.suite_scenario_characteristics(old, 0.98, 0.638, 12).p_regressed < 0.72
    assert stats.suite_scenario_characteristics(TEST, 0.98, 0.638, 12).p_regressed > 0.95
    # and its 30 trials (23 passed) are no longer "no regression" against a baseline that never failed
    assert old.pessimistic(23, 7, 12) == "pass" and TEST.pessimistic(23, 7, 12) != "pass"


def test_the_on_demand_order_settles_every_trial_sequence_as_the_full_baseline(tmp_path):
    import random

    rng = random.Random(28)
    for _ in range(3000):
        b, c = rng.choice([0.3, 0.6, 0.9, 1.0]), rng.choice([0.2, 0.5, 0.8, 0.95])
        base = [rng.random() < b for _ in range(TEST.baseline_n)]
        cand = [rng.random() < c for _ in range(TEST.max_n)]
        full = "pass" if sum(base) == 0 else FIXED.settle(sum(base), len(base), cand)
        # the on-demand order: the candidate's trials against the pessimistic baseline, the real one if needed
        used = 0
        while TEST.pessimistic(sum(cand[:used]), used - sum(cand[:used])) == "continue":
            used += 1
        if TEST.pessimistic(sum(cand[:used]), used - sum(cand[:used])) == "pass":
            lazy = "pass"
        else:
            lazy = "pass" if sum(base) == 0 else TEST.settle(sum(base), len(base), cand)
        assert lazy == full
