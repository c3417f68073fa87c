"""The gate's result per task type: a rule that helps one kind of task and hurts another shows both.

Each scenario counts under its ``task_type`` (scenario.yaml; ``untyped`` when it has none): the rule's own
scenario (without the rule, with it) and every suite scenario (its baseline, with the rule). A type's pass
rate on each side is the mean of its scenarios' rates, so a scenario the suite test stopped early on weighs
as much as one it ran long on; its change is the mean of its scenarios' differences with a MOVER-Wilson 95%
interval (``bot.gate.intervals.rate_difference``), over the scenarios that ran both ways. A type whose
interval lies below 0 is flagged as dropping, even when no single scenario regressed and the suite passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.gate.intervals import RateDifference, rate_difference
from bot.gate.result import GateResult, Side

UNTYPED = "untyped"


@dataclass
class TypeRow:
    task_type: str
    scenarios: list[str] = field(default_factory=list)
    without: list[Side] = field(default_factory=list)  # each scenario's side without the rule (n may be 0)
    with_rule: list[Side] = field(default_factory=list)
    change: RateDifference | None = None

    @staticmethod
    def _mean(sides: list[Side]) -> float | None:
        rates = [s.passes / s.n for s in sides if s.n]
        return sum(rates) / len(rates) if rates else None

    @property
    def rate_without(self) -> float | None:
        return self._mean(self.without)

    @property
    def rate_with(self) -> float | None:
        return self._mean(self.with_rule)

    @property
    def trend(self) -> str:
        """``drops``, ``rises`` (the interval excludes 0) or ``""``."""
        if self.change is None:
            return ""
        return "drops" if self.change.high < 0 else "rises" if self.change.low > 0 else ""

    def as_dict(self) -> dict:
        count = (lambda sides: {"passed": sum(s.passes for s in sides), "scored": sum(s.n for s in sides),
                                "rate": self._mean(sides)})
        return {"task_type": self.task_type, "scenarios": self.scenarios, "without": count(self.without),
                "with_rule": count(self.with_rule), "change": self.change.as_dict() if self.change else None,
                "trend": self.trend}


def breakdown(result: GateResult) -> list[TypeRow]:
    """One row per task type the gate replayed, in the order first met (the own scenario's first)."""
    rows: dict[str, TypeRow] = {}

    def add(task_type: str | None, without: Side, with_rule: Side | None) -> None:
        row = rows.setdefault(task_type or UNTYPED, TypeRow(task_type or UNTYPED))
        row.scenarios.append(without.scenario)
        row.without.append(without)
        row.with_rule.append(with_rule or Side("with rule", without.scenario))

    if result.before is not None:
        add(result.own_task_type, result.before, result.after)
    for entry in result.suite:
        if not entry.broken:
            add(entry.task_type, entry.baseline, entry.candidate)
    for row in rows.values():
        row.change = rate_difference([(a.passes, a.n, b.passes, b.n) for a, b in zip(row.without, row.with_rule)])
    return list(rows.values())


def dropping(rows: list[TypeRow]) -> list[TypeRow]:
    return [r for r in rows if r.trend == "drops"]


__all__ = ["TypeRow", "UNTYPED", "breakdown", "dropping"]
