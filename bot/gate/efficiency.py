"""Efficiency beside success: turns, tokens and cost with the rule and without it, with their intervals.

A rule can be worth having for what it saves as well as for what it fixes: AGENTS.md files measured −28.6%
runtime and −16.6% output tokens at equal task completion (arXiv 2601.20404). Every gate report therefore
compares, per scenario that ran both ways, the per-trial figures with the rule against those without it
(``bot.gate.intervals.ratio``: with ÷ without, a Hodges–Lehmann ratio of medians with its 95%
order-statistic interval), and pools the suite scenarios (the comparison at equal completion: the own
scenario's outcome is meant to change, so its row is shown but never pooled). Each suite scenario also gets
its own verdict, so a saving on one kind of task is not averaged away by the scenarios the rule leaves alone.

The verdict, over the suite scenarios that ran both ways (pooled), and for each of them:

* ``efficient``: the pass rate holds (the 95% interval of its change includes 0) and turns, tokens or cost
  fall with their interval below 1, none rising beyond its interval;
* ``costlier``: the pass rate holds and one rises beyond its interval, none falling;
* ``mixed``: one falls and another rises (e.g. fewer turns, each one reading a longer prompt);
* None: no change beyond noise, or the pass rate moved, or nothing to compare.

It is reported, never decided on: the gate admits a rule for what it fixes and refuses one for what it
breaks (docs/gate.md, "Efficiency").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from bot.gate.intervals import Ratio, RateDifference, rate_difference, ratio
from bot.gate.result import GateResult, Side
from bot.replay.engine import TrialResult

METRICS: dict[str, Callable[[TrialResult], float]] = {
    "turns": lambda t: t.model_calls,  # each model call is one turn of the agent
    "tokens": lambda t: t.input_tokens + t.output_tokens,
    "cost_usd": lambda t: t.cost_usd,
}
VERDICTS = ("efficient", "costlier", "mixed")


@dataclass
class Row:
    """One scenario that ran both ways: its scored trials on each side and each figure's ratio."""

    scenario: str
    role: str  # "own" (its outcome is meant to change) or "suite"
    without: int
    with_rule: int
    ratios: dict[str, Ratio | None]
    rate: RateDifference | None

    @property
    def verdict(self) -> str | None:
        """This scenario's own verdict (a suite scenario's: the own one's outcome is meant to change)."""
        return verdict(self.rate, self.ratios) if self.role == "suite" else None


@dataclass
class Efficiency:
    rows: list[Row] = field(default_factory=list)
    pooled: dict[str, Ratio | None] = field(default_factory=dict)  # over the suite rows
    rate: RateDifference | None = None  # the suite's pass-rate change, over the same rows
    verdict: str | None = None
    simulated: bool = False
    model_label: str = ""

    def as_dict(self) -> dict:
        figures = (lambda ratios: {k: (r.as_dict() if r else None) for k, r in ratios.items()})
        return {"verdict": self.verdict, "simulated": self.simulated, "decided_on": False,
                "pooled": figures(self.pooled), "pass_rate_change": self.rate.as_dict() if self.rate else None,
                "scenarios": [{"scenario": r.scenario, "role": r.role, "trials_without": r.without,
                               "trials_with": r.with_rule, "verdict": r.verdict, "pass_rate_change": r.rate.as_dict() if r.rate else None,
                               **figures(r.ratios)} for r in self.rows]}


def _figures(side: Side) -> dict[str, list[float]]:
    return {name: [float(get(t)) for t in side.scored] for name, get in METRICS.items()}


def _pairs(result: GateResult) -> list[tuple[str, Side, Side]]:
    """(role, without, with) of every scenario whose both sides have scored trials."""
    out = [("own", result.before, result.after)] if result.before and result.after else []
    out += [("suite", e.baseline, e.candidate) for e in result.suite if e.candidate is not None and not e.broken]
    return [(role, a, b) for role, a, b in out if a.n and b.n]


def of(result: GateResult) -> Efficiency:
    """The efficiency section of ``result``'s report."""
    eff = Efficiency(simulated=result.simulated, model_label=result.model_label)
    suite: list[tuple[dict, dict]] = []
    counts: list[tuple[int, int, int, int]] = []
    for role, without, with_rule in _pairs(result):
        a, b = _figures(without), _figures(with_rule)
        pair = (without.passes, without.n, with_rule.passes, with_rule.n)
        eff.rows.append(Row(without.scenario, role, without.n, with_rule.n,
                            {k: ratio([(a[k], b[k])]) for k in METRICS}, rate_difference([pair])))
        if role == "suite":
            suite.append((a, b))
            counts.append(pair)
    if not suite:
        return eff
    eff.pooled = {k: ratio([(a[k], b[k]) for a, b in suite]) for k in METRICS}
    eff.rate = rate_difference(counts)
    eff.verdict = verdict(eff.rate, eff.pooled)
    return eff


def verdict(rate: RateDifference | None, pooled: dict[str, Ratio | None]) -> str | None:
    """``efficient``, ``costlier``, ``mixed`` or None (see the module's docstring)."""
    if rate is None or not rate.holds:
        return None
    down = any(r is not None and r.down for r in pooled.values())
    up = any(r is not None and r.up for r in pooled.values())
    return {(True, False): "efficient", (False, True): "costlier", (True, True): "mixed"}.get((down, up))


__all__ = ["Efficiency", "METRICS", "Row", "VERDICTS", "of", "verdict"]
