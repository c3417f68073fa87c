"""The curtailed own test decides exactly as the uncurtailed one (issue 54 item 5).

``BaselineTest`` and ``PairedTest`` refuse as soon as admission is out of reach (``curtail``). These tests walk
every state the uncurtailed test can be in (the decision depends on the counts alone) and, from each state where
only the curtailed one stops, every continuation: none admits. Then seeded random sequences are fed to both and
their decisions compared, with the trials the curtailed one saved.
"""

from __future__ import annotations

import random
from dataclasses import replace
from functools import lru_cache

import pytest

from bot.gate import price, stats


def _baseline_pair(bp: int):
    cut, full = stats.BaselineTest(), replace(stats.BaselineTest(), curtail=False)
    n = cut.baseline_n
    return (lambda p, f: cut.decide(bp, n, p, f)), (lambda p, f: full.decide(bp, n, p, f))


def _can_admit(decide, p: int, f: int) -> bool:
    """Whether any continuation from (p, f) ends in admission under ``decide``."""

    @lru_cache(maxsize=None)
    def walk(p: int, f: int) -> bool:
        state = decide(p, f)
        if state != "continue":
            return state == "pass"
        return walk(p + 1, f) or walk(p, f + 1)

    return walk(p, f)


@pytest.mark.parametrize("bp", range(stats.BaselineTest().baseline_n + 1))
def test_the_curtailed_baseline_test_stops_only_where_the_uncurtailed_one_cannot_admit(bp):
    cut, full = _baseline_pair(bp)
    curtailed_stops = 0
    for p in range(stats.BaselineTest().max_n + 1):
        for f in range(stats.BaselineTest().max_n + 1 - p):
            a, b = cut(p, f), full(p, f)
            if a == b:
                continue
            assert (a, b) == ("fail", "continue"), (bp, p, f, a, b)
            assert not _can_admit(full, p, f), (bp, p, f)
            curtailed_stops += 1
    if bp >= 15:  # a baseline that passes often: admission needs more trials than are left early on
        assert curtailed_stops > 0


def _paired_pair():
    return stats.PairedTest(), replace(stats.PairedTest(), curtail=False)


def test_the_curtailed_paired_test_stops_only_where_the_uncurtailed_one_cannot_admit():
    cut, full = _paired_pair()

    @lru_cache(maxsize=None)
    def can_admit(w: int, l: int, pairs: int) -> bool:
        state = full.decide(w, l, pairs)
        if state != "continue":
            return state == "pass"
        return can_admit(w + 1, l, pairs + 1) or can_admit(w, l + 1, pairs + 1) or can_admit(w, l, pairs + 1)

    differ = 0
    for pairs in range(full.max_pairs + 1):
        for w in range(pairs + 1):
            for l in range(pairs + 1 - w):
                a, b = cut.decide(w, l, pairs), full.decide(w, l, pairs)
                if a != b:
                    assert (a, b) == ("fail", "continue") and not can_admit(w, l, pairs), (w, l, pairs)
                    differ += 1
    assert differ > 0


def _run_baseline(decide, trials: list[bool]) -> tuple[str, int]:
    p = f = 0
    for used, ok in enumerate([None, *trials]):
        if ok is not None:
            p, f = p + ok, f + (not ok)
        if (state := decide(p, f)) != "continue":
            return state, used
    raise AssertionError("the test did not stop within max_n")


def _run_paired(test: stats.PairedTest, pairs: list[tuple[bool, bool]]) -> tuple[str, int]:
    w = l = 0
    for used, pair in enumerate([None, *pairs]):
        if pair is not None:
            b, a = pair
            w, l = w + (a and not b), l + (b and not a)
        if (state := test.decide(w, l, used)) != "continue":
            return state, used
    raise AssertionError("the test did not stop within max_pairs")


def test_sampled_sequences_get_the_same_decision_and_the_curtailed_test_saves_trials():
    rng = random.Random(54)
    saved = same = 0
    for _ in range(4000):
        bp, q = rng.randrange(21), rng.random()
        cut, full = _baseline_pair(bp)
        trials = [rng.random() < q for _ in range(stats.BaselineTest().max_n)]
        (a, na), (b, nb) = _run_baseline(cut, trials), _run_baseline(full, trials)
        assert a == b, (bp, trials)
        assert na <= nb
        saved += nb - na
        same += 1
    cut, full = _paired_pair()
    for _ in range(4000):
        pb, pa = rng.random(), rng.random()
        pairs = [(rng.random() < pb, rng.random() < pa) for _ in range(full.max_pairs)]
        (a, na), (b, nb) = _run_paired(cut, pairs), _run_paired(full, pairs)
        assert a == b and na <= nb, pairs
        saved += nb - na
    assert same == 4000 and saved > 0


def test_a_scenario_the_model_never_passes_is_refused_at_pair_21_not_30():
    """The last stop's case: no pair is discordant, so the ratio stays at 0; 10 wins would be needed to admit
    (4.6 / log(0.9 / 0.55) = 9.3), and after pair 21 only 9 pairs are left."""
    cut, full = _paired_pair()
    never = [(False, False)] * full.max_pairs
    assert _run_paired(full, never) == ("fail", 30)  # 60 replays
    assert _run_paired(cut, never) == ("fail", 21)  # 42 replays
    assert stats.paired_characteristics(full, 0, 0).expected_runs == 60
    assert stats.paired_characteristics(cut, 0, 0).expected_runs == 42


def test_curtailing_changes_no_exact_admission_rate_and_never_costs_more():
    for pb, pa in ((0.5, 0.5), (0.4, 0.85), (0.9, 0.9), (0.0, 0.9), (0.7, 0.7)):
        cut, full = stats.BaselineTest(), replace(stats.BaselineTest(), curtail=False)
        (ok_c, bad_c), (ok_f, bad_f) = price.own_dist(cut, pb, pa), price.own_dist(full, pb, pa)
        assert sum(ok_c.values()) == pytest.approx(sum(ok_f.values()), abs=1e-12)
        runs = lambda d: sum(k * v for k, v in d.items())  # noqa: E731
        assert runs(ok_c) + runs(bad_c) <= runs(ok_f) + runs(bad_f) + 1e-9
        pc, pf = _paired_pair()
        c, f = stats.paired_characteristics(pc, pb, pa), stats.paired_characteristics(pf, pb, pa)
        assert c.p_admit == pytest.approx(f.p_admit, abs=1e-12) and c.expected_runs <= f.expected_runs + 1e-9
