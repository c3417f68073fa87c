"""The statistics of the admit gate: a sequential test, intervals, regression tests.

Agents are not deterministic, so one run before and one after prove little.
The gate runs the rule's own scenario as a curtailed sequential test:

* **before** (current playbook): run up to ``before_n`` trials; the rule is
  rejected as soon as more than ``before_max_pass`` of them pass (the agent
  does not make the mistake often enough for the rule to teach anything);
* **after** (playbook + candidate): run up to ``after_n`` trials; admit as
  soon as ``after_min_pass`` pass, reject as soon as that can no longer happen.

With the defaults (0 of 3 before, at least 4 of 5 after) the exact operating
characteristics are (``operating_characteristics``):

| before -> after pass rate | P(admit) | expected runs |
|---|---|---|
| 0.5 -> 0.5 (no effect) | 0.0234 | 2.2 |
| 0.0 -> 0.9 (a real rule) | 0.9185 | 7.3 |

which meets the targets: a rule with no effect is admitted at most 2.5% of the
time, a real one at least 90%, in at most 8 expected runs. A single run each
way (the seed article's gate) admits a no-effect rule 25% of the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Decision = Literal["continue", "pass", "fail"]


@dataclass(frozen=True)
class SequentialTest:
    before_n: int = 3
    before_max_pass: int = 0
    after_n: int = 5
    after_min_pass: int = 4

    def before(self, passes: int, fails: int) -> Decision:
        """'pass' when the before-side shows the mistake often enough, 'fail' when it cannot."""
        if passes > self.before_max_pass:
            return "fail"
        if passes + fails >= self.before_n:
            return "pass"
        return "continue"

    def after(self, passes: int, fails: int) -> Decision:
        """'pass' when the rule fixes the scenario often enough, 'fail' when it cannot."""
        if passes >= self.after_min_pass:
            return "pass"
        if fails > self.after_n - self.after_min_pass:
            return "fail"
        return "continue"

    def describe(self) -> str:
        return (f"at most {self.before_max_pass} of {self.before_n} before, "
                f"at least {self.after_min_pass} of {self.after_n} after, stopping early")


@dataclass(frozen=True)
class Characteristics:
    p_admit: float
    expected_runs: float


def _side(decide, p: float) -> tuple[float, float]:
    """P(side passes) and expected runs, by walking every (passes, fails) path."""

    @lru_cache(maxsize=None)
    def walk(passes: int, fails: int) -> tuple[float, float]:
        state = decide(passes, fails)
        if state != "continue":
            return (1.0 if state == "pass" else 0.0), 0.0
        win_p, runs_p = walk(passes + 1, fails)
        win_f, runs_f = walk(passes, fails + 1)
        return p * win_p + (1 - p) * win_f, 1 + p * runs_p + (1 - p) * runs_f

    return walk(0, 0)


def operating_characteristics(test: SequentialTest, p_before: float, p_after: float) -> Characteristics:
    """Exact P(admit) and expected runs on the rule's own scenario."""
    before_ok, before_runs = _side(test.before, p_before)
    after_ok, after_runs = _side(test.after, p_after)
    return Characteristics(before_ok * after_ok, before_runs + before_ok * after_runs)


def wilson(passes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a pass rate (sound at n = 1..10, unlike p ± 2se)."""
    if n == 0:
        return 0.0, 1.0
    p = passes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(0, k + 1))


def regressed(baseline_passes: int, baseline_n: int, passes: int, n: int, alpha: float = 0.05) -> bool:
    """Whether ``passes`` of ``n`` is implausibly low for the scenario's baseline pass rate.

    The baseline rate is the cached estimate; the candidate regresses the
    scenario when a result this low would happen less than ``alpha`` of the
    time at that rate. A scenario that always passed regresses on any failure;
    a noisy one (baseline 0.5) needs a clear drop.
    """
    if baseline_n == 0 or n == 0:
        return False
    rate = baseline_passes / baseline_n
    return binom_cdf(passes, n, rate) < alpha
