"""The dashboard: one issue the bot keeps, found by a hidden marker and edited in place.

As Renovate's Dependency Dashboard does, the issue shows the playbook's
health (``bot.health.report``) and offers checkboxes; ticking one asks the bot to
act: re-run a rule PR's gate, re-test a rule (replay its scenario), retire a
rule (a PR moving it to the archive), distill now.

- An update costs at most 3 requests: one listing of the open issues (the
  dashboard among them, and the incident issues for the report), one search
  of the rule PRs (each open one's gate state, and every one's gate ledger
  for the cost per admission: :func:`gated_rule_prs`), and one write (edit in
  place, or create the first time).
- A tick acts exactly once. The handler takes the claim ``dashboard``, reads
  the body afresh, acts on each ticked box it offers, then writes the body
  back with those boxes unticked; a redelivery, or a second run waiting on the
  claim, then finds nothing ticked.
- The body is hostile input: anyone with write access can edit it. Only a
  line that is exactly ``- [x] <!-- replaybook:do:KEY -->`` plus the bot's
  label counts, and only when KEY is an action the bot offers now (an open
  rule PR, an admitted rule). Everything else in the body is ignored.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from pathlib import Path

from bot._util.credentials import host_redactor
from bot.change import DiskTree
from bot.errors import BadInput
from bot.github import ledger
from bot.github import pulls as prs
from bot.github.context import Outcome, RunContext
from bot.github.gate import GATE_CONTEXT, GATE_MARKER
from bot.github.port import GatedPull, IssueRef, PullRef, marker, written_by
from bot.health import report as report_mod
from bot.playbook import transitions as playbook_changes

KEY = "dashboard"
MARKER = marker(KEY)  # <!-- replaybook:dashboard -->
LABEL = "replaybook:dashboard"
TITLE = "Replaybook dashboard"
ADMIT_WORKFLOW = "replaybook-admit.yml"
REPLAY_WORKFLOW = "replaybook-replay.yml"
_TICKED = re.compile(r"^- \[[xX]\] <!-- replaybook:do:(distill|gate:\d{1,9}|(?:retest|retire|escalate):rule-\d{4,9})"
                     r" -->(?: .*)?$")


# ------------------------------------------------------------------ reading the body


def ticked(body: str | None) -> list[str]:
    """The action keys whose box is ticked, in order, once each; only exact marker-keyed lines count."""
    keys = [m.group(1) for line in (body or "").replace("\r\n", "\n").split("\n") if (m := _TICKED.match(line))]
    return list(dict.fromkeys(keys))


def untick(body: str, keys: set[str]) -> str:
    """``body`` with the boxes of ``keys`` unticked, every other byte kept."""
    def one(match: re.Match) -> str:
        return f"- [ ] <!-- replaybook:do:{match.group(1)} -->" if match.group(1) in keys else match.group(0)

    return re.sub(r"(?m)^- \[[xX]\] <!-- replaybook:do:([a-z0-9:-]+) -->", one, body)


def is_dashboard(issue: IssueRef, bot_logins) -> bool:
    return MARKER in (issue.body or "") and written_by(issue.author, bot_logins) and issue.state == "open"


# ------------------------------------------------------------------ what it offers


def offered(rules: list[str], rule_prs: list[PullRef], bot_logins, ignored: set[str] = frozenset()) -> dict[str, str]:
    """Action key -> the checkbox's label, for the current state (escalation only for an ignored rule)."""
    out = {"distill": "Distill now"}
    for pr in rule_prs:
        out[f"gate:{pr.number}"] = f"Re-run the gate on #{pr.number} ({prs.rule_id_of(pr, bot_logins)})"
    for rule_id in rules:
        out[f"retest:{rule_id}"] = f"Re-test {rule_id}: replay its scenario on the current agent"
        out[f"retire:{rule_id}"] = f"Retire {rule_id}: open a PR moving it to the archive"
        if rule_id in ignored:
            out[f"escalate:{rule_id}"] = (f"Escalate {rule_id} (ignored): open a PR turning its scenario's checks "
                                          "into a guard (a Claude Code hook, a CI step)")
    return out


def body(report: report_mod.Report, actions: dict[str, str], note: str = "") -> str:
    text = report_mod.markdown(report, heading="## Playbook health")
    boxes = "\n".join(f"- [ ] <!-- replaybook:do:{k} --> {label}" for k, label in actions.items())
    return (f"{MARKER}\n# {TITLE}\n\nKept by Replaybook; edited in place by the scheduled run. Tick a box and the "
            "bot acts once, then unticks it.\n\n" + text + "\n## Actions\n\n" + boxes + "\n"
            + (f"\n{note}\n" if note else ""))


