"""The pull request scanner: title, body, review and diff stat of a PR an agent opened."""

from __future__ import annotations

import hashlib

from bot.errors import BadInput
from bot.incident.capture.evidence import (
    Evidence,
    fit,
    one_liner,
)

# ---------------------------------------------------------------- pull requests

def _diff_stat(text: str) -> list[str]:
    """A ``git diff --stat``-like summary of a full diff; a stat is kept as it is."""
    if "diff --git " not in text:
        return [x for x in text.splitlines() if x.strip()][:40]
    files: dict[str, list[int]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[-1]
            files.setdefault(current, [0, 0])
        elif current and line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            files[current][line[0] == "-"] += 1
    return [f"{name} | +{add} -{rem}" for name, (add, rem) in list(files.items())[:40]]


def evidence_from_pr(title: str, body: str = "", review: str | None = None, diff: str | None = None) -> Evidence:
    """Evidence from a pull request: its title and body, a review, and a diff or diff stat."""
    if not title or not title.strip():
        raise BadInput("capture pr: the title is empty; pass the pull request's title with --title")
    review_lines = [x for x in (review or "").splitlines() if x.strip()]
    sections = [("", [f"title: {one_liner(title, 300)}"]), ("review", review_lines),
                ("body", (body or "").splitlines()), ("diff stat", _diff_stat(diff or ""))]
    digest = hashlib.sha256("\0".join([title, body or "", review or "", diff or ""]).encode()).hexdigest()
    first = review_lines[0] if review_lines else None
    trigger = f"review of PR “{one_liner(title, 80)}”: {first}" if first else f"pull request “{title}” failed"
    return Evidence(trigger=one_liner(trigger), excerpt=fit(sections), task_hint=one_liner(title),
                    source_kind="review" if review_lines else "pull_request", digest=digest)
