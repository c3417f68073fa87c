"""The small GitHub interface the core uses, and the pure helpers around it.

Nothing here imports PyGithub: the core talks to :class:`GitHubPort`, the
adapter (``bot.github.adapter``) implements it over PyGithub, and tests run the
real adapter against a fake GitHub served on 127.0.0.1.

Every issue, comment and PR the bot writes carries a hidden marker holding its
idempotency key (:func:`marker`), so a redelivered event finds its own earlier
write instead of making a second one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from bot.errors import ReplaybookError

BODY_LIMIT = 65_536
"""GitHub's limit on issue, PR and comment bodies, in characters."""

BOT_LABEL = "replaybook"
"""The label on every issue the bot files; finding by marker lists only these."""

BOT_LOGINS = ("github-actions[bot]",)
"""Who the bot writes as by default: the workflow token. A GitHub App adds its ``NAME[bot]`` (github.bot_logins)."""

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")
_MARKER = re.compile(r"<!-- replaybook:([A-Za-z0-9][A-Za-z0-9._:/@+-]*) -->")


class GitHubError(ReplaybookError):
    """A GitHub request failed for good (after any retries).

    ``status`` is the HTTP status (0 when no answer came back) and ``path``
    the request path, so a 404 in the middle of a flow names what vanished.
    """

    def __init__(self, message: str, *, status: int = 0, path: str = "", problems: list[str] | None = None):
        super().__init__(message, problems=problems)
        self.status = status
        self.path = path


@dataclass(frozen=True)
class IssueRef:
    number: int
    title: str
    body: str
    state: str
    labels: tuple[str, ...] = ()
    url: str = ""
    created: str = ""  # ISO 8601, UTC
    author: str = ""  # the login that opened it


@dataclass(frozen=True)
class CommitRef:
    """A commit on the default branch: who wrote it, when, and its message."""

    sha: str
    message: str
    date: str  # ISO 8601, UTC (the author date)
    author: str = ""  # the GitHub login, when GitHub knows it


@dataclass(frozen=True)
class CommentRef:
    id: int
    issue_number: int
    body: str
    url: str = ""
    author: str = ""  # the login that wrote it


@dataclass(frozen=True)
class Reaction:
    """A reaction on a comment: who left it and which (``+1``, ``eyes``, …)."""

    content: str
    login: str


PERMISSIONS = ("admin", "write", "read", "none")
"""What the collaborator-permission endpoint answers (maintain reads as write, triage as read)."""


@dataclass(frozen=True)
class Step:
    number: int
    name: str
    conclusion: str | None


@dataclass(frozen=True)
class Job:
    id: int
    name: str
    conclusion: str | None
    steps: tuple[Step, ...] = field(default_factory=tuple)

    @property
    def failed_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.conclusion in FAILED_CONCLUSIONS)


@dataclass(frozen=True)
class FileChange:
    """One file of a pull request's diff, as a diff stat line."""

    filename: str
    status: str
    additions: int
    deletions: int


@dataclass(frozen=True)
class ReviewComment:
    """A review comment on a line of a pull request's diff."""

    id: int
    path: str
    body: str
    review_id: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class PullRef:
    """A pull request as the bot needs it: where it stands, its branch and its body (with any marker)."""

    number: int
    state: str  # open | closed
    merged: bool
    head_ref: str
    body: str
    title: str = ""
    url: str = ""
    author: str = ""  # the login that opened it
    merged_at: str | None = None  # ISO 8601, UTC
    labels: tuple[str, ...] = ()
    same_repo: bool = True  # False when the head branch lives in another repository (a fork)


FAILED_CONCLUSIONS = frozenset({"failure", "timed_out"})
"""Job conclusions that count as a failure worth capturing."""

# ------------------------------------------------------------------ check runs (GitHub App tokens only)

CHECK_TEXT_LIMIT = 65_535
"""GitHub's cap on a check run's ``output.summary`` (and ``output.text``), in characters."""

ANNOTATIONS_PER_REQUEST = 50
"""GitHub takes at most 50 annotations per create or update; more go in further updates."""

AnnotationLevel = Literal["notice", "warning", "failure"]


@dataclass(frozen=True)
class Annotation:
    """One check-run annotation, in GitHub's shape: a file of the repository and the lines it points at."""

    path: str
    start_line: int
    end_line: int
    annotation_level: AnnotationLevel
    message: str
    title: str = ""

    def as_json(self) -> dict:
        out = {"path": self.path, "start_line": self.start_line, "end_line": self.end_line,
               "annotation_level": self.annotation_level, "message": self.message}
        return out | ({"title": self.title} if self.title else {})


