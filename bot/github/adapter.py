"""GitHubPort over PyGithub: the one module that imports it.

Retries are ours, not urllib3's (``Github(retry=None)``), so tests inject
``sleep`` and never wait: a 5xx backs off exponentially, and a 403/429 that
carries ``retry-after`` (GitHub's secondary rate limit) waits exactly that
long. Each HTTP request is retried on its own, by wrapping the two request
methods of the client's one ``Requester``; the same wrapper counts requests.

Objects are lazy (``Github(lazy=True)``): the repository, an issue by number,
a commit before ``create_status`` and a job before its logs cost no request.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import requests
from github import Auth, Github, GithubException, InputGitTreeElement
from github.PaginatedList import PaginatedList
from github.WorkflowJob import WorkflowJob

from bot._util.credentials import host_redactor, redact_data
from bot.github.port import (
    ANNOTATIONS_PER_REQUEST,
    BOT_LABEL,
    BOT_LOGINS,
    FAILED_CONCLUSIONS,
    CheckRun,
    CommentRef,
    CommitRef,
    FileChange,
    GatedPull,
    GitHubError,
    IssueRef,
    Job,
    PullRef,
    ReviewComment,
    marker,
    marker_keys,
    with_marker,
    written_by,
)
from bot.github.refs import (
    SEARCH_PULLS,
    CommentCalls,
    SetupReads,
    blob_sha,
    claim_label,
    comment_ref,
    commit_ref,
    gated_pull,
    github_error,
    issue_ref,
    job_record,
    pull_ref,
)

T = TypeVar("T")

SECONDARY_LIMIT_WAIT = 60.0
"""GitHub's advice when a secondary rate limit comes without ``retry-after``."""

_CREATES = re.compile(r"/issues(/\d+/comments)?$")
"""POSTs that make a new issue or comment: after a 5xx GitHub may have written, so they are not simply resent."""


