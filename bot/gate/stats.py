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


# -- the suite side: does the candidate break another scenario? ---------------------


@dataclass(frozen=True)
class SuiteTest:
    """A sequential test per suite scenario: is the candidate's pass rate ``drop`` below the baseline's?

    Paired by scenario: each scenario is judged against its own baseline, a
    batch of ``baseline_n`` trials with the current playbook, cached and shared
    by every candidate until the playbook changes. The candidate's trials then
    run one at a time, as a truncated sequential probability ratio test of
    H0: c = b against H1: c = b - drop, where b is the baseline's rate
    (Laplace-smoothed, and taken as at most ``rate_cap`` so that a baseline
    that never failed does not make one failure damning). The log likelihood
    ratio rejects at ``reject_at`` (set for ``suite_size`` scenarios; a larger
    suite raises it by log(k / suite_size), splitting the 5% among them),
    accepts at ``accept_at``, and accepts after ``max_n`` trials. See
    docs/gate.md for why, and its operating characteristics.

    With ``on_demand`` (the default) the baseline is run only when needed: the
    candidate's trials first against the pessimistic baseline (``pessimistic``),
    then baseline trials until they settle the test (``settled``), giving the
    decision the whole baseline gives (``bot.gate.decision._judge``).
    """

    # Issue 28 item 4 (was max_n 30, drop 0.4, reject_at 3.3, cap 0.9): exactly, 3 scenarios at 0.9 see a harmless
    # rule rejected 3.23% (was 3.33%) and a 0.9 -> 0.5 harm admitted 1.15% (was 4.74%); a 0.98 -> 0.64 harm on a
    # suite of 12 is missed 4% of the time (was 29%), for about 45% more candidate trials (docs/gate.md).
    baseline_n: int = 40
    max_n: int = 60
    drop: float = 0.35
    reject_at: float = 4.1
    accept_at: float = -4.5
    rate_cap: float = 0.93
    suite_size: int = 3
    on_demand: bool = True  # run the baseline only when the candidate's trials alone cannot settle the test


    def rates(self, baseline_passes: int, baseline_n: int) -> tuple[float, float]:
        """(b, b - drop) as the test uses them."""
        b = min((baseline_passes + 1) / (baseline_n + 2), self.rate_cap)
        return b, max(b - self.drop, 0.02)

    def boundary(self, k: int) -> float:
        return self.reject_at + math.log(max(k, 1) / self.suite_size)

    def decide(self, baseline_passes: int, baseline_n: int, passes: int, fails: int, k: int = 3) -> Decision:
        """'fail' when the scenario regressed, 'pass' when it did not, else 'continue'."""
        b, worse = self.rates(baseline_passes, baseline_n)
        llr = passes * math.log(worse / b) + fails * math.log((1 - worse) / (1 - b))
        if llr >= self.boundary(k) - 1e-12:
            return "fail"
        if llr <= self.accept_at + 1e-12 or passes + fails >= self.max_n:
            return "pass"
        return "continue"

    def pessimistic(self, passes: int, fails: int, k: int = 3) -> Decision:
        """The decision against the baseline that would judge the candidate hardest: one that passed every trial.

        The log likelihood ratio rises with the baseline's rate after any trials, so if the candidate clears
        this baseline it clears every baseline it could have had: the baseline need not be run."""
        return self.decide(self.baseline_n, self.baseline_n, passes, fails, k)

    def settle(self, baseline_passes: int, baseline_n: int, trials: list[bool], k: int = 3) -> Decision:
        """The decision on the candidate's ``trials`` (in trial order) once the baseline is known: 'pass' or
        'fail' if the test stopped on a prefix of them, 'continue' if it needs more (as ``decide`` would have
        said after each trial)."""
        passes = fails = 0
        for ok in [None, *trials]:
            if ok is not None:
                passes, fails = passes + ok, fails + (not ok)
            state = self.decide(baseline_passes, baseline_n, passes, fails, k)
            if state != "continue":
                return state
        return "continue"

    def settled(self, lo: int, hi: int, trials: list[bool], k: int = 3) -> Decision:
        """The decision on the candidate's ``trials`` that every full baseline with ``lo`` to ``hi`` passes (of
        ``baseline_n``) gives, if they all agree, else 'continue' (a baseline that never passed: not judged)."""
        ends = {("pass" if bp == 0 else self.settle(bp, self.baseline_n, trials, k)) for bp in range(lo, hi + 1)}
        return ends.pop() if len(ends) == 1 else "continue"

    def describe(self) -> str:
        how = (f"each scenario against its own {self.baseline_n}-trial baseline: a sequential test for a drop of "
               f"{self.drop:g} in pass rate, at most {self.max_n} trials with the rule")
        if self.on_demand:
            how += ("; the baseline runs only when the rule's trials do not clear a baseline that never failed, "
                    "and only until it settles the test")
        return how


