"""Build the gate's page from its JSON (``replaybook gate --json``) and its run folders, and render it.

The page is one self-contained HTML file: inline CSS, no script, no request at load (its CSP says so),
expand controls made of ``<details>``. Every string on it comes from a gate and its runs, so every one is
hostile: the template escapes it (autoescape) after the host's redactor has replaced each secret this
process knows (``bot._util.credentials.host_redactor``, the one the CLI's output and the GitHub posts use).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict, ValidationError

from bot._util.credentials import Redactor
from bot.errors import BadInput
from bot.gate.report import anchor
from bot.scenario import suite as suite_mod
from bot.view import run_folder
from bot.view.run_folder import RunView

ARMS = {"without": "without the rule", "with": "with the rule"}


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TrialDoc(_Doc):
    trial: int
    verdict: str
    reason: str = ""
    run_dir: str | None = None
    delivered: bool | None = None
    turns: float | None = None
    tokens: float | None = None
    cost_usd: float | None = None


class SideDoc(_Doc):
    scenario: str
    passed: int = 0
    scored: int = 0
    unscored: int = 0
    not_delivered: int = 0
    outcome: str = ""
    interval95: list[float] = [0.0, 1.0]
    trials: list[TrialDoc] = []


class SuiteDoc(_Doc):
    scenario: str
    task_type: str | None = None
    judged: bool = True
    regressed: bool = False
    broken: bool = False
    note: str = ""
    baseline: SideDoc | None = None
    with_rule: SideDoc | None = None


class GateDoc(_Doc):
    """The parts of ``bot.gate.report.as_json`` the page reads."""

    rule: str
    decision: str
    reason: str = ""
    rule_text: str = ""
    provisional: bool = False
    simulated: bool = False
    model_label: str = ""
    own_test: str | None = None
    screen: list[SideDoc | None] = []
    before: SideDoc | None = None
    after: SideDoc | None = None
    suite: list[SuiteDoc] = []
    regressions: list[str] = []
    cost_usd: float = 0.0
    model_calls: int = 0
    replays: int = 0
    cache_hits: int = 0
    speculative_replays: int = 0
    fresh_replays: int | None = None
    tokens: int | None = None
    warnings: list[str] = []
    flags: dict[str, list[str]] = {}
    efficiency: dict[str, Any] = {}
    by_task_type: list[dict[str, Any]] = []
    more_replays: float | None = None


@dataclass
class Trial:
    scenario: str
    arm: str  # "without" | "with" | "screen-without" | "screen-with"
    doc: TrialDoc
    anchor: str
    run: RunView | None = None


@dataclass
class Arm:
    name: str
    label: str
    side: SideDoc | None
    trials: list[Trial] = field(default_factory=list)


@dataclass
class ScenarioView:
    id: str
    role: str  # "own" | "suite" | "screen"
    anchor: str
    verdict: str
    note: str
    arms: list[Arm]
    pair: tuple[Trial | None, Trial | None] = (None, None)


@dataclass
class Page:
    gate: GateDoc
    scenarios: list[ScenarioView]
    delivered: tuple[int, int]  # trials with the rule whose rule reached the agent, of those watched
    runs_root: str
    kept: int  # trials whose run folder was found


def load_gate(path: Path, redactor: Redactor, agent: str | None = None) -> GateDoc:
    """The gate's JSON at ``path``, secrets redacted; a per-agent gate's one agent (``agent``, else its only one)."""
    try:
        data = json.loads(redactor.text(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}: not a gate's JSON ({exc}); write one with `replaybook gate RULE --json > FILE`")
    if isinstance(data, dict) and isinstance(data.get("agents"), dict) and "rule" not in data:
        names = sorted(data["agents"])
        if agent is None and len(names) == 1:
            agent = names[0]
        if agent not in data["agents"]:
            raise BadInput(f"{path}: a gate of {len(names)} agents ({', '.join(names)}); name one with --agent")
        data = data["agents"][agent]
    try:
        return GateDoc.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "top level"
        raise BadInput(f"{path}: field `{where}`: {first.get('msg')}; the page reads `replaybook gate --json` "
                       "output as it is") from None


def build(gate: GateDoc, runs_root: Path | None, suite: Path | None, redactor: Redactor) -> Page:
    """The page's model: every scenario's arms and trials, each trial's run folder read when it is kept."""
    loaded = {s.scenario.id: s for s in suite_mod.load(suite).scenarios} if suite else {}
    views: list[ScenarioView] = []
    if gate.before or gate.after:
        own = (gate.before or gate.after).scenario
        views.append(_scenario(own, "own", gate.before, gate.after, _own_verdict(gate), gate.own_test or ""))
    if len(gate.screen) == 2 and gate.screen[0] and gate.screen[1]:
        views.append(_scenario(gate.screen[0].scenario, "screen", gate.screen[0], gate.screen[1],
                               "screen", "with a cheaper model, before the full gate", prefix="screen-"))
    for e in gate.suite:
        verdict = "regressed" if e.regressed else "broken" if e.broken else "ok" if e.judged else "not judged"
        views.append(_scenario(e.scenario, "suite", e.baseline, e.with_rule, verdict, e.note))
    kept = 0
    for view in views:
        for arm in view.arms:
            for trial in arm.trials:
                path = run_folder.locate(runs_root, trial.doc.run_dir)
                if path is not None:
                    trial.run = run_folder.read(path, loaded.get(view.id), redactor)
                    kept += 1
        view.pair = _pair(view)
    watched = [t.doc.delivered for v in views for a in v.arms for t in a.trials if t.doc.delivered is not None]
    return Page(gate, views, (sum(1 for d in watched if d), len(watched)), str(runs_root or ""), kept)