class PyGithubAdapter(SetupReads, CommentCalls):
    """The real GitHub, through PyGithub. See :class:`bot.github.port.GitHubPort` (and ``SetupPort``)."""

    def __init__(
        self,
        repo_full_name: str,
        token: str,
        base_url: str | None = None,
        *,
        retries: int = 3,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        label: str = BOT_LABEL,
        seconds_between_requests: float | None = 0.25,
        seconds_between_writes: float | None = 1.0,
        timeout: int = 15,
        per_page: int = 100,
        bot_logins: Sequence[str] = BOT_LOGINS,
    ):
        self.calls = 0
        self._redact = host_redactor()
        self.label = label
        self.bot_logins = tuple(bot_logins)  # only text by these speaks as the bot: markers are read from it alone
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep
        self._timeout = timeout
        options: dict[str, Any] = {"base_url": base_url} if base_url else {}
        self._gh = Github(
            auth=Auth.Token(token),
            retry=None,
            lazy=True,
            timeout=timeout,
            per_page=per_page,
            seconds_between_requests=seconds_between_requests,
            seconds_between_writes=seconds_between_writes,
            **options,
        )
        requester = self._gh.requester
        for name in ("requestJsonAndCheck", "requestBlobAndCheck"):
            setattr(requester, name, self._retrying(getattr(requester, name)))
        self._repo = self._gh.get_repo(repo_full_name)
        self._full_name = repo_full_name

    def close(self) -> None:
        self._gh.close()

    # Issues

    def find_issue_by_marker(self, marker: str) -> IssueRef | None:
        """The oldest issue the bot opened carrying ``marker``, open or closed, among those labelled ``self.label``.

        Listing is used, not search: the search index lags, and twenty
        deliveries in a row must see the first one's issue. An issue someone
        else opened never counts, whatever markers its body holds.
        """
        issues = self._repo.get_issues(state="all", labels=[self.label], sort="created", direction="asc")
        # Pull requests are issues too; their html_url says so without another request.
        mine = (i for i in issues if marker in (i.body or "") and "/pull/" not in i.html_url and self._mine(i))
        return self._guard(lambda: next((issue_ref(i) for i in mine), None))

    def get_issue(self, number: int) -> IssueRef:
        """The issue as it is now (one request): a payload's copy may be older than a person's last edit."""
        # The lazy issue loads on the first attribute read, inside the guard.
        return self._guard(lambda: issue_ref(self._repo.get_issue(int(number))))

    def list_issues(self, label: str, state: str = "open") -> list[IssueRef]:
        """Issues (not pull requests) labelled ``label`` in ``state``, oldest first (one request per 100)."""
        issues = self._repo.get_issues(state=state, labels=[label], sort="created", direction="asc")
        return self._guard(lambda: [issue_ref(i) for i in issues if "/pull/" not in i.html_url])

    def open_issues(self) -> list[IssueRef]:
        """Every open issue (not pull requests), oldest first, whatever its labels (one request per 100)."""
        issues = self._repo.get_issues(state="open", sort="created", direction="asc")
        return self._guard(lambda: [issue_ref(i) for i in issues if "/pull/" not in i.html_url])

    def create_issue(self, title: str, body: str, labels: Sequence[str] = ()) -> IssueRef:
        names = list(dict.fromkeys([self.label, *labels]))
        return self._create_once(body, lambda: issue_ref(self._repo.create_issue(title=title, body=body, labels=names)),
                                 self.find_issue_by_marker)

    def update_issue(self, number: int, *, body: str | None = None, labels: Sequence[str] | None = None,
                     state: str | None = None) -> IssueRef:
        changes: dict[str, Any] = {}
        if body is not None:
            changes["body"] = body
        if labels is not None:
            changes["labels"] = list(dict.fromkeys([self.label, *labels]))
        if state is not None:
            changes["state"] = state
        issue = self._repo.get_issue(number)
        self._guard(lambda: issue.edit(**changes))
        return issue_ref(issue)

    # Comments

    def add_comment(self, number: int, body: str) -> CommentRef:
        return self._create_once(body, lambda: comment_ref(self._repo.get_issue(number).create_comment(body), number),
                                 lambda mark: self.find_comment_by_marker(number, mark))

    def find_comment_by_marker(self, number: int, marker: str) -> CommentRef | None:
        """The bot's own comment on ``number`` carrying ``marker``; anyone else's is never it."""
        comments = self._repo.get_issue(number).get_comments()
        return self._guard(lambda: next((comment_ref(c, number) for c in comments
                                         if marker in (c.body or "") and self._mine(c)), None))

    def upsert_comment(self, number: int, marker: str, body: str) -> CommentRef:
        """The one comment on ``number`` carrying ``marker``, edited in place or made."""
        body = with_marker(body, marker)
        issue = self._repo.get_issue(number)
        comments = issue.get_comments()
        mine = self._guard(lambda: next((c for c in comments if marker in (c.body or "") and self._mine(c)), None))
        if mine is None:
            return self.add_comment(number, body)
        if mine.body != body:
            self._guard(lambda: mine.edit(body))
        return comment_ref(mine, number)

    # Statuses

    def set_status(
        self, sha: str, state: str, context: str, description: str, target_url: str | None = None
    ) -> None:
        extra = {"target_url": target_url} if target_url else {}
        # The description is capped by GitHub at 140 characters; longer ones are a 422.
        text = description if len(description) <= 140 else description[:139] + "…"
        commit = self._repo.get_commit(sha)
        self._guard(lambda: commit.create_status(state=state, description=text, context=context, **extra))

    # Check runs (a GitHub App's installation token: the gate's check run; see bot/github/checks.py)

    def create_check_run(self, run: CheckRun) -> str:
        """``run``, completed, with its first 50 annotations; the rest go in updates of 50 (GitHub's cap).

        Each gate makes a new check run: GitHub shows, and a required check reads, the latest of a name.
        Returns its ``html_url``.
        """
        batches = [run.annotations[i:i + ANNOTATIONS_PER_REQUEST]
                   for i in range(0, len(run.annotations), ANNOTATIONS_PER_REQUEST)] or [()]

        def output(batch: tuple) -> dict:
            return {"title": run.title, "summary": run.summary, "annotations": [a.as_json() for a in batch]}

        extra: dict[str, Any] = {"details_url": run.details_url} if run.details_url else {}
        if run.external_id:
            extra["external_id"] = run.external_id
        actions = [{"label": a.label, "description": a.description, "identifier": a.identifier} for a in run.actions]
        created = self._guard(lambda: self._repo.create_check_run(
            name=run.name, head_sha=run.head_sha, status="completed", conclusion=run.conclusion,
            completed_at=datetime.now(timezone.utc), output=output(batches[0]), actions=actions, **extra))
        for batch in batches[1:]:
            self._guard(lambda: created.edit(output=output(batch)))
        return created.html_url

    # Search (GraphQL: one request answers what a listing and a request per PR would)

    def search_pulls(self, qualifiers: str, context: str) -> list[GatedPull]:
        """The 100 most recently updated PRs matching ``qualifiers``, each with its gate's state and comments."""
        query = f"repo:{self._full_name} is:pr {qualifiers}".strip()
        _, data = self._guard(lambda: self._gh.requester.graphql_query(SEARCH_PULLS, {"q": query, "first": 100}))
        nodes = ((data.get("data") or {}).get("search") or {}).get("nodes") or []
        return [gated_pull(node, context) for node in nodes if node and node.get("number") is not None]

    def _get(self, url: str, params: dict | None = None) -> Any:
        return self._guard(lambda: self._gh.requester.requestJsonAndCheck("GET", url, parameters=params))[1]

    def _post(self, url: str, body: dict) -> Any:
        return self._guard(lambda: self._gh.requester.requestJsonAndCheck("POST", url, input=body))[1]

    # Actions

    def failed_jobs(self, run_id: int) -> list[Job]:
        """The finished jobs of the run's latest attempt that failed or timed out."""
        # Listing by URL skips fetching the run itself just to learn its jobs_url.
        jobs = PaginatedList(
            WorkflowJob,
            self._gh.requester,
            f"{self._repo.url}/actions/runs/{int(run_id)}/jobs",
            {"filter": "latest"},
            list_item="jobs",
        )
        return [
            job_record(job)
            for job in self._guard(lambda: list(jobs))
            if job.status == "completed" and job.conclusion in FAILED_CONCLUSIONS
        ]

    def job_log(self, job_id: int) -> str:
        """The plain-text log of a finished job (two requests: the 302, then the download)."""
        location = self._guard(lambda: self._repo.get_workflow_job(int(job_id)).logs_url())
        return self._download(location)

    # Pull requests

    def pull_files(self, number: int) -> list[FileChange]:
        """The files a pull request changes, with their line counts (GitHub lists at most 3,000)."""
        files = self._repo.get_pull(int(number)).get_files()
        return self._guard(
            lambda: [FileChange(f.filename, f.status, f.additions, f.deletions) for f in files]
        )

    def review_comments(self, number: int) -> list[ReviewComment]:
        """Every review comment on a pull request's diff, oldest first."""
        comments = self._repo.get_pull(int(number)).get_review_comments()
        return self._guard(
            lambda: [
                ReviewComment(c.id, c.path, c.body or "", c.pull_request_review_id, c.line or c.original_line)
                for c in comments
            ]
        )

    def list_prs(self, state: str = "all") -> list[PullRef]:
        """Every pull request in ``state``, oldest first (one request per 100)."""
        pulls = self._repo.get_pulls(state=state, sort="created", direction="asc")
        return self._guard(lambda: [pull_ref(p) for p in pulls])

    def find_pr_by_marker(self, marker: str, state: str = "all") -> PullRef | None:
        """The oldest pull request the bot opened in ``state`` whose body carries ``marker`` (listing, as for issues)."""
        pulls = self._repo.get_pulls(state=state, sort="created", direction="asc")
        return self._guard(lambda: next((pull_ref(p) for p in pulls if marker in (p.body or "") and self._mine(p)),
                                        None))

    def commits_since(self, since: str, author: str) -> list[CommitRef]:
        """Commits on the default branch by ``author`` since ``since`` (ISO 8601), newest first."""
        when = datetime.fromisoformat(since.replace("Z", "+00:00"))
        commits = self._repo.get_commits(since=when, author=author)
        return self._guard(lambda: [commit_ref(c) for c in commits])

    def dispatch_workflow(self, workflow: str, ref: str, inputs: dict[str, str]) -> None:
        """Start ``workflow`` (its file name) on ``ref`` through ``workflow_dispatch``: one request."""
        url = f"{self._repo.url}/actions/workflows/{quote(workflow, safe='')}/dispatches"
        self._guard(lambda: self._gh.requester.requestJsonAndCheck("POST", url, input={"ref": ref, "inputs": inputs}))

    def default_branch(self) -> str:
        """The default branch's name (the repository costs one request, once)."""
        return self._guard(lambda: self._repo.default_branch)

    def default_branch_sha(self) -> str:
        branch = self.default_branch()
        return self._guard(lambda: self._repo.get_git_ref(f"heads/{branch}").object.sha)

    def create_branch(self, name: str, from_sha: str) -> None:
        """A new branch at ``from_sha``; GitHubError 422 when it exists already."""
        self._guard(lambda: self._repo.create_git_ref(f"refs/heads/{name}", from_sha))

    def commit_files(self, branch: str, files: Mapping[str, str | None], message: str) -> bool:
        """Write (or, for None, delete) every file in ``files`` on ``branch`` as ONE commit; False when none changes.

        The Git Data API: the branch head, its tree (to skip files that already
        hold their text), then a new tree, a commit and a fast-forward of the
        branch: three requests, and three more when something changed.
        """
        ref = self._guard(lambda: self._repo.get_git_ref(f"heads/{branch}"))
        head = self._guard(lambda: self._repo.get_git_commit(ref.object.sha))
        tree = self._guard(lambda: self._repo.get_git_tree(head.tree.sha, recursive=True))
        if tree.raw_data.get("truncated"):
            raise GitHubError(f"the tree of {branch} is too large to list; commit fewer files", status=422)
        have = {e.path: e.sha for e in tree.tree if e.type == "blob"}
        elements = []
        for path, text in sorted(files.items()):
            if text is None:
                if path in have:
                    elements.append(InputGitTreeElement(path, "100644", "blob", sha=None))
            elif have.get(path) != blob_sha(text):
                elements.append(InputGitTreeElement(path, "100644", "blob", content=text))
        if not elements:
            return False
        new_tree = self._guard(lambda: self._repo.create_git_tree(elements, base_tree=head.tree))
        commit = self._guard(lambda: self._repo.create_git_commit(message, new_tree, [head]))
        self._guard(lambda: ref.edit(commit.sha))
        return True

    def create_pr(self, title: str, body: str, head: str, base: str) -> PullRef:
        return pull_ref(self._guard(lambda: self._repo.create_pull(base=base, head=head, title=title, body=body)))

    def update_pr(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRef:
        changes = {k: v for k, v in (("title", title), ("body", body)) if v is not None}
        pull = self._repo.get_pull(int(number))  # lazy: the edit is the one request
        self._guard(lambda: pull.edit(**changes))
        return pull_ref(pull)

    # Claims: one writer per key at a time, across concurrent workflow runs

    def claim(self, key: str, *, timeout: float = 120.0, poll: float = 0.25, stale_after: float = 600.0) -> None:
        """Hold the claim on ``key``: a repository label only one run can create (GitHub answers 422 to the rest).

        A run that finds the claim taken waits until it is released, so ten
        deliveries of one failure file one issue even without a concurrency
        group; a claim older than ``stale_after`` (its holder died) is taken over.
        """
        name, deadline = claim_label(key), time.monotonic() + timeout
        while True:
            try:
                self._guard(lambda: self._repo.create_label(name, "ededed", f"{time.time():.0f} {key}"[:100]))
                return
            except GitHubError as exc:
                if exc.status != 422:
                    raise
            held_since = self._claimed_at(name)
            if held_since is not None and time.time() - held_since > stale_after:
                self.release(key)
            elif time.monotonic() > deadline:
                raise GitHubError(f"another run has held the claim on {key} for over {timeout:.0f}s; run this job "
                                  "again once it finishes", status=409)
            else:
                time.sleep(poll)

    def release(self, key: str) -> None:
        try:
            self._guard(lambda: self._gh.requester.requestJsonAndCheck(
                "DELETE", f"{self._repo.url}/labels/{quote(claim_label(key), safe='')}"))
        except GitHubError as exc:
            if exc.status != 404:
                raise

    def _claimed_at(self, name: str) -> float | None:
        try:
            description = self._guard(lambda: self._repo.get_label(name).description)  # lazy: read it in the guard
            return float((description or "").split(" ", 1)[0])
        except GitHubError as exc:
            if exc.status == 404:
                return None  # released meanwhile: try again at once
            raise
        except ValueError:
            return 0.0  # not ours to read: stale

    # Plumbing

    def _create_once(self, body: str, create: Callable[[], T], find: Callable[[str], T | None]) -> T:
        """``create()``, retried after a 5xx or a lost answer only once its first marker is not found written."""
        keys = marker_keys(body)
        for attempt in range(self._retries + 1):
            try:
                return self._guard(create)
            except GitHubError as exc:
                if not (exc.status == 0 or exc.status >= 500) or attempt == self._retries:
                    raise
                found = find(marker(keys[0])) if keys else None
                if found is not None:
                    return found  # GitHub wrote it before the answer was lost
                self._sleep(self._backoff * 2**attempt)
        raise AssertionError("unreachable")

    def _mine(self, item: Any) -> bool:
        return written_by(item.user.login if item.user else "", self.bot_logins)

    def _download(self, url: str) -> str:
        # The Location is a signed URL on another host: no token goes with it.
        for attempt in range(self._retries + 1):
            self.calls += 1
            try:
                response = requests.get(url, timeout=self._timeout)
            except requests.RequestException as exc:
                if attempt == self._retries:
                    raise GitHubError(f"downloading a job log failed: {exc}", path=url) from exc
                self._sleep(self._backoff * 2**attempt)
                continue
            if response.status_code < 500 or attempt == self._retries:
                break
            self._sleep(self._backoff * 2**attempt)
        if response.status_code != 200:
            raise GitHubError(
                f"downloading a job log failed: HTTP {response.status_code}; "
                "the signed log URL lasts about a minute, so fetch it again with job_log()",
                status=response.status_code,
                path=url,
            )
        return response.text

    def _retrying(self, request: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(request)
        def call(verb: str, url: str, *args: Any, **kwargs: Any) -> T:
            # The one door every write to GitHub goes through: no secret this process holds leaves in a body,
            # whatever text (a scenario's error, an agent's output, a log) the bot was given to post.
            if kwargs.get("input") is not None:
                kwargs["input"] = redact_data(kwargs["input"], self._redact)
            for attempt in range(self._retries + 1):
                self.calls += 1
                try:
                    return request(verb, url, *args, **kwargs)
                except GithubException as exc:
                    exc.replaybook_request = f"{verb} {url}"  # type: ignore[attr-defined]
                    wait = self._wait_for(exc, attempt)
                    if wait is None or attempt == self._retries:
                        raise
                    if verb == "POST" and exc.status >= 500 and _CREATES.search(urlsplit(url).path):
                        raise  # it may have been written: _create_once looks for its marker before resending
                    self._sleep(wait)
            raise AssertionError("unreachable")

        return call

    def _wait_for(self, exc: GithubException, attempt: int) -> float | None:
        """How long to wait before retrying ``exc``, or None when retrying cannot help."""
        if exc.status >= 500:
            return self._backoff * 2**attempt
        if exc.status in (403, 429):
            headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
            if "retry-after" in headers:
                try:
                    return max(0.0, float(headers["retry-after"]))
                except ValueError:
                    return SECONDARY_LIMIT_WAIT
            message = str((exc.data or {}).get("message", "")) if isinstance(exc.data, dict) else ""
            if "secondary rate limit" in message.lower():
                return SECONDARY_LIMIT_WAIT
        return None

    def _guard(self, action: Callable[[], T]) -> T:
        """Run ``action``, turning PyGithub's and the network's errors into GitHubError."""
        try:
            return action()
        except GithubException as exc:
            raise github_error(exc) from exc
        except requests.RequestException as exc:
            raise GitHubError(f"GitHub could not be reached: {exc}") from exc


