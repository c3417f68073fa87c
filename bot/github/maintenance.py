"""Playbook maintenance on GitHub: after a push that touches the playbook, one PR fixes what is mechanical.

The fix is :func:`bot.playbook.transitions.maintenance` on the checkout (retire
past the cap, re-render PLAYBOOK.md, sync the marked sections), computed as a
change and never written to the checkout; what it cannot fix is listed for a
person in the PR body.
"""

from __future__ import annotations

from datetime import date

from bot.github.context import Outcome, RunContext, code
from bot.github.events import CheckPlaybookInvariants
from bot.github.port import fit_body, marker
from bot.github.pulls import bot_logins, find_mine, pr_url, upsert_pr
from bot.incident.store import IncidentStore
from bot.playbook import transitions as playbook_changes

MAINTENANCE_KEY = "maintenance"
MAINTENANCE_MARKER = marker(MAINTENANCE_KEY)


def check_invariants(action: CheckPlaybookInvariants, ctx: RunContext) -> list[Outcome]:
    from bot import config as config_mod

    settings, root = ctx.settings, ctx.root
    store = IncidentStore(settings.path("incidents"))
    sections = [root / s for s in settings.config.sections]
    book = config_mod.playbook(settings, root=root, incidents=store)
    from bot.playbook import check as check_mod

    # The same check as `replaybook playbook check`, less the do-nothing control replay (this job runs no
    # sandbox): each admitted scenario's static soundness is checked, its control is the gate's.
    problems = check_mod.problems(book, root, settings.config.render, sections, cache_dir=None, control=False)
    where = f"the playbook at {action.after_sha[:12]}"
    if not problems:
        return [Outcome(action.kind, "unchanged", f"ok: {where} holds every invariant")]
    planned = playbook_changes.maintenance(book, sections, ctx.today or date.today(), settings.config.render)
    files, fixed, left = planned.change, planned.fixed, planned.left
    listed = "\n".join(f"- {code(p, 500)}" for p in problems)
    todo = "\n".join(f"- {code(p, 500)}" for p in left) or "- nothing: merging this PR fixes every problem"
    summary = "\n".join([
        f"## Replaybook: the playbook needs maintenance ({len(problems)} problem(s))", "",
        f"`replaybook playbook check` (its scenarios without the control replay) on `{action.after_sha[:12]}` "
        "found:", "", listed, "",
        "**This PR fixes:** " + ("; ".join(fixed) if fixed else "nothing mechanically"), "",
        "**Still needs a person:**", todo,
    ])
    body = fit_body({"marker": MAINTENANCE_MARKER, "summary": summary}, trim_first=("summary",))
    prs = ctx.port.list_prs("open")
    found = find_mine(prs, MAINTENANCE_KEY, bot_logins(ctx))
    if found is None and not files:
        return [Outcome(action.kind, "failed", f"{where}: {len(problems)} problem(s), none fixable mechanically: "
                                               + code("; ".join(problems), 600))]
    pr, changed = upsert_pr(ctx, MAINTENANCE_KEY, "Replaybook: playbook maintenance", body, files, prs,
                            from_sha=action.after_sha)
    what = "opened" if found is None else "updated" if changed else "already listed in"
    return [Outcome(action.kind, "done" if changed else "unchanged",
                    f"{where}: {len(problems)} problem(s); {what} PR #{pr.number}", pr_url(pr))]
