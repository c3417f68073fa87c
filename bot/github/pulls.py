"""The pull requests the bot opens, found again and kept up to date: what every PR-writing feature shares.

A PR is the bot's when its hidden marker (``rule-NNNN``, ``maintenance``,
``hits``) is in the body, it is on a ``replaybook/…`` branch of this
repository, and one of the bot's accounts opened it (:func:`trusted`). A
:class:`~bot.change.Change` reaches a branch through one sink,
:func:`commit_change`: one commit, whatever the feature.
"""

from __future__ import annotations

import re

from bot._util.text_safety import neutralise
from bot.change import Change
from bot.github.context import RunContext
from bot.github.port import (
    BOT_LOGINS,
    GitHubError,
    GitHubPort,
    PullRef,
    marker_keys,
    written_by,
)
from bot.playbook import rule_ids

BRANCH_PREFIX = "replaybook/"
RULE_BRANCH = BRANCH_PREFIX + "rule-"

# ------------------------------------------------------------------ finding and writing the bot's PRs


def bot_logins(ctx: RunContext) -> tuple[str, ...]:
    """The accounts the bot writes as (github.bot_logins); only their PRs are the bot's."""
    return tuple(ctx.github.bot_logins) or BOT_LOGINS


def trusted(pr: PullRef, logins: tuple[str, ...] | list[str] = BOT_LOGINS) -> bool:
    """Whether ``pr`` is the bot's own: opened by one of its accounts, from a branch of this repository.

    Anyone can open a PR from a fork whose branch is named ``replaybook/rule-0099`` and whose body holds
    the bot's markers; only the author and the head repository say who wrote it.
    """
    return pr.same_repo and written_by(pr.author, logins)


def find_mine(prs: list[PullRef], key: str, logins: tuple[str, ...] = BOT_LOGINS) -> PullRef | None:
    """The bot's PR for ``key``: its marker in the body, on a branch of the bot's, opened by the bot; an open one first."""
    found = [p for p in prs if key in marker_keys(p.body) and _bot_branch(p.head_ref, key) and trusted(p, logins)]
    return next((p for p in found if p.state == "open"), found[-1] if found else None)


def _bot_branch(ref: str, key: str) -> bool:
    return ref == BRANCH_PREFIX + key or ref.startswith(f"{BRANCH_PREFIX}{key}-")


def open_pr(ctx: RunContext, key: str, title: str, body: str, files: Change, base: str,
             from_sha: str, used: set[str]) -> PullRef:
    """A new PR for ``key`` carrying ``files`` (None deletes), on ``replaybook/KEY`` or a fresh variant of it.

    A branch left behind by a closed PR is never reused: its old commits would come along.
    """
    branch = BRANCH_PREFIX + key
    for n in range(2, 100):
        if branch not in used:
            try:
                ctx.port.create_branch(branch, from_sha)
                break
            except GitHubError as exc:
                if exc.status != 422 or "already exists" not in exc.message.lower():
                    raise  # e.g. 422 "Object does not exist": another name would fail the same way
        branch = f"{BRANCH_PREFIX}{key}-{n}"
    else:
        raise GitHubError(f"no free branch name for {key}: delete old {BRANCH_PREFIX}{key}-* branches", status=422)
    commit_change(ctx.port, branch, files, title)
    return ctx.port.create_pr(title, body, branch, base)


def commit_change(port: GitHubPort, branch: str, change: Change, message: str) -> int:
    """The GitHub sink: every file of ``change`` on ``branch`` in one commit; the number of commits made (0 or 1)."""
    return int(port.commit_files(branch, dict(change.files), neutralise(message))) if change else 0


def refresh_pr(ctx: RunContext, pr: PullRef, body: str, files: Change, message: str) -> bool:
    """Bring an open PR's files and body up to date in place; whether anything changed."""
    changed = commit_change(ctx.port, pr.head_ref, files, message) > 0
    if pr.body != body:
        ctx.port.update_pr(pr.number, body=body)
        changed = True
    return changed


def pr_url(pr: PullRef) -> str | None:
    return pr.url or None


def is_rule_pr(pr: PullRef, logins: tuple[str, ...] | list[str] = BOT_LOGINS) -> bool:
    return bool(rule_id_of(pr, logins))


def rule_id_of(pr: PullRef, logins: tuple[str, ...] | list[str] = BOT_LOGINS) -> str:
    """The rule id of one of the bot's rule PRs (see :func:`trusted`), or ''."""
    if not pr.head_ref.startswith(RULE_BRANCH) or not trusted(pr, logins):
        return ""
    return next((k for k in marker_keys(pr.body) if rule_ids.is_rule_id(k)), "")


def cites_of(pr: PullRef) -> set[str]:
    return {k[len("cite:"):] for k in marker_keys(pr.body) if k.startswith("cite:")}


def citable(incident_id: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*", incident_id))


def upsert_pr(ctx: RunContext, key: str, title: str, body: str, change: Change, prs: list[PullRef], *,
              from_sha: str | None = None) -> tuple[PullRef, bool]:
    """The bot's open PR for ``key`` brought up to date, else a new one; the PR and whether anything changed."""
    found = find_mine(prs, key, bot_logins(ctx))
    if found is not None and found.state == "open":
        return found, refresh_pr(ctx, found, body, change, title)
    pr = open_pr(ctx, key, title, body, change, ctx.port.default_branch(), from_sha or ctx.port.default_branch_sha(),
                 {p.head_ref for p in prs})
    return pr, True