@dataclass(frozen=True)
class CheckAction:
    """A button on the check run (GitHub: label and identifier at most 20 characters, description 40)."""

    label: str
    description: str
    identifier: str

    def __post_init__(self) -> None:
        if len(self.label) > 20 or len(self.identifier) > 20 or len(self.description) > 40:
            raise ValueError(f"check-run action {self.identifier!r} is over GitHub's limits (label and identifier "
                             "20 characters, description 40)")


@dataclass(frozen=True)
class CheckRun:
    """A completed check run: its conclusion, and the output GitHub shows on the PR's Checks tab."""

    name: str
    head_sha: str
    conclusion: Literal["success", "failure", "neutral", "action_required"]
    title: str
    summary: str
    annotations: tuple[Annotation, ...] = ()
    actions: tuple[CheckAction, ...] = ()
    details_url: str | None = None
    external_id: str = ""


@dataclass(frozen=True)
class GatedPull:
    """A pull request found by one search, with its gate's state on the head commit and its comments.

    ``gate`` is the conclusion of the check run named for the gate, else the
    state of the commit status of that context: success, failure, error,
    pending, or none. ``comments`` are its last comments by anyone: the
    caller keeps only the bot's own.
    """

    pull: PullRef
    gate: str
    comments: tuple[CommentRef, ...] = ()


# ------------------------------------------------------------------ the set-up, as `replaybook doctor` reads it


@dataclass(frozen=True)
class RequiredCheck:
    """A check a branch rule requires: its name and the app it is pinned to (None: any source)."""

    context: str
    app_id: int | None = None
    source: str = ""  # where the rule lives: "ruleset NAME" or "branch protection"


@dataclass(frozen=True)
class BranchRules:
    """The active ruleset rules on a branch (GitHub's ``GET /repos/{o}/{r}/rules/branches/{branch}``)."""

    required_checks: tuple[RequiredCheck, ...] = ()
    merge_queue: bool = False


@dataclass(frozen=True)
class DeployEnvironment:
    """A GitHub deployment environment as ``doctor`` reads it: which runs may enter it (and read its secrets).

    ``branches``: "all" (no deployment branch policy), "protected" (protected branches only) or "custom"
    (``patterns``: branch name patterns; a tag pattern is kept as ``tag:PATTERN``)."""

    name: str
    branches: str
    patterns: tuple[str, ...] = ()


@runtime_checkable
class SetupPort(Protocol):
    """What ``replaybook doctor`` reads of a repository's settings; each method raises GitHubError (403/404 when
    the token may not read it). The adapter implements it beside :class:`GitHubPort`."""

    calls: int

    def default_branch(self) -> str: ...

    def branch_rules(self, branch: str) -> BranchRules: ...

    def protection_checks(self, branch: str) -> tuple[RequiredCheck, ...]: ...

    def secret_names(self) -> frozenset[str]: ...

    def variable_names(self) -> frozenset[str]: ...

    def environment(self, name: str) -> DeployEnvironment | None: ...

    def environment_secret_names(self, name: str) -> frozenset[str]: ...


