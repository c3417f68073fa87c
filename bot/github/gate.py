"""The admit gate on GitHub: every PR and merge group gets ``replaybook/admit``, a check run or a status.

The gate itself is :class:`bot.gate.pull_request.PrGate`: it judges the checked-out PR against its base
commit and returns a verdict. This module only posts that verdict (:func:`gate_rule_pr`): the check run with a
GitHub App's token (:mod:`bot.github.checks`, its annotations read from what the verdict rests on), else the
status; one comment edited in place, ending with the PR's gate ledger (:mod:`bot.github.ledger`); and the job
summary.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from bot._util.credentials import host_redactor
from bot.errors import ReplaybookError
from bot.gate import report as gate_report
from bot.gate.agents import PerAgent
from bot.gate.agents import as_json as _agents_json
from bot.gate.pull_request import PrGate
from bot.gate.verdict import GateVerdict
from bot.github import checks, ledger
from bot.github.context import Outcome, RunContext, Status, fenced
from bot.github.events import GateRulePr
from bot.github.port import GitHubError, fit_body, marker
from bot.incident import capture as capture_mod

GATE_CONTEXT = "replaybook/admit"
GATE_MARKER = marker("gate")
SUMMARY_LIMIT = 1 << 20  # GitHub's cap on one step summary
RULE_FILE_ID = re.compile(r"^rule-[0-9]{4,}$")  # the only file names the page folder holds


def gate_rule_pr(action: GateRulePr, ctx: RunContext) -> list[Outcome]:
    where = f"PR #{action.number}" if action.number else f"merge group {action.head_sha[:12]}"
    # Every PR comes here: the gate passes at once when nothing agents are told changes, and answers
    # error (never success) when a replay is needed but this run has no secrets (a fork).
    runner = ctx.gate or PrGate(ctx.root, ctx.settings)
    try:
        verdict = runner(action)
    except ReplaybookError as exc:
        verdict = GateVerdict("error", f"the gate could not decide: {exc.message}",
                              f"## Replaybook gate: could not decide\n\n{fenced(exc.render())}\n")
    if ctx.gate_pages is not None:
        verdict = _with_page(verdict, ctx)
    redact = host_redactor()  # whatever a scenario made the harness say, no secret of ours leaves in it
    verdict = dataclasses.replace(verdict, description=redact.text(verdict.description), report=redact.text(verdict.report))
    description = capture_mod.one_liner(verdict.description, 140)
    if ctx.step_summary is not None:  # first: a fork PR's read-only token fails the writes below
        with open(ctx.step_summary, "a", encoding="utf-8") as f:
            f.write(verdict.report[: SUMMARY_LIMIT // 2] + "\n")
    # the bot's own gate comment only: its ledger says whether an earlier gate of this PR was inconclusive
    earlier = ctx.port.find_comment_by_marker(action.number, GATE_MARKER) if action.number is not None else None
    undecided = earlier is not None and any(r.decision == "inconclusive" for r in ledger.read(earlier.body, action.number)[0])
    url = _report_check(action, ctx, verdict, description, undecided)
    if action.number is not None:
        comment = _report_comment(action.number, ctx, verdict, earlier)
        url = url or comment
    status: Status = "failed" if verdict.state == "error" else "done"
    return [Outcome(action.kind, status, f"{where}: {verdict.state}: {description}", url, verdict=verdict.state)]


PAGE_ARTIFACT = "replaybook-gate-page"  # the admit action uploads `replaybook view`'s page under this name


def _with_page(verdict: GateVerdict, ctx: RunContext) -> GateVerdict:
    """Write each judged rule's gate JSON under ``ctx.gate_pages`` (``replaybook view`` makes the page from it, and
    the admit action uploads it), and end the report with a link to the run's artifacts."""
    written = 0
    for judged in verdict.judged:
        doc = (_agents_json if isinstance(judged.result, PerAgent) else gate_report.as_json)(judged.result)
        rule_id = str(doc.get("rule") or Path(judged.rule_file).stem)
        if not RULE_FILE_ID.match(rule_id):
            continue
        ctx.gate_pages.mkdir(parents=True, exist_ok=True)
        (ctx.gate_pages / f"{rule_id}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
        written += 1
    if not written or not ctx.run_url:
        return verdict
    link = (f"\n📄 **The gate's page**, every trial without and with the rule side by side: the artifact "
            f"`{PAGE_ARTIFACT}` of [this run]({ctx.run_url}#artifacts) (download it and open `index.html`).\n")
    return dataclasses.replace(verdict, report=verdict.report.rstrip("\n") + "\n" + link)


def _report_check(action: GateRulePr, ctx: RunContext, verdict: GateVerdict, description: str,
                  undecided_before: bool = False) -> str | None:
    """The ``replaybook/admit`` check run with an App token, else (or when GitHub refuses it) the status.

    ``undecided_before``: an earlier gate of this PR was inconclusive, so it may have left a pending status."""
    if ctx.check_runs:
        try:
            url = ctx.port.create_check_run(checks.check_run(verdict, action.head_sha, ctx.run_url, GATE_CONTEXT))
            if verdict.state != "inconclusive" and not undecided_before:
                return url
            # A neutral check run passes a required check, so an inconclusive gate also sets a pending status of the
            # same name: GitHub requires both. The next gate that decides sets that status again, to its verdict.
            ctx.port.set_status(action.head_sha, checks.status_state(verdict.state), GATE_CONTEXT, description,
                                ctx.run_url)
            return url
        except GitHubError as exc:
            if exc.status not in (403, 404):
                raise  # 403/404: the token is not an App's after all; the status below still meets the rule
    ctx.port.set_status(action.head_sha, checks.status_state(verdict.state), GATE_CONTEXT, description, ctx.run_url)
    return None


def _report_comment(number: int, ctx: RunContext, verdict: GateVerdict, earlier) -> str:
    """The gate comment, edited in place, ending with the PR's gate ledger: the earlier gates' records (``earlier``,
    the bot's own gate comment, or None) and this one's."""
    records = ledger.read(earlier.body, number)[0] if earlier is not None else []
    parts = {"report": verdict.report}
    if records or verdict.records:
        parts["ledger"] = ledger.block(number, [*records, *verdict.records])
    return ctx.port.upsert_comment(number, GATE_MARKER, fit_body(parts, trim_first=("report",))).url


__all__ = ["GATE_CONTEXT", "GATE_MARKER", "PrGate", "gate_rule_pr"]