@dataclass(frozen=True)
class SuiteCharacteristics:
    p_regressed: float  # of one scenario
    expected_runs: float  # the candidate's trials of it (the baseline's are shared)
    baseline_runs: float = 0.0  # expected baseline trials, when none is cached yet


def suite_scenario_characteristics(test: SuiteTest, p_baseline: float, p_candidate: float,
                                   k: int = 3) -> SuiteCharacteristics:
    """Exact P(the scenario is judged regressed) and expected candidate trials, over every baseline
    outcome (binomial) and every candidate path."""
    if test.on_demand:
        return _on_demand(test, p_baseline, p_candidate, k)
    p_fail = runs = 0.0
    for passes in range(test.baseline_n + 1):
        weight = math.comb(test.baseline_n, passes) * p_baseline**passes * (1 - p_baseline) ** (test.baseline_n - passes)
        if weight == 0.0:
            continue
        if passes == 0:
            continue  # a scenario that never passed is not judged
        regress, n = _side(lambda p, f, b=passes: _flip(test.decide(b, test.baseline_n, p, f, k)), p_candidate)
        p_fail += weight * regress
        runs += weight * n
    return SuiteCharacteristics(p_fail, runs, float(test.baseline_n))


def _on_demand(test: SuiteTest, p_baseline: float, p_candidate: float, k: int) -> SuiteCharacteristics:
    """``suite_scenario_characteristics`` of the on-demand order (``bot.gate.decision._judge``): the candidate's
    trials first, against the pessimistic baseline (``SuiteTest.pessimistic``); if they do not clear it, baseline
    trials one at a time until every baseline they could still complete to gives the same decision
    (``SuiteTest.settled``); if the whole baseline is run and the test still needs them, more candidate trials.

    Walks every candidate path (with the set of baselines whose test has already cleared it on a prefix), then
    every baseline path from where the pessimistic test stopped.
    """
    n, q, pb = test.baseline_n, p_candidate, p_baseline

    @lru_cache(maxsize=None)
    def more(bp: int, p: int, f: int) -> tuple[float, float]:
        """P(regressed) and further candidate trials with the baseline known, from (p, f)."""
        return _side(lambda a, b: _flip(test.decide(bp, n, p + a, f + b, k)), q)

    def baseline(p: int, f: int, cleared: int) -> tuple[float, float, float]:
        states = ["pass" if bp == 0 or cleared >> bp & 1 else test.decide(bp, n, p, f, k) for bp in range(n + 1)]

        @lru_cache(maxsize=None)
        def walk(j: int, bp: int) -> tuple[float, float, float]:
            ends = set(states[bp:bp + n - j + 1])
            if len(ends) == 1 and "continue" not in ends:
                return float("fail" in ends), 0.0, 0.0
            if j == n:
                return (*more(bp, p, f), 0.0)
            wp, wf = walk(j + 1, bp + 1), walk(j + 1, bp)
            return pb * wp[0] + (1 - pb) * wf[0], pb * wp[1] + (1 - pb) * wf[1], 1 + pb * wp[2] + (1 - pb) * wf[2]

        return walk(0, 0)

    @lru_cache(maxsize=None)
    def walk(p: int, f: int, cleared: int) -> tuple[float, float, float]:
        cleared |= sum(1 << bp for bp in range(1, n + 1) if test.decide(bp, n, p, f, k) == "pass")
        now = test.pessimistic(p, f, k)
        if now == "pass":
            return 0.0, 0.0, 0.0
        if now == "fail":
            return baseline(p, f, cleared)
        wp, wf = walk(p + 1, f, cleared), walk(p, f + 1, cleared)
        return q * wp[0] + (1 - q) * wf[0], 1 + q * wp[1] + (1 - q) * wf[1], q * wp[2] + (1 - q) * wf[2]

    return SuiteCharacteristics(*walk(0, 0, 0))


