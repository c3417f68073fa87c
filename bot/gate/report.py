"""The gate's report: markdown a reviewer reads in a minute, and JSON for machines."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import jinja2

from bot._util.text_safety import neutralise
from bot.gate import efficiency as efficiency_mod
from bot.gate import task_types as task_types_mod
from bot.gate.decision import GateResult, Side
from bot.gate.intervals import Ratio, RateDifference
from bot.gate.stats import SequentialTest

_templates = jinja2.Environment(loader=jinja2.PackageLoader("bot.gate", "templates"), keep_trailing_newline=True,
                                trim_blocks=True, undefined=jinja2.StrictUndefined, autoescape=False)
_templates.filters["neutral"] = neutralise  # rule texts and reasons are untrusted: no mention, link or marker


def _pct(side: Side) -> str:
    if side.n == 0:
        return "–"
    low, high = side.interval
    return f"{side.passes / side.n:.0%} ({low:.0%}–{high:.0%})"


def _cell(text: str) -> str:
    """Text that stays in one table cell: no line breaks, no column bars."""
    return " ".join(text.split()).replace("|", "\\|")[:300]


_UNITS = {"turns": "{:g}", "tokens": "{:,.0f}", "cost_usd": "${:.4f}"}
_MARKS = {"efficient": "⚡ **Efficient**", "costlier": "💸 **Costlier**", "mixed": "↔️ **Mixed cost**"}


def _ratio(r: Ratio | None, metric: str) -> str:
    """``median without → median with (×ratio, 95% low–high)``; ``–`` where the figure is not measured."""
    if r is None:
        return "–"
    unit = _UNITS[metric]
    span = "too few trials for a 95% interval" if r.low is None else f"95% {r.low:.2f}–{r.high:.2f}"
    return f"{unit.format(r.without)} → {unit.format(r.with_rule)} (×{r.estimate:.2f}, {span})"


def _points(d: RateDifference | None) -> str:
    """A pass-rate change in percentage points, with its 95% interval."""
    if d is None:
        return "–"
    return f"{d.estimate * 100:+.0f} points, 95% {d.low * 100:+.0f} to {d.high * 100:+.0f}"


def _rate(sides: list[Side], rate: float | None) -> str:
    n = sum(s.n for s in sides)
    return "–" if not n or rate is None else f"{sum(s.passes for s in sides)}/{n} ({rate:.0%})"


def anchor(scenario: str, arm: str | None = None, trial: int | None = None) -> str:
    """The gate page's anchor (``bot.view``) of a scenario (``scenario-<id>``) or of one of its trials
    (``trial-<id>-<arm>-<n>``, arm ``without`` or ``with``): the page and the markdown's links share it."""
    slug = re.sub(r"[^a-z0-9._-]", "-", str(scenario).lower())[:80] or "-"
    return f"scenario-{slug}" if arm is None else f"trial-{slug}-{arm}-{int(trial or 0)}"


def _linker(page_url: str | None):
    """``link(text, target)``: ``text`` as a markdown link to ``#target`` on the gate's page at ``page_url``;
    ``text`` as it is when no page URL is known."""
    base = quote(page_url.split("#")[0], safe=":/?&=%@+,;~") if page_url else None
    return lambda text, target: f"[{text}]({base}#{target})" if base else text


def markdown(result: GateResult, test: SequentialTest, page_url: str | None = None) -> str:
    """The report; with ``page_url`` (the page ``replaybook view`` writes), each line links to its place there."""
    template = _templates.get_template("gate_report.md.j2")
    text = template.render(r=result, test=result.own_test or test.describe(), pct=_pct, cell=_cell,
                           link=_linker(page_url), anchor=anchor,
                           eff=efficiency_mod.of(result), types=task_types_mod.breakdown(result), ratio=_ratio,
                           points=_points, rate=_rate, metrics=list(efficiency_mod.METRICS), marks=_MARKS)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip() + "\n"


def _side(side: Side | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {"scenario": side.scenario, "passed": side.passes, "scored": side.n, "unscored": side.unscored,
            "not_delivered": side.undelivered, "outcome": side.outcome, "interval95": list(side.interval),
            "trials": [{"trial": t.trial, "verdict": t.verdict, "reason": t.reason, "run_dir": t.run_dir,
                        "delivered": t.delivered, **{name: get(t) for name, get in efficiency_mod.METRICS.items()}}
                       for t in side.trials]}


def as_json(result: GateResult) -> dict[str, Any]:
    return {
        "rule": result.rule_id, "decision": result.decision, "reason": result.reason, "rule_text": result.rule_text,
        "provisional": result.provisional, "simulated": result.simulated,
        **({"model_label": result.model_label, "tokens": result.tokens} if result.model_label else {}),
        "own_test": result.own_test, "own_task_type": result.own_task_type,
        "screen": [_side(s) for s in result.screen],
        "before": _side(result.before), "after": _side(result.after),
        "suite": [{"scenario": e.scenario, "task_type": e.task_type, "judged": e.judged, "regressed": e.regressed, "broken": e.broken,
                   "note": e.note, "baseline": _side(e.baseline), "with_rule": _side(e.candidate),
                   "reach": None if e.reach_bound is None else {"baseline_trials": e.reach_trials, "touched": 0,
                                                                 "harm_bound95": round(e.reach_bound, 6)}}
                  for e in result.suite],
        "not_replayed_by_reach": [{"scenario": e.scenario, "baseline_trials": e.reach_trials,
                                   "harm_bound95": round(e.reach_bound, 6)}
                                  for e in result.suite if e.reach_bound is not None],
        "regressions": [e.scenario for e in result.regressions],
        "suite_incomplete": [e.scenario for e in result.broken],
        "cost_usd": result.cost_usd, "model_calls": result.model_calls, "replays": result.replays,
        "cache_hits": result.cache_hits, "speculative_replays": result.speculative,
        "speculative_cost_usd": result.speculative_cost_usd, "traces": result.traces, "admitted": result.admitted,
        "warnings": result.warnings, "flags": result.flags, "twins_by": result.twins_by, "fresh_replays": result.fresh_replays,
        "more_replays": result.more_replays, "most_replays": result.most_replays,
        "undecided": [e.scenario for e in result.undecided],
        "efficiency": efficiency_mod.of(result).as_dict(),
        "by_task_type": [row.as_dict() for row in task_types_mod.breakdown(result)],
        "scope_cost": result.scope_cost,
    }


__all__ = ["anchor", "as_json", "markdown"]