# ------------------------------------------------------------------ the update (3 requests)


def _admitted(ctx: RunContext):
    from bot.incident.store import IncidentStore
    from bot.playbook.store import Playbook

    settings = ctx.settings
    return Playbook(settings.path("playbook"), root=ctx.root, cap=settings.cap,
                    incidents=IncidentStore(settings.path("incidents")),
                    half_life_days=settings.config.health.half_life_days)


def _open_rule_prs(ctx: RunContext) -> list[PullRef]:
    logins = prs.bot_logins(ctx)
    return [p for p in ctx.port.list_prs("open") if prs.is_rule_pr(p, logins)]


def gated_rule_prs(ctx: RunContext) -> tuple[list[GatedPull], tuple[list, int]]:
    """One search: the open rule PRs with their gate's state, and the gate ledger of every rule PR found.

    The ledger is read from the bot's own gate comments only (bot/github/ledger.py); the search returns
    the 100 most recently updated rule PRs, open or closed.
    """
    logins = prs.bot_logins(ctx)
    found = ctx.port.search_pulls(ledger.RULE_PRS, GATE_CONTEXT)
    rule_prs = [g for g in found if g.pull.state == "open" and prs.is_rule_pr(g.pull, logins)]
    return rule_prs, ledger.collect(found, GATE_MARKER, logins)


def update(action, ctx: RunContext) -> list[Outcome]:
    """Edit the dashboard in place (or open it), and write the same report to the job summary."""
    logins = prs.bot_logins(ctx)
    issues = ctx.port.open_issues()  # 1
    found = next((i for i in issues if is_dashboard(i, logins)), None)
    incidents = _incidents(ctx, [i for i in issues if ctx.labels.incident in i.labels])
    gated, records = gated_rule_prs(ctx)  # 2
    rule_prs = [g.pull for g in gated]
    book = _admitted(ctx)
    today = ctx.today or datetime.now(timezone.utc).date()
    report = report_mod.build(book, today, incidents=incidents,
                              ignored_after=ctx.settings.config.health.ignored_after, gate_records=records,
                              open_prs=[report_mod.PrRow(number=g.pull.number, rule_id=prs.rule_id_of(g.pull, logins),
                                                         title=g.pull.title, gate=g.gate, url=g.pull.url)
                                        for g in gated])
    ignored = {r.id for r in report.rules if r.compliance == "ignored"}
    text = body(report, offered([r.id for r in book.admitted()], rule_prs, logins, ignored))
    if ctx.step_summary is not None:
        with open(ctx.step_summary, "a", encoding="utf-8") as handle:
            handle.write(host_redactor().text(report_mod.markdown(report)) + "\n")
    if found is None:
        issue = ctx.port.create_issue(TITLE, text, [LABEL])  # 3
        return [Outcome("update_dashboard", "done", f"opened the dashboard #{issue.number}", issue.url)]
    if found.body == text:
        return [Outcome("update_dashboard", "unchanged", f"the dashboard #{found.number} is current", found.url)]
    ctx.port.update_issue(found.number, body=text)  # 3
    return [Outcome("update_dashboard", "done", f"updated the dashboard #{found.number}", found.url)]


def _incidents(ctx: RunContext, issues: list[IssueRef]):
    """The open incident issues that parse, as ``gh-N`` incidents (the others are the form's business)."""
    from bot.github.issue_form import incident_from_issue

    out = []
    for issue in issues:
        try:
            out.append(incident_from_issue(issue.body, number=issue.number, created_at=issue.created or "",
                                           html_url=issue.url))
        except BadInput:
            continue
    return out


# ------------------------------------------------------------------ a tick


def act(action, ctx: RunContext) -> list[Outcome]:
    """Carry out each ticked box of the dashboard once (under the claim), then untick them."""
    logins = prs.bot_logins(ctx)
    ctx.port.claim(KEY)
    try:
        issue = ctx.port.get_issue(action.number)  # afresh: the payload's copy may be a redelivery's
        if not is_dashboard(issue, logins):
            return [Outcome("dashboard_tick", "unchanged", f"issue #{action.number} is not the bot's dashboard")]
        keys = ticked(issue.body)
        if not keys:
            return [Outcome("dashboard_tick", "unchanged", "no box is ticked")]
        rule_prs = _open_rule_prs(ctx)
        book = _admitted(ctx)
        ignored = _ignored(ctx, book) if any(k.startswith("escalate:") for k in keys) else set()
        offers = offered([r.id for r in book.admitted()], rule_prs, logins, ignored)
        outcomes = [_one(key, ctx, book) if key in offers else
                    Outcome("dashboard_tick", "unchanged", f"`{key}` is not offered now; unticked") for key in keys]
        ctx.port.update_issue(issue.number, body=untick(issue.body, set(keys)))
        return outcomes
    finally:
        ctx.port.release(KEY)