def _own_verdict(gate: GateDoc) -> str:
    """The own scenario's verdict: fixed when the gate admitted, or when both sides' tests held (failing without
    the rule, passing with it: a rule rejected for a regression elsewhere); else what its sides show."""
    before, after = gate.before, gate.after
    if gate.decision == "admit" or (before and after and before.outcome == after.outcome == "pass"):
        return "fixed"
    if before and before.passed and before.outcome != "pass":
        return "passes without"
    return "not fixed" if after and after.scored else "not run with"


def _scenario(sid: str, role: str, without: SideDoc | None, with_rule: SideDoc | None, verdict: str, note: str,
              prefix: str = "") -> ScenarioView:
    arms = []
    for name, side in (("without", without), ("with", with_rule)):
        arm = Arm(prefix + name, ARMS[name], side)
        arm.trials = [Trial(sid, prefix + name, t, anchor(sid, prefix + name, t.trial)) for t in (side.trials if side else [])]
        arms.append(arm)
    return ScenarioView(sid, role, anchor(sid) + ("-screen" if prefix else ""), verdict, note, arms)


def _pair(view: ScenarioView) -> tuple[Trial | None, Trial | None]:
    """The pair that tells the scenario's story: a trial failing without the rule beside one passing with it
    (a regression: passing without, failing with); else the first of each arm."""
    without, with_rule = view.arms[0].trials, view.arms[1].trials
    want = ("passed", "failed") if view.verdict == "regressed" else ("failed", "passed")

    def first(trials: list[Trial], verdict: str) -> Trial | None:
        return next((t for t in trials if t.doc.verdict == verdict and t.run), None) or \
            next((t for t in trials if t.run), None) or (trials[0] if trials else None)

    return first(without, want[0]), first(with_rule, want[1])


@jinja2.pass_context
def _redacted(context, value):
    """Every value the template prints goes through the page's redactor before autoescape; Markup is what the
    template made itself (a macro's output, whose values came through here already)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return context["redact"](value)
    return value


_env = jinja2.Environment(loader=jinja2.PackageLoader("bot.view", "templates"), autoescape=True,
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=_redacted)


def render(page: Page, redactor: Redactor) -> str:
    """The page's HTML; the redactor is applied to every value before it is escaped."""
    text = _env.get_template("page.html.j2").render(p=page, g=page.gate, pct=_pct, rate=_rate, ratio=_ratio,
                                                     points=_points, anchor=anchor, arms=ARMS, redact=redactor.text)
    return redactor.text(text)  # a second pass: nothing the template itself wrote holds a secret either


def _pct(side: SideDoc | None) -> str:
    if side is None or not side.scored:
        return "–"
    low, high = (side.interval95 + [0.0, 1.0])[:2]
    return f"{side.passed}/{side.scored} · {side.passed / side.scored:.0%} (95% {low:.0%}–{high:.0%})"


def _rate(d: dict | None) -> str:
    if not d or not d.get("scored"):
        return "–"
    return f"{d.get('passed')}/{d.get('scored')} ({(d.get('rate') or 0):.0%})"


def _points(d: dict | None) -> str:
    if not d or d.get("difference") is None:
        return "–"
    low, high = (list(d.get("interval95") or []) + [None, None])[:2]
    span = f", 95% {low * 100:+.0f} to {high * 100:+.0f}" if low is not None and high is not None else ""
    return f"{d['difference'] * 100:+.0f} points{span}"


_UNITS = {"turns": "{:g}", "tokens": "{:,.0f}", "cost_usd": "${:.4f}"}


def _ratio(d: dict | None, metric: str) -> tuple[str, str]:
    """(median without → median with, ×ratio and its 95% interval)."""
    if not d or d.get("ratio") is None:
        return "–", ""
    unit = _UNITS.get(metric, "{}")
    span = d.get("interval95")
    span = f"95% {span[0]:.2f}–{span[1]:.2f}" if span else "too few trials for an interval"
    return f"{unit.format(d.get('median_without', 0))} → {unit.format(d.get('median_with', 0))}", \
        f"×{d['ratio']:.2f}, {span}"


__all__ = ["GateDoc", "Page", "build", "load_gate", "render"]