def _flip(state: Decision) -> Decision:
    """``_side`` counts 'pass'; here the event of interest is a regression."""
    return {"fail": "pass", "pass": "fail", "continue": "continue"}[state]


def suite_characteristics(test: SuiteTest, rates: list[tuple[float, float]]) -> tuple[float, float]:
    """P(the gate finds a regression anywhere) and expected candidate trials, for (baseline, candidate)
    pass rates of each suite scenario."""
    k = len(rates)
    each = [suite_scenario_characteristics(test, b, c, k) for b, c in rates]
    clean = math.prod(1 - e.p_regressed for e in each)
    return 1 - clean, sum(e.expected_runs for e in each)


def suite_baseline_runs(test: SuiteTest, rates: list[tuple[float, float]]) -> float:
    """Expected baseline trials of the whole suite when none is cached (the first gate after a change)."""
    return sum(suite_scenario_characteristics(test, b, c, len(rates)).baseline_runs for b, c in rates)


# -- planning: how many trials a test still needs -------------------------------------


def expected_runs(decide, p: float, passes: int = 0, fails: int = 0) -> float:
    """Expected further trials before ``decide`` stops, from (passes, fails), at pass rate ``p``."""

    @lru_cache(maxsize=None)
    def walk(ps: int, fs: int) -> float:
        if decide(ps, fs) != "continue":
            return 0.0
        return 1 + p * walk(ps + 1, fs) + (1 - p) * walk(ps, fs + 1)

    return walk(passes, fails)


def expected_pass(decide, p: float) -> float:
    """P(``decide`` ends in 'pass') from the start, at pass rate ``p``."""
    return _side(decide, p)[0]


def most_runs(decide, passes: int = 0, fails: int = 0) -> int:
    """The most further trials ``decide`` can ask for, from (passes, fails) (unscored retries aside)."""

    @lru_cache(maxsize=None)
    def walk(ps: int, fs: int) -> int:
        if decide(ps, fs) != "continue":
            return 0
        return 1 + max(walk(ps + 1, fs), walk(ps, fs + 1))

    return walk(passes, fails)


# -- the paired test: does the rule beat the playbook without it, on the same scenario? ----------