def _one(key: str, ctx: RunContext, book) -> Outcome:
    what, _, target = key.partition(":")
    branch = ctx.port.default_branch()
    if what == "distill":
        workflow = ctx.github.distill_workflow
        ctx.port.dispatch_workflow(workflow, branch, {"reason": "dashboard"})
        return Outcome("dashboard_tick", "done", f"distill now: dispatched {workflow}")
    if what == "gate":
        ctx.port.dispatch_workflow(ADMIT_WORKFLOW, branch, {"pr": target})
        return Outcome("dashboard_tick", "done", f"re-run the gate on #{target}: dispatched {ADMIT_WORKFLOW}")
    rule = next(r for r in book.admitted() if r.id == target)
    if what == "retest":
        ctx.port.dispatch_workflow(REPLAY_WORKFLOW, branch, {"scenario": Path(rule.replay).name})
        return Outcome("dashboard_tick", "done", f"re-test {target}: dispatched {REPLAY_WORKFLOW}")
    if what == "escalate":
        return _escalation_pr(ctx, rule, branch)
    pr = _retirement_pr(ctx, rule.id, branch)
    return Outcome("dashboard_tick", "done", f"retire {target}: opened PR #{pr.number}", pr.url)


def _ignored(ctx: RunContext, book) -> set[str]:
    """The admitted rules whose repeats since admission reach ``health.ignored_after`` (one listing)."""
    from bot.playbook import worth as health

    issues = [i for i in ctx.port.open_issues() if ctx.labels.incident in i.labels]
    incidents = _incidents(ctx, issues)
    rules = book.admitted()
    rows = health.rule_health(rules, incidents, ctx.today or date.today(),
                              ignored_after=ctx.settings.config.health.ignored_after)
    return {r.id for r in rows if r.compliance == "ignored"}


def _escalation_pr(ctx: RunContext, rule, base: str) -> Outcome:
    """One PR holding every guard the rule's scenario allows; a rewording note where none does."""
    from bot.health import escalation as escalate

    planned = escalate.plan(rule, ctx.root, DiskTree(ctx.root))
    files = planned.change
    if not files:
        return Outcome("dashboard_tick", "unchanged", planned.escalation.rewording or "")
    body = (f"{marker(f'escalate:{rule.id}')}\n{rule.id} is ignored: the agent kept repeating its mistake after "
            f"it was admitted. This PR turns the checks of its scenario `{rule.replay}` into enforcement:\n\n"
            + "\n".join(f"- `{p}`" for p in sorted(files)))
    used = {p.head_ref for p in ctx.port.list_prs("all")}
    pr = prs.open_pr(ctx, f"guard-{rule.id}", f"Guard {rule.id}: enforce what the agent ignores", body,
                     files, base, ctx.port.default_branch_sha(), used)
    return Outcome("dashboard_tick", "done", f"escalate {rule.id}: opened PR #{pr.number}", pr.url)


def _retirement_pr(ctx: RunContext, rule_id: str, base: str) -> PullRef:
    """The retirement as :func:`bot.playbook.transitions.retirement` plans it, less PLAYBOOK.md (the maintenance PR's)."""
    from bot.playbook.store import Playbook

    book = Playbook(ctx.settings.path("playbook"), root=ctx.root, cap=ctx.settings.cap)
    planned = playbook_changes.retirement(book, [rule_id], reason="dashboard", on=ctx.today or date.today())
    files = planned.change.only(f"{book.rel}/rules/", f"{book.rel}/archive/")
    body = (f"{marker(f'retire:{rule_id}')}\nRetires {rule_id} to the archive, as ticked on the dashboard. "
            "Merging it removes the rule from what agents read.")
    used = {p.head_ref for p in ctx.port.list_prs("all")}
    return prs.open_pr(ctx, f"retire-{rule_id}", f"Retire {rule_id}", body, files, base,
                       ctx.port.default_branch_sha(), used)
