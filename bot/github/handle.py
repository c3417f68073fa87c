"""Carrying out planned actions against GitHub: ``execute(actions, port, …)``.

``bot.github.events.plan`` decides what one delivery means; this module hands
each action to its feature, through a :class:`~bot.github.port.GitHubPort`,
so it never imports PyGithub or click. One module per feature:
:mod:`~bot.github.capture` (runs, rejected PRs, the incident form),
:mod:`~bot.github.gate` (the admit status), :mod:`~bot.github.distill`
(rule PRs and the threshold), :mod:`~bot.github.hits` and
:mod:`~bot.github.maintenance`; what PR writers share is
:mod:`~bot.github.pulls`. Every write is idempotent: the bot finds its own issues
and comments again by hidden marker (:func:`~bot.github.port.marker`), so
a redelivered event changes nothing and a retried run of a job comments once.

Text from payloads and logs is untrusted. It only ever reaches GitHub inside
code fences or code spans (no @mentions, links or images from a log), and
reaches ``git`` only as argv items after option-like names are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from bot.github import (
    capture,
    command_run,
    dashboard,
    distill,
    events,
    gate,
    hits,
    maintenance,
    retest,
)
from bot.github.context import (
    MAX_OPEN_RULE_PRS,
    GateRunner,
    GateVerdict,
    Outcome,
    RunContext,
    code,
)
from bot.github.gate import GATE_CONTEXT, GATE_MARKER, PrGate
from bot.github.port import GitHubError, GitHubPort
from bot.incident import capture as capture_mod


def execute(
    actions: Sequence[events.Action],
    port: GitHubPort,
    *,
    root: Path,
    settings: Any,
    llm: capture_mod.Analyst | None = None,
    payload: dict | None = None,
    gate: GateRunner | None = None,
    step_summary: Path | None = None,
    run_url: str | None = None,
    gate_pages: Path | None = None,
    distiller: Any = None,
    max_open_rule_prs: int = MAX_OPEN_RULE_PRS,
    open_prs: bool = True,
    today: date | None = None,
    config: Any = None,
    check_runs: bool = False,
) -> list[Outcome]:
    """Carry out ``actions`` in order; one that fails on GitHub becomes a ``failed`` outcome, the rest still run.

    ``payload`` is the delivery's JSON (a rejected PR's title and body come from
    it), ``gate`` runs the gate for a rule PR (default: :class:`PrGate` on
    ``root``), and ``step_summary`` is ``$GITHUB_STEP_SUMMARY``. ``distiller``
    is the model distill asks; ``gate_pages`` the folder the gate writes its JSON to, for the page; ``open_prs`` off leaves distill, hits and the
    invariant check undone (see ``replaybook github handle``). ``config`` is
    the effective :class:`bot.config.Config` (the file's, with the flags'
    overrides); by default the settings' own. ``check_runs`` says the token is a GitHub App's
    installation token: the gate is then the ``replaybook/admit`` check run (bot/github/checks.py).
    """
    ctx = RunContext(port=port, root=Path(root), settings=settings, llm=llm, payload=payload, gate=gate,
                  step_summary=step_summary, run_url=run_url, gate_pages=gate_pages, distiller=distiller,
                  max_open_rule_prs=max_open_rule_prs, open_prs=open_prs, today=today, config=config,
                  check_runs=check_runs)
    outcomes: list[Outcome] = []
    for action in actions:
        try:
            outcomes += _HANDLERS[type(action)](action, ctx)
        except GitHubError as exc:
            outcomes.append(Outcome(action.kind, "failed", code(exc.render(), 400)))
    return outcomes


# ------------------------------------------------------------------ the rest


def _pr_writer(handler: Callable[[Any, RunContext], list[Outcome]]) -> Callable[[Any, RunContext], list[Outcome]]:
    """``handler``, or a clear "not enabled" when this run may not open pull requests."""

    def run(action: Any, ctx: RunContext) -> list[Outcome]:
        if not ctx.open_prs:
            return [Outcome(action.kind, "not_implemented",
                            "not enabled: set REPLAYBOOK_OPEN_PRS=1 and give the job a GitHub App token as "
                            "GITHUB_TOKEN; PRs opened with the workflow's own token start no workflow, so the "
                            "admit gate would never run on them")]
        return handler(action, ctx)

    return run


def _ignore(action: events.Ignore, ctx: RunContext) -> list[Outcome]:
    return [Outcome(action.kind, "skipped", action.reason)]


_HANDLERS: dict[type, Callable[[Any, RunContext], list[Outcome]]] = {
    events.CaptureRun: capture.capture_run,
    events.CaptureRejectedPr: capture.capture_rejected_pr,
    events.ParseIncidentIssue: capture.parse_issue,
    events.GateRulePr: gate.gate_rule_pr,
    events.CheckPlaybookInvariants: _pr_writer(maintenance.check_invariants),
    events.Distill: _pr_writer(distill.distill),
    events.RecordHits: _pr_writer(hits.record_hits),
    events.DistillIfDue: distill.distill_if_due,
    events.UpdateDashboard: dashboard.update,
    events.DashboardTick: dashboard.act,
    events.Retest: _pr_writer(retest.run),
    events.RunCommand: command_run.run,
    events.Ignore: _ignore,
}

__all__ = ["GATE_CONTEXT", "GATE_MARKER", "GateVerdict", "Outcome", "PrGate", "execute"]
