"""Distill on GitHub: the open incident issues become rule PRs, and the threshold starts distill.

The incidents are read from the issues into memory (``gh-N`` ids: the rule
PR closes them); distill plans its proposals as a change and writes nothing;
each proposal's PR carries exactly what admitting it locally would write to
``rules/`` and ``archive/`` (:func:`bot.playbook.transitions.admission`), plus its
new scenario. PLAYBOOK.md is left to the maintenance PR: two rule PRs would
always conflict there.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Any

from bot._util import yamlfile
from bot._util.text_safety import neutralise
from bot.change import Change
from bot.distill import refusals as refusals_mod
from bot.distill.refusals import Refused
from bot.errors import BadInput
from bot.github import issue_form
from bot.github.context import Outcome, RunContext, code, fenced
from bot.github.events import Distill, DistillIfDue
from bot.github.port import IssueRef, fit_body, marker
from bot.github.pulls import (
    bot_logins,
    citable,
    cites_of,
    is_rule_pr,
    open_pr,
    pr_url,
    refresh_pr,
    rule_id_of,
)
from bot.incident import capture as capture_mod
from bot.incident.store import Incident, IncidentSet
from bot.playbook import transitions as playbook_changes


def distill(action: Distill, ctx: RunContext) -> list[Outcome]:
    """Distill the open incident issues; one PR per proposed rule, an open PR citing the same incidents updated."""
    if ctx.distiller is None:
        return [Outcome(action.kind, "failed", "error: distill needs a model: set ANTHROPIC_API_KEY (and "
                                               "ANTHROPIC_BASE_URL for a proxy) in the job's env")]
    from bot.distill import plan as distill_mod

    prs = ctx.port.list_prs("all")
    rule_prs = [p for p in prs if rule_id_of(p, bot_logins(ctx))]
    incidents, unreadable = incidents_from_issues(ctx)
    refused = gate_refusals(ctx, rule_prs, {i.id for i in incidents.read().incidents})
    report = distill_mod.plan(ctx.settings, ctx.distiller, today=ctx.today, incidents=incidents,
                              reserved_ids={rule_id_of(p) for p in rule_prs}, refused=refused)
    by_id = {r.rule_id: r for r in refused}
    outcomes: list[Outcome] = []
    held: list[str] = []
    used = {p.head_ref for p in prs}
    open_count = sum(p.state == "open" for p in rule_prs)
    base = from_sha = None
    for proposal in report.proposals:
        cites = set(proposal.cites)
        current = next((p for p in rule_prs if p.state == "open" and cites & cites_of(p)), None)
        if current is not None:
            # The same incidents again: the open PR is brought up to date, under its own id.
            rule_id = rule_id_of(current)
            body, files = _rule_pr(proposal, rule_id, ctx)
            changed = refresh_pr(ctx, current, body, files, f"Update {rule_id}")
            outcomes.append(Outcome(action.kind, "done" if changed else "unchanged",
                                    f"{rule_id}: {'updated' if changed else 'already current in'} PR "
                                    f"#{current.number}", pr_url(current)))
            continue
        # A closed rule PR covering these incidents holds them back, unless this proposal answers its gate refusal.
        closed = next((p for p in rule_prs if p.state == "closed" and not p.merged and cites <= cites_of(p)
                       and rule_id_of(p) not in proposal.replaces), None)
        if closed is not None:
            outcomes.append(Outcome(action.kind, "skipped", f"{proposal.id}: PR #{closed.number} proposed a rule for "
                                    "these incidents and was closed without merging; no new incident cites them, so "
                                    "no PR was opened", pr_url(closed)))
            continue
        if open_count >= ctx.max_open_rule_prs:
            held.append(proposal.id)
            continue
        if base is None:
            base, from_sha = ctx.port.default_branch(), ctx.port.default_branch_sha()
        body, files = _rule_pr(proposal, proposal.id, ctx, [by_id[r] for r in proposal.replaces if r in by_id])
        pr = open_pr(ctx, proposal.id, f"Rule {proposal.id}: {neutralise(capture_mod.one_liner(proposal.rule, 120))}",
                      body, files, base, from_sha, used)
        used.add(pr.head_ref)
        open_count += 1
        outcomes.append(Outcome(action.kind, "done", f"{proposal.id}: opened PR #{pr.number}", pr_url(pr)))
    outcomes.append(Outcome(action.kind, "done" if report.proposals else "unchanged",
                            _distill_summary(report, held, unreadable, ctx)))
    return outcomes


def gate_refusals(ctx: RunContext, rule_prs: list[Any], open_incidents: set[str]) -> list[Refused]:
    """The closed, unmerged rule PRs whose last gate refused the rule, each with the gate's reason.

    The reason is read from the bot's own gate comment on the PR (its ledger block, read strictly: a block in
    anyone else's comment never counts). A PR closed with no gate record, or whose last gate admitted it or
    failed on infrastructure, is a person's decision: it is not here, and distill skips its incidents as before.
    ``reproposals``: the other gate-refused closed PRs sharing a cite (the re-proposals already made). Only PRs
    citing an open incident are read (one request each): the others have nothing left to distill.
    The refused rule's scope is the one the gate recorded in the same block (hostile text: only ever shown
    defused); a block from before the gate recorded it leaves the scope unknown (see ``refusals.narrower``).
    """
    from bot.github import ledger as gh_ledger
    from bot.github.gate import GATE_MARKER

    found: list[tuple[Any, Any]] = []
    for pr in rule_prs:
        if pr.state != "closed" or pr.merged or not cites_of(pr) & open_incidents:
            continue
        comment = ctx.port.find_comment_by_marker(pr.number, GATE_MARKER)  # the bot's own only
        records = gh_ledger.read(comment.body, pr.number)[0] if comment is not None else []
        mine = [r for r in records if r.rule_id == rule_id_of(pr)]
        if mine and refusals_mod.retryable(mine[-1]):
            found.append((pr, mine[-1]))
    out = []
    for pr, record in found:
        cites = cites_of(pr)
        others = sum(bool(cites & cites_of(p)) for p, _ in found if p.number != pr.number)
        detail = record.detail
        text = (detail.rule_text if detail is not None else "") or pr.title.split(": ", 1)[-1]
        known = detail is not None and detail.task_types is not None and detail.paths is not None
        out.append(Refused(record.rule_id, text, tuple(sorted(cites)), record.reason_kind, record.reason,
                           tuple(detail.task_types) if known else None, tuple(detail.paths) if known else None,
                           reproposals=others, pr=pr.number))
    return out


def incidents_from_issues(ctx: RunContext) -> tuple[IncidentSet, list[int]]:
    """The open incident issues as ``gh-N`` incidents, in memory, and the numbers that do not parse.

    An issue labelled invalid, or one whose form does not parse, is left out
    (the issue itself says what to fix); one the bot filed is read from its
    yaml block. The id is always ``gh-<number>``: the rule PR closes it.
    """
    found: list[Incident] = []
    unreadable: list[int] = []
    for issue in ctx.port.list_issues(ctx.labels.incident, "open"):
        incident = _incident_of(issue, ctx)
        if incident is None:
            unreadable.append(issue.number)
        else:
            found.append(incident)
    return IncidentSet(found, "the open incident issues"), unreadable


def _incident_of(issue: IssueRef, ctx: RunContext) -> Incident | None:
    if ctx.labels.invalid in issue.labels:
        return None
    created = issue.created or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    data, problems = issue_form.parse_incident_issue(issue.body, number=issue.number, created_at=created,
                                                     html_url=issue.url or None)
    if problems:
        return None
    data = {**data, "id": f"gh-{issue.number}"}
    try:
        return Incident.model_validate(data)
    except ValueError:
        return None


def _distill_summary(report: Any, held: list[str], unreadable: list[int], ctx: RunContext) -> str:
    parts = [f"{len(report.groups)} group(s), {len(report.proposals)} proposal(s), "
             f"{sum(r.what == 'refused' for r in report.refusals)} refused"]
    if report.simulated:
        parts.insert(0, "SIMULATED model")
    elif getattr(report, "model_label", ""):
        parts.insert(0, f"{report.model_label} ($0)")
    refused = [r for r in report.refusals if r.what in ("refused", "failed")]
    if refused:
        parts.append("why: " + code(" | ".join(f"{r.group}: {r.reason}" for r in refused), 600))
    if unreadable:
        parts.append("left out (invalid form): " + ", ".join(f"#{n}" for n in unreadable))
    if report.failed:
        parts.append(f"{report.failed} model call(s) failed")
    if report.spec_changes:
        parts.append(f"{len(report.spec_changes)} spec change(s) proposed but not opened as PRs: "
                     + ", ".join(s.id for s in report.spec_changes))
    if report.standing:
        parts.append(f"refusal stands ({refusals_mod.MAX_REPROPOSALS} re-proposals made): "
                     + ", ".join(report.standing))
    if held:
        parts.append(f"held back by the cap of {ctx.max_open_rule_prs} open rule PRs "
                     f"(github.max_open_rule_prs): {', '.join(held)}")
    return "distill: " + "; ".join(parts)


def _rule_pr(proposal: Any, rule_id: str, ctx: RunContext, answers: list[Refused] = ()) -> tuple[str, Change]:
    """The PR body and files for a proposal admitted as ``rule_id``.

    The files are what merging must change for the admission to be whole:
    the rule under ``rules/``, any new scenario, and, when the playbook is at
    its cap, the coldest rule moved to ``archive/``. PLAYBOOK.md is not in
    it (two rule PRs would always conflict there); the push after the merge
    re-renders it through the maintenance PR.
    """
    settings = ctx.settings
    folder = settings.config.paths.playbook.strip("/")
    files = admission_change(ctx, proposal, rule_id)
    cites = [c for c in proposal.cites if citable(c)]
    marks = "\n".join([marker(rule_id), *(marker(f"cite:{c}") for c in cites)])
    closes = [f"Closes #{c[3:]}" for c in cites if re.fullmatch(r"gh-\d+", c)]
    retired = sorted(p.rsplit("/", 1)[-1].removesuffix(".yaml") for p in files.only(f"{folder}/archive/").writes)
    scenario_line = (f"a new scenario, {code(proposal.scenario, 120)}, added by this PR" if proposal.new_scenario
                     else f"the existing scenario {code(proposal.scenario, 120)}")
    summary = "\n".join([
        f"## Proposed rule {rule_id}" + (" (provisional: one incident)" if proposal.provisional else ""),
        "", fenced(proposal.rule), "",
        f"**Cites** ({len(proposal.cites)} incident(s)):", *(f"- {code(c, 120)}" for c in proposal.cites), "",
        f"**Replay:** {scenario_line}. To replay it locally: "
        f"`replaybook gate {folder}/rules/{rule_id}.yaml` (add `--model` and ANTHROPIC_API_KEY for the real model).",
        *(["", "**Re-proposed** after the gate refused " + "; ".join(
            f"PR #{r.pr} ({r.rule_id}, {r.reason_kind}): {code(refusals_mod.defused(r.reason, 300), 320)}"
            for r in answers)
           + ". That PR stays closed."] if answers else []),
        *(["", f"**At the cap of {settings.cap}:** merging also retires the coldest rule(s) to archive/: "
           + ", ".join(retired) + "."] if retired else []),
        "",
        "Merging this PR admits the rule. The `replaybook/admit` status replays the scenario with and without the "
        "rule and decides. Close the PR to refuse it; distill opens another only when new incidents come.",
        *(["", *closes] if closes else []),
    ])
    return fit_body({"marker": marks, "summary": summary}), files


def admission_change(ctx: RunContext, proposal: Any, rule_id: str) -> Change:
    """What merging the rule PR for ``proposal`` changes: the planner's admission, less what a PR leaves out.

    It is :func:`bot.playbook.transitions.admission` on the checkout, the same
    value a local ``gate --admit`` applies, restricted to ``rules/`` and
    ``archive/`` (the incidents are issues the PR closes; PLAYBOOK.md is the
    maintenance PR's), plus the proposal's new scenario. A base whose playbook
    does not load gets the rule file alone: the gate and the invariant check say
    what is broken.
    """
    from bot import config as config_mod

    settings = ctx.settings
    book = config_mod.playbook(settings, root=ctx.root)
    folder = book.rel
    proposed = f"{folder}/proposed/{proposal.id}.yaml"
    text = proposal.files.files[proposed]
    target = f"{folder}/rules/{rule_id}.yaml"
    try:
        planned = playbook_changes.admission(book, ctx.root / target, text, rule_id=rule_id,
                                           on=ctx.today or date.today(), scenario_checked=proposal.new_scenario)
        admitted = planned.change.only(f"{folder}/rules/", f"{folder}/archive/")
    except BadInput:
        admitted = Change({target: yamlfile.set_top_level(text, "id", rule_id)})
    return admitted | proposal.files.without(f"{folder}/")


def distill_if_due(action: DistillIfDue, ctx: RunContext) -> list[Outcome]:
    """Dispatch distill when this delivery's new incidents brought the undistilled ones to the threshold.

    Undistilled: open incident issues that parse and that no open rule PR
    cites. Only the delivery that crosses the threshold dispatches, so twenty
    more incidents while distill is refused start it once, not twenty times
    (the weekly schedule picks them up).
    """
    if ctx.new_incidents == 0:
        return [Outcome(action.kind, "skipped", "no new incident in this delivery")]
    waiting = [i.number for i in ctx.port.list_issues(ctx.labels.incident, "open") if ctx.labels.invalid not in i.labels]
    if len(waiting) >= action.threshold:  # only then is it worth a request to learn which ones PRs cite
        cited = {c for pr in ctx.port.list_prs("open") if is_rule_pr(pr, bot_logins(ctx))
                 for c in cites_of(pr)}
        waiting = [n for n in waiting if f"gh-{n}" not in cited]
    count = len(waiting)
    if count < action.threshold or count - ctx.new_incidents >= action.threshold:
        return [Outcome(action.kind, "skipped", f"{count} undistilled incident(s); distill starts when "
                                                f"{action.threshold} are reached (github.distill_threshold)")]
    branch = ((ctx.payload or {}).get("repository") or {}).get("default_branch") or ctx.port.default_branch()
    ctx.port.dispatch_workflow(action.workflow, str(branch), {"reason": "threshold"})
    return [Outcome(action.kind, "done", f"{count} undistilled incident(s) reached the threshold of "
                                         f"{action.threshold}: dispatched {action.workflow}")]