@dataclass(frozen=True)
class PairedTest:
    """Before and after interleaved, one pair of trials at a time, as a sequential test on the
    discordant pairs (McNemar's idea, run as a truncated SPRT).

    A pair is discordant when exactly one side passes. With no effect the after
    side wins a discordant pair half the time; under H1 it wins ``theta`` of
    them. H0 is not "no effect" but "too little effect to be worth a rule": the
    after side wins at most ``theta0`` of the discordant pairs (0.55: a rule
    that cuts a 0.6 mistake rate by a tenth wins about 0.555 of them). The log
    likelihood ratio moves by log(theta / theta0) per win and by
    log((1 - theta) / (1 - theta0)) per loss; the rule is admitted at
    ``admit_at``, refused at ``reject_at`` or after ``max_pairs`` pairs. Unlike "at most 0 of 3 pass
    without", it does not need an agent that makes the mistake every time: it
    asks whether the rule changes the pass rate, which is what a noisy agent
    can show. Exact characteristics: ``paired_characteristics``.
    """

    # Issue 28 item 4 (was admit_at 3.2, max_pairs 20): a no-effect rule admitted 0.60% of the time at 0.5 -> 0.5
    # (was 1.93%), 0.4 -> 0.85 admitted 0.758 (was 0.732), at 19.8 / 38.3 expected runs (was 18.0 / 26.9).
    # Issue 28, robustness (was theta0 0.5): a no-effect rule 0.14%, a weak one (0.4 -> 0.46) 0.49% (was 1.65%),
    # 0.4 -> 0.85 0.623, at 19.3 / 44.9 expected runs; docs/gate.md has the table and the seeds it was chosen on.
    theta: float = 0.9
    theta0: float = 0.55
    admit_at: float = 4.6
    reject_at: float = -2.0
    max_pairs: int = 30
    curtail: bool = True  # refuse once admission is out of reach (issue 54 item 5): same decisions, fewer pairs

    def __post_init__(self) -> None:
        if not 0 < self.theta0 < self.theta < 1:
            raise ValueError(f"PairedTest needs 0 < theta0 < theta < 1, got theta0={self.theta0}, theta={self.theta}")

    def llr(self, wins: int, losses: int) -> float:
        return (wins * math.log(self.theta / self.theta0)
                + losses * math.log((1 - self.theta) / (1 - self.theta0)))

    def decide(self, wins: int, losses: int, pairs: int) -> Decision:
        """'pass' (admit), 'fail' (refuse) or 'continue', after ``pairs`` pairs with these discordant counts.

        With ``curtail``, 'fail' as soon as admission is out of reach: even if every pair left were a win, the log
        likelihood ratio would stay below ``admit_at``. The uncurtailed test could then only refuse too, so the
        decision is the same on every sequence of pairs (``tests/gate/test_gate_curtail.py``); only pairs are saved.
        """
        llr = self.llr(wins, losses)
        if llr >= self.admit_at - 1e-12:
            return "pass"
        if llr <= self.reject_at + 1e-12 or pairs >= self.max_pairs:
            return "fail"
        if self.curtail and self.llr(wins + self.max_pairs - pairs, losses) < self.admit_at - 1e-12:
            return "fail"
        return "continue"

    def describe(self) -> str:
        return (f"before and after in pairs, a sequential test on the discordant pairs (H1: the rule wins "
                f"{self.theta:g} of them, H0: at most {self.theta0:g}), at most {self.max_pairs} pairs")


@dataclass(frozen=True)
class BaselineTest:
    """The own scenario judged against its cached baseline (``gate.own_test: baseline``): does the rule cut the
    mistake rate clearly?

    The before side is the scenario's baseline, ``baseline_n`` trials with the current playbook: the very trials
    the suite test of every other gate reads for this scenario (same text, same arm, same indices), so they are
    cached, shared by every candidate until the playbook changes, and carried over at an admission
    (``bot.gate.reuse``). Only the after side is run per candidate, as a truncated SPRT: with m the baseline's
    mistake rate (1 - its Laplace-smoothed pass rate), H1: the rule cuts it by ``effect`` (the pass rate is
    1 - m (1 - effect)), H0: by at most ``effect0`` (a rule below the loop benchmark's "useless" line). Admit at
    ``admit_at``, refuse at ``reject_at`` or after ``max_n`` trials. The paired test spends half its trials on a
    before side and conditions on the discordant pairs; this one reads a before side already paid for. Exact
    characteristics, over every baseline outcome: ``bot.gate.price.own_dist``; docs/gate.md has the table.
    """

    baseline_n: int = 20  # issue 54 item 5 (was 40): the first 20 of the suite's cached 40-trial baseline
    effect: float = 0.7
    effect0: float = 0.1
    admit_at: float = 4.6
    reject_at: float = -2.0
    max_n: int = 30
    curtail: bool = True  # refuse once admission is out of reach (issue 54 item 5): same decisions, fewer trials

    def __post_init__(self) -> None:
        if not 0 <= self.effect0 < self.effect <= 1:
            raise ValueError(f"BaselineTest needs 0 <= effect0 < effect <= 1, got {self.effect0}, {self.effect}")

    def rates(self, baseline_passes: int, baseline_n: int) -> tuple[float, float]:
        """(pass rate under H0, under H1) after a baseline of ``baseline_passes`` of ``baseline_n``."""
        m = 1 - (baseline_passes + 1) / (baseline_n + 2)
        return 1 - m * (1 - self.effect0), 1 - m * (1 - self.effect)

    def llr(self, baseline_passes: int, baseline_n: int, passes: int, fails: int) -> float:
        c0, c1 = self.rates(baseline_passes, baseline_n)
        return passes * math.log(c1 / c0) + fails * math.log((1 - c1) / (1 - c0))

    def decide(self, baseline_passes: int, baseline_n: int, passes: int, fails: int) -> Decision:
        """'pass' (admit), 'fail' (refuse) or 'continue', after ``passes`` and ``fails`` with the rule.

        With ``curtail``, 'fail' as soon as admission is out of reach: a pass always raises the log likelihood
        ratio (H1's pass rate is above H0's), so if passing every trial left to ``max_n`` would not reach
        ``admit_at``, the uncurtailed test can only refuse too; the decision is the same on every sequence
        (``tests/gate/test_gate_curtail.py``), and only trials are saved."""
        llr = self.llr(baseline_passes, baseline_n, passes, fails)
        if llr >= self.admit_at - 1e-12:
            return "pass"
        if llr <= self.reject_at + 1e-12 or passes + fails >= self.max_n:
            return "fail"
        if self.curtail and self.llr(baseline_passes, baseline_n, self.max_n - fails, fails) < self.admit_at - 1e-12:
            return "fail"
        return "continue"

    def describe(self) -> str:
        return (f"the rule's trials against the scenario's cached {self.baseline_n}-trial baseline, a sequential "
                f"test of a cut in the mistake rate (H1: by {self.effect:g}, H0: by at most {self.effect0:g}), "
                f"at most {self.max_n} trials with the rule")