@runtime_checkable
class GitHubPort(Protocol):
    """What the core needs from GitHub. ``calls`` counts API requests made."""

    calls: int

    def find_issue_by_marker(self, marker: str) -> IssueRef | None: ...

    def get_issue(self, number: int) -> IssueRef: ...

    def list_issues(self, label: str, state: str = "open") -> list[IssueRef]: ...

    def open_issues(self) -> list[IssueRef]: ...

    def create_issue(self, title: str, body: str, labels: Sequence[str] = ()) -> IssueRef: ...

    def update_issue(self, number: int, *, body: str | None = None, labels: Sequence[str] | None = None,
                     state: str | None = None) -> IssueRef: ...

    def add_comment(self, number: int, body: str) -> CommentRef: ...

    def find_comment_by_marker(self, number: int, marker: str) -> CommentRef | None: ...

    def upsert_comment(self, number: int, marker: str, body: str) -> CommentRef: ...

    def set_status(
        self, sha: str, state: str, context: str, description: str, target_url: str | None = None
    ) -> None: ...

    def collaborator_permission(self, login: str) -> str:
        """``login``'s permission on the repository (GET /collaborators/{login}/permission): admin, write, read
        or none. Never ``author_association``, which shows private org members as CONTRIBUTOR."""
        ...

    def add_reaction(self, comment_id: int, content: str) -> None: ...

    def comment_reactions(self, comment_id: int) -> list[Reaction]: ...

    def create_check_run(self, run: CheckRun) -> str: ...

    def search_pulls(self, qualifiers: str, context: str) -> list[GatedPull]: ...

    def failed_jobs(self, run_id: int) -> list[Job]: ...

    def job_log(self, job_id: int) -> str: ...

    def pull_files(self, number: int) -> list[FileChange]: ...

    def review_comments(self, number: int) -> list[ReviewComment]: ...

    def list_prs(self, state: str = "all") -> list[PullRef]: ...

    def find_pr_by_marker(self, marker: str, state: str = "all") -> PullRef | None: ...

    def default_branch(self) -> str: ...

    def default_branch_sha(self) -> str: ...

    def create_branch(self, name: str, from_sha: str) -> None: ...

    def commit_files(self, branch: str, files: Mapping[str, str | None], message: str) -> bool: ...

    def create_pr(self, title: str, body: str, head: str, base: str) -> PullRef: ...

    def update_pr(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRef: ...

    def commits_since(self, since: str, author: str) -> list[CommitRef]: ...

    def dispatch_workflow(self, workflow: str, ref: str, inputs: dict[str, str]) -> None: ...

    def claim(self, key: str) -> None: ...

    def release(self, key: str) -> None: ...


def marker(key: str) -> str:
    """The hidden marker for an idempotency key: ``<!-- replaybook:KEY -->``."""
    if not _KEY.match(key):
        raise ValueError(
            f"idempotency key {key!r} cannot go in a marker; use letters, digits and . _ : / @ + - "
            "and start with a letter or digit"
        )
    return f"<!-- replaybook:{key} -->"


def marker_keys(body: str | None) -> list[str]:
    """The idempotency keys of every marker in ``body``, in order."""
    return _MARKER.findall(body or "")


def written_by(author: str, bot_logins: Sequence[str]) -> bool:
    """Whether ``author`` is one of the bot's own identities: only their text may speak as the bot."""
    return author.lower() in {login.lower() for login in bot_logins}


def with_marker(body: str, mark: str) -> str:
    """``body`` with ``mark`` on its first line, unless it is already there."""
    return body if mark in body else f"{mark}\n{body}"


def fit_body(
    parts: Mapping[str, str],
    *,
    limit: int = BODY_LIMIT,
    trim_first: Sequence[str] = ("evidence",),
) -> str:
    """Join ``parts`` (in order, blank line between) into a body of at most ``limit`` characters.

    Over the limit, the parts named in ``trim_first`` are cut first (keeping
    their head and tail, where a log's error usually is), then the other parts
    from the last one back. A part holding a marker is never cut, and a note
    at the end says what was trimmed and by how much.
    """
    texts = {name: text for name, text in parts.items() if text}
    body = _join(texts)
    if len(body) <= limit:
        return body

    order = [n for n in trim_first if n in texts] + [n for n in reversed(texts) if n not in trim_first]
    trimmed: dict[str, int] = {}
    for name in (n for n in order if not marker_keys(texts[n])):
        original = texts[name]
        # Slack covers the digits the note and the cut line gain once the real counts are known.
        excess = len(_join(texts)) + 2 + len(_trim_note(trimmed | {name: len(original)}, limit)) - limit + 32
        keep = max(0, len(original) - excess - len(_CUT.format(n=len(original))))
        texts[name] = _cut_middle(original, keep)
        trimmed[name] = len(original) - keep
        body = f"{_join(texts)}\n\n{_trim_note(trimmed, limit)}"
        if len(body) <= limit:
            return body
    raise ValueError(f"body cannot fit in {limit:,} characters: only its markers are left and they are too long")


_CUT = "\n… [{n} characters trimmed] …\n"


def _join(texts: Mapping[str, str]) -> str:
    return "\n\n".join(t for t in texts.values() if t)


def _cut_middle(text: str, keep: int) -> str:
    """``text`` with its middle replaced by a cut line, keeping ``keep`` characters in all."""
    if keep <= 0:
        return ""
    head = keep // 2
    tail = keep - head
    cut = len(text) - keep
    return text[:head] + _CUT.format(n=cut) + (text[-tail:] if tail else "")


def _trim_note(trimmed: Mapping[str, int], limit: int) -> str:
    what = ", ".join(f"{name} by {n:,} characters" for name, n in trimmed.items())
    return f"> [!NOTE]\n> Replaybook trimmed {what} to keep this under GitHub's {limit:,}-character limit."
