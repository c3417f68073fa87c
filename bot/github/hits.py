"""Rule hits on GitHub: ``[rule-NNNN]`` in the agent's merged PRs and commits, recorded by one PR.

A hit moves the rule's ``last_hit`` forward, never back; the retirement
order reads it. The change is :func:`bot.playbook.transitions.hits`, the same a
local ``playbook hit`` applies.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from bot._util import markdown
from bot.errors import BadInput
from bot.github.context import Outcome, RunContext, code
from bot.github.events import RecordHits
from bot.github.port import fit_body, marker
from bot.github.pulls import bot_logins, find_mine, pr_url, upsert_pr
from bot.playbook import rule as rules_mod
from bot.playbook import transitions as playbook_changes

HITS_KEY = "hits"


def record_hits(action: RecordHits, ctx: RunContext) -> list[Outcome]:
    """``[rule-NNNN]`` in the agent's merged PRs and commits since the lookback, as one batch in one PR.

    A hit moves the rule's ``last_hit`` forward (never back), so scanning the
    same window twice records nothing new, and a hit already in the open hits
    PR is not written again. The retirement order reads ``last_hit``.
    """
    logins = list(ctx.github.agent_logins)
    label = ctx.github.agent_label
    if not logins and not label:
        return [Outcome(action.kind, "skipped", "no agent account is configured (github.agent_logins in "
                                                ".replaybook.yml), so no citation counts as a hit")]
    today = ctx.today or datetime.now(timezone.utc).date()
    since = today - timedelta(days=action.lookback_days)
    seen: dict[str, tuple[date, str]] = {}  # rule id -> (latest day, where)

    def note(text: str, day: date, where: str) -> None:
        for rule_id in rules_mod.citations(text):
            if rule_id not in seen or seen[rule_id][0] < day:
                seen[rule_id] = (day, where)

    agents = {login.lower() for login in logins}
    prs = ctx.port.list_prs("all")
    for pr in prs:
        if pr.merged_at and pr.merged_at[:10] >= since.isoformat() and (
                pr.author.lower() in agents or (label and label in pr.labels)):
            note(f"{pr.title}\n{pr.body}", date.fromisoformat(pr.merged_at[:10]), f"PR #{pr.number}")
    for login in logins:
        for commit in ctx.port.commits_since(f"{since.isoformat()}T00:00:00Z", login):
            if commit.date:
                note(commit.message, date.fromisoformat(commit.date[:10]), f"commit {commit.sha[:12]}")
    from bot import config as config_mod

    try:
        book = config_mod.playbook(ctx.settings, root=ctx.root)
        planned = playbook_changes.hits(book, {r: day for r, (day, _) in seen.items()},
                                        {r: where for r, (_, where) in seen.items()})
    except BadInput as exc:  # a broken rule file: the invariant check reports it; no hit is safe to write
        return [Outcome(action.kind, "failed", "hits not recorded: the playbook does not load: "
                                               + code(exc.render(), 400))]
    files, rows, unknown = planned.change, planned.rows, planned.not_admitted
    if not files:
        what = f"{len(seen)} rule(s) cited, none more recently than recorded" if seen else "no rule was cited"
        extra = f"; not in the playbook: {', '.join(unknown)}" if unknown else ""
        return [Outcome(action.kind, "unchanged", f"hits since {since}: {what}{extra}")]
    summary = "\n".join([
        f"## Replaybook: rule hits ({len(rows)} rule(s))", "",
        f"The agent cited these rules as `[rule-NNNN]` in merged PRs or commits since {since}. "
        "Merging records the hits; past the cap the rule with the lowest score (docs/playbook.md) retires first.", "",
        markdown.table(["rule", "last hit before", "last hit now", "where"], rows),
        *(["", "Cited but not in the playbook (retired or unknown): " + ", ".join(unknown)] if unknown else []),
    ])
    body = fit_body({"marker": marker(HITS_KEY), "summary": summary}, trim_first=("summary",))
    found = find_mine(prs, HITS_KEY, bot_logins(ctx))
    pr, changed = upsert_pr(ctx, HITS_KEY, "Replaybook: record rule hits", body, files, prs)
    what = ("opened" if found is None or found.state != "open" else "updated" if changed else "already in")
    return [Outcome(action.kind, "done" if changed else "unchanged", f"{len(rows)} rule hit(s): {what} PR #{pr.number}",
                    pr_url(pr))]
