"""Promotion on GitHub: the org repository's proposals (``replaybook org propose --pr``) as one PR on it.

The plan is :func:`bot.gate.promotion.plan`'s (twins across members already one proposal); its change is
committed by :func:`bot.github.pulls.upsert_pr` on one branch, the PR found again by its marker and
brought up to date, never opened twice. The org gate (``org-admit``) then proves each proposal.
"""

from __future__ import annotations

from bot.github.context import Outcome, RunContext
from bot.github.port import fit_body, marker
from bot.github.pulls import pr_url, upsert_pr

PROMOTION_KEY = "org-promotion"
PROMOTION_MARKER = marker(PROMOTION_KEY)
KIND = "org-propose"


def promotion_pr(ctx: RunContext, planned) -> Outcome:
    """One PR on this (the org) repository holding every proposal of ``planned`` (a ``Promotion``)."""
    if not planned.proposals:
        return Outcome(KIND, "unchanged", "no rule is admitted in enough members to propose")
    ids = ", ".join(p.rule.id for p in planned.proposals)
    body = fit_body({"marker": PROMOTION_MARKER, "summary": planned.markdown()}, trim_first=("summary",))
    prs = ctx.port.list_prs("open")
    pr, changed = upsert_pr(ctx, PROMOTION_KEY, "Replaybook: rules proposed for the org tier", body,
                            planned.change, prs)
    return Outcome(KIND, "done" if changed else "unchanged", f"{ids} proposed in PR #{pr.number}", pr_url(pr))


__all__ = ["PROMOTION_KEY", "promotion_pr"]