@dataclass(frozen=True)
class AutoTest:
    """``gate.own_test: auto``, the default: the sequential test where every run of the agent on the
    scenario is the same run, the paired test everywhere else.

    "At most 0 of 3 pass without the rule" is sound only for an agent that makes its mistake every
    time: the simulated model on a scenario whose policy has no chance in it. A real model is never
    known to be that, and on a noisy agent the sequential test refuses most rules that help (0.4 ->
    0.85: 18% admitted, the paired test 62%). Which one a scenario got is in the gate's report.
    """

    sequential: SequentialTest = SequentialTest()
    paired: PairedTest = PairedTest()

    def pick(self, *, deterministic: bool) -> "SequentialTest | PairedTest":
        return self.sequential if deterministic else self.paired

    def describe(self) -> str:
        return (f"for an agent whose runs are all alike (the simulated model with no chance in its policy): "
                f"{self.sequential.describe()}; for any other: {self.paired.describe()}")


OWN_TESTS = ("auto", "sequential", "paired", "baseline")


def own_test(kind: str) -> "SequentialTest | PairedTest | BaselineTest | AutoTest":
    """The own-scenario test ``gate.own_test`` names (``OWN_TESTS``), at its defaults."""
    return {"sequential": SequentialTest, "paired": PairedTest, "baseline": BaselineTest}.get(kind, AutoTest)()


def paired_characteristics(test: PairedTest, p_before: float, p_after: float) -> Characteristics:
    """Exact P(admit) and expected runs (two per pair) for independent trials at these pass rates."""
    win, loss = p_after * (1 - p_before), p_before * (1 - p_after)

    @lru_cache(maxsize=None)
    def walk(pairs: int, wins: int, losses: int) -> tuple[float, float]:
        state = test.decide(wins, losses, pairs)
        if state != "continue":
            return (1.0 if state == "pass" else 0.0), 0.0
        nexts = ((win, walk(pairs + 1, wins + 1, losses)), (loss, walk(pairs + 1, wins, losses + 1)),
                 (1 - win - loss, walk(pairs + 1, wins, losses)))
        return sum(w * r[0] for w, r in nexts), 2 + sum(w * r[1] for w, r in nexts)

    return Characteristics(*walk(0, 0, 0))
