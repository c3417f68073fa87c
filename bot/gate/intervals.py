"""Intervals of a difference between the trials without a rule and with it, stratified by scenario.

Two estimates, both sound at the handfuls of trials a gate runs and both pooled over scenarios without
letting one scenario's trial count weigh on another's (the suite test stops early where a rule does well,
so pooling raw counts would bias the with-rule side downward):

* ``ratio``: how much a per-trial figure (turns, tokens, cost) changes, as with ÷ without. On the log
  scale, the Hodges–Lehmann shift: the median of every within-scenario difference log(with) - log(without),
  pooled over scenarios; its 95% interval is the pair of order statistics of those differences that the
  (stratified) Mann–Whitney statistic gives: exact (the Gaussian binomial coefficients of each scenario's
  two sample sizes, convolved) when small, the normal approximation past ``EXACT_UP_TO`` differences.
  Distribution-free; closed intervals stay conservative under ties (turns are small integers, and the
  simulated model repeats itself exactly). It reads the rule as scaling the figure, and needs no figure
  of 0 (a $0 local model's cost is "not measured", never a ratio).
* ``rate_difference``: the pass rate with minus without, as the mean over scenarios of each one's
  difference, with the MOVER-Wilson interval of that linear combination of independent proportions
  (Zou & Donner 2008; for one scenario it is Newcombe's hybrid score interval, 1998).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist, median

from bot.gate.stats import wilson

Z95 = NormalDist().inv_cdf(0.975)
EXACT_UP_TO = 1500  # within-scenario differences in all: past this, the normal approximation (it is close there)


@dataclass(frozen=True)
class Ratio:
    """with ÷ without of a per-trial figure: the estimate and its 95% interval (None: too few trials for one)."""

    estimate: float
    low: float | None
    high: float | None
    without: float  # the median without the rule, over the pooled trials
    with_rule: float  # and with it

    @property
    def down(self) -> bool:
        """Smaller with the rule, the interval excluding no change."""
        return self.high is not None and self.high < 1

    @property
    def up(self) -> bool:
        return self.low is not None and self.low > 1

    def as_dict(self) -> dict:
        return {"ratio": self.estimate, "interval95": None if self.low is None else [self.low, self.high],
                "median_without": self.without, "median_with": self.with_rule}


def ratio(strata: list[tuple[list[float], list[float]]], alpha: float = 0.05) -> Ratio | None:
    """with ÷ without over ``strata`` (each scenario's figures without, with); None when no scenario has a
    figure on both sides, or a figure is not positive (it cannot be a ratio)."""
    strata = [(list(a), list(b)) for a, b in strata if a and b]
    if not strata or any(v <= 0 for a, b in strata for v in (*a, *b)):
        return None
    diffs = sorted(math.log(y) - math.log(x) for a, b in strata for x in a for y in b)
    k = _order_statistic(tuple(sorted((len(a), len(b)) for a, b in strata)), alpha)
    low = high = None
    if k >= 1:
        low, high = math.exp(diffs[k - 1]), math.exp(diffs[len(diffs) - k])
    return Ratio(math.exp(median(diffs)), low, high, median([x for a, _ in strata for x in a]),
                 median([y for _, b in strata for y in b]))


@lru_cache(maxsize=256)
def _order_statistic(sizes: tuple[tuple[int, int], ...], alpha: float) -> int:
    """The largest c with P(W <= c - 1) <= alpha / 2, W the sum of the scenarios' Mann–Whitney statistics
    under no shift: the interval is the c-th smallest and c-th largest difference (0: no interval)."""
    total = sum(n * m for n, m in sizes)
    if total > EXACT_UP_TO:
        sd = math.sqrt(sum(n * m * (n + m + 1) for n, m in sizes) / 12)
        return max(0, math.floor(total / 2 - Z95 * sd))
    dist = [1.0]
    for n, m in sizes:
        counts = _mann_whitney_counts(n, m)
        whole = math.comb(n + m, n)
        dist = _convolve(dist, [c / whole for c in counts])
    c, cdf = 0, 0.0
    while c < len(dist) and cdf + dist[c] <= alpha / 2 + 1e-12:
        cdf += dist[c]
        c += 1
    return c


def _mann_whitney_counts(n: int, m: int) -> list[int]:
    """How many of the C(n + m, n) orderings give U = 0 .. n m: the Gaussian binomial coefficient's terms,
    the product over i of (1 - q^(m + i)) / (1 - q^i)."""
    poly = [1]
    for i in range(1, n + 1):
        poly = poly + [0] * (m + i)
        for d in range(len(poly) - 1, m + i - 1, -1):
            poly[d] -= poly[d - m - i]
        for d in range(i, len(poly)):
            poly[d] += poly[d - i]
        poly = poly[:i * m + 1]
    return poly


def _convolve(a: list[float], b: list[float]) -> list[float]:
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                out[i + j] += x * y
    return out


@dataclass(frozen=True)
class RateDifference:
    """Pass rate with minus without (mean over scenarios), and its 95% interval."""

    estimate: float
    low: float
    high: float

    @property
    def holds(self) -> bool:
        """No change beyond noise: the interval includes 0."""
        return self.low <= 0 <= self.high

    def as_dict(self) -> dict:
        return {"difference": self.estimate, "interval95": [self.low, self.high]}


def rate_difference(pairs: list[tuple[int, int, int, int]]) -> RateDifference | None:
    """Over scenarios given as (passes without, trials without, passes with, trials with), the mean of
    their pass-rate differences with its MOVER-Wilson 95% interval; None when no scenario has both sides."""
    pairs = [p for p in pairs if p[1] and p[3]]
    if not pairs:
        return None
    w = 1 / len(pairs)
    est = lower = upper = 0.0
    for bp, bn, ap, an in pairs:
        b, a = bp / bn, ap / an
        (bl, bh), (al, ah) = wilson(bp, bn), wilson(ap, an)
        est += w * (a - b)
        lower += (w * (a - al)) ** 2 + (w * (bh - b)) ** 2  # the with-rule side at its low, without at its high
        upper += (w * (ah - a)) ** 2 + (w * (b - bl)) ** 2
    return RateDifference(est, est - math.sqrt(lower), est + math.sqrt(upper))


__all__ = ["Ratio", "RateDifference", "rate_difference", "ratio"]
