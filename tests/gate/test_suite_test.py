"""The suite side of the gate: a sequential test per scenario, and its exact operating characteristics."""

from __future__ import annotations

import re

import pytest
from helpers import REPO

from bot.gate import stats

TEST = stats.SuiteTest()


def test_the_targets_hold_exactly_for_a_suite_of_three_at_0_9():
    harmless, runs = stats.suite_characteristics(TEST, [(0.9, 0.9)] * 3)
    harmful, _ = stats.suite_characteristics(TEST, [(0.9, 0.5), (0.9, 0.9), (0.9, 0.9)])
    assert harmless <= 0.05 and 1 - harmful <= 0.05
    assert runs <= 2 * 18  # 2x today's 3 baseline + 3 candidate trials per scenario, with the baseline cached


def test_a_baseline_that_never_failed_does_not_make_one_failure_a_regression():
    assert TEST.decide(40, 40, 0, 1) == "continue"
    assert TEST.decide(40, 40, 0, 2) == "continue"
    assert TEST.decide(40, 40, 0, 3) == "fail"
    assert TEST.decide(40, 40, 8, 0) == "pass"  # eight passes in a row rule out 0.5
    assert TEST.decide(36, 40, 29, 0) == "pass" and TEST.decide(20, 40, 15, 15) == "pass"  # at most 30 trials


def test_a_larger_suite_raises_the_reject_boundary():
    assert TEST.boundary(3) == pytest.approx(3.3)
    assert TEST.boundary(10) > TEST.boundary(3) > TEST.boundary(1)
    assert stats.suite_characteristics(TEST, [(0.9, 0.9)] * 10)[0] <= 0.05


def test_the_docs_table_is_what_the_code_computes():
    text = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \**([\d.]+) → ([\d.]+)\** \| \**([\d.]+)\** \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert len(rows) == 11
    for b, c, p, runs, _ in rows:
        exact = stats.suite_scenario_characteristics(TEST, float(b), float(c), 3)
        assert (round(exact.p_regressed, 4), round(exact.expected_runs, 1)) == (float(p), float(runs)), (b, c)
