"""GitHub: the port the core uses, and (imported on demand) its PyGithub adapter.

``from bot.github import PyGithubAdapter`` loads PyGithub; importing anything
else from here does not, so the core stays free of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.github.port import (
    BODY_LIMIT,
    BOT_LABEL,
    CommentRef,
    GitHubError,
    GitHubPort,
    IssueRef,
    Job,
    Step,
    fit_body,
    marker,
    marker_keys,
    with_marker,
)

if TYPE_CHECKING:
    from bot.github.adapter import PyGithubAdapter

__all__ = [
    "BODY_LIMIT",
    "BOT_LABEL",
    "CommentRef",
    "GitHubError",
    "GitHubPort",
    "IssueRef",
    "Job",
    "PyGithubAdapter",
    "Step",
    "fit_body",
    "marker",
    "marker_keys",
    "with_marker",
]


def __getattr__(name: str) -> Any:
    if name == "PyGithubAdapter":
        from bot.github.adapter import PyGithubAdapter

        return PyGithubAdapter
    raise AttributeError(f"module 'bot.github' has no attribute {name!r}")
