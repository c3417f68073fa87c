"""PyGithub's objects read into the port's records (issues, PRs, commits, comments, jobs), and its exceptions into
:class:`~bot.github.port.GitHubError`. Only the adapter imports this (it needs PyGithub)."""

from __future__ import annotations

import hashlib
from datetime import timezone
from typing import Any

from github import GithubException
from github.WorkflowJob import WorkflowJob

from bot.github.port import (
    CommentRef,
    CommitRef,
    GitHubError,
    IssueRef,
    Job,
    PullRef,
    Step,
)


def claim_label(key: str) -> str:
    return "replaybook-claim-" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:20]


def github_error(exc: GithubException) -> GitHubError:
    data = exc.data if isinstance(exc.data, dict) else {}
    message = data.get("message") or exc.message or "no message"
    hint = {
        401: "the token was refused; check GITHUB_TOKEN",
        403: "the token lacks a permission, or a rate limit outlasted the retries",
        404: "it does not exist any more, or the token cannot see it",
        410: "it was deleted",
        422: "GitHub rejected the request's content",
    }.get(exc.status, "GitHub kept failing after the retries" if exc.status >= 500 else "")
    request = getattr(exc, "replaybook_request", "")
    text = f"GitHub answered {exc.status} to {request or 'a request'}: {message}" + (f" ({hint})" if hint else "")
    errors = [e for e in data.get("errors", []) if isinstance(e, dict)]
    problems = [f"{e.get('field', '')}: {e.get('message') or e.get('code', '')}" for e in errors]
    return GitHubError(text, status=exc.status, path=request.partition(" ")[2], problems=problems)


def issue_ref(issue: Any) -> IssueRef:
    return IssueRef(
        number=issue.number,
        title=issue.title,
        body=issue.body or "",
        state=issue.state,
        labels=tuple(label.name for label in issue.labels),
        url=issue.html_url,
        created=iso(issue.created_at),
        author=issue.user.login if issue.user else "",
    )


def blob_sha(text: str) -> str:
    """The id git gives a file holding ``text`` (``git hash-object``)."""
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def iso(when: Any) -> str:
    if when is None:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def commit_ref(commit: Any) -> CommitRef:
    git = commit.commit
    return CommitRef(sha=commit.sha, message=git.message or "", date=iso(git.author.date if git.author else None),
                     author=commit.author.login if commit.author else "")


def pull_ref(pull: Any) -> PullRef:
    # merged_at is in list answers too; ``merged`` would cost a request per pull.
    return PullRef(number=pull.number, state=pull.state, merged=pull.merged_at is not None,
                   head_ref=pull.head.ref, body=pull.body or "", title=pull.title, url=pull.html_url,
                   author=pull.user.login if pull.user else "",
                   merged_at=iso(pull.merged_at) or None, labels=tuple(label.name for label in pull.labels),
                   same_repo=same_repo(pull))


def same_repo(pull: Any) -> bool:
    """Whether the PR's head branch is in the base repository; a deleted fork (head.repo null) is not."""
    head_repo, base_repo = pull.head.repo, pull.base.repo  # set from the listing: no request
    return head_repo is not None and base_repo is not None and head_repo.full_name == base_repo.full_name


def comment_ref(comment: Any, number: int) -> CommentRef:
    return CommentRef(id=comment.id, issue_number=number, body=comment.body or "", url=comment.html_url,
                      author=comment.user.login if comment.user else "")


def job_record(job: WorkflowJob) -> Job:
    steps = tuple(Step(number=s.number, name=s.name, conclusion=s.conclusion) for s in job.steps or [])
    return Job(id=job.id, name=job.name, conclusion=job.conclusion, steps=steps)
