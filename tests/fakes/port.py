"""An in-memory :class:`bot.github.port.GitHubPort`: the repository as plain data, for handler and PR tests.

It is a real implementation of the port, not a mock: issues, comments, PRs,
branches with their files, statuses and claims behave as the adapter's do
against GitHub (bot-only markers, one commit per ``commit_files``, a 422 for a
branch that exists), and it records what was written, as bedevere's
``FakeGH`` does. The adapter itself (PyGithub over HTTP) is tested against the
HTTP fake in ``tests/fakes/github.py``; this one is for what lies above the port.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from bot.github import port as gh
from bot.github.port import (
    CommentRef,
    CommitRef,
    GitHubError,
    IssueRef,
    PullRef,
    marker_keys,
    written_by,
)


@dataclass
class Branch:
    sha: str
    files: dict[str, str]
    commits: int = 0


@dataclass
class FakePort:
    """The bot's view of one repository. ``login`` is who the port writes as."""

    login: str = gh.BOT_LOGINS[0]
    default: str = "main"
    issues: dict[int, IssueRef] = field(default_factory=dict)
    comments: list[CommentRef] = field(default_factory=list)
    pulls: dict[int, PullRef] = field(default_factory=dict)
    branches: dict[str, Branch] = field(default_factory=dict)
    statuses: list[dict] = field(default_factory=list)
    dispatched: list[dict] = field(default_factory=list)
    jobs: dict[int, list[gh.Job]] = field(default_factory=dict)
    logs: dict[int, str] = field(default_factory=dict)
    commits: list[CommitRef] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)  # (branch, message) of each commit_files commit
    claims: set[str] = field(default_factory=set)
    bases: dict[int, str] = field(default_factory=dict)  # each PR's base branch (PullRef does not carry it)
    writes: list[str] = field(default_factory=list)  # each write the port was asked for (failed ones too), by method
    check_runs: list[gh.CheckRun] = field(default_factory=list)  # issue 30: the gate as a check run
    heads: dict[int, str] = field(default_factory=dict)  # issue 30: a PR's head commit, where set_head put it
    permissions: dict[str, str] = field(default_factory=dict)  # issue 30: login -> admin | write | read | none
    reactions: dict[int, list[gh.Reaction]] = field(default_factory=dict)  # issue 30: comment id -> reactions
    calls: int = 0

    def __post_init__(self) -> None:
        self._numbers = itertools.count(1)
        self._ids = itertools.count(1000)
        self._shas = (f"{n:040x}" for n in itertools.count(1))
        self.branches.setdefault(self.default, Branch(next(self._shas), {}))

    def _call(self) -> None:
        self.calls += 1

    def _write(self, method: str) -> None:
        self._call()
        self.writes.append(method)

    # -- issues and comments

    def find_issue_by_marker(self, marker: str) -> IssueRef | None:
        self._call()
        return next((i for _, i in sorted(self.issues.items())
                     if marker in i.body and gh.BOT_LABEL in i.labels and written_by(i.author, [self.login])), None)

    def get_issue(self, number: int) -> IssueRef:
        self._call()
        if number not in self.issues:
            raise GitHubError(f"issue #{number} not found", status=404)
        return self.issues[number]

    def list_issues(self, label: str, state: str = "open") -> list[IssueRef]:
        self._call()
        return [i for _, i in sorted(self.issues.items()) if label in i.labels and state in ("all", i.state)]

    def open_issues(self) -> list[IssueRef]:
        self._call()
        return [i for _, i in sorted(self.issues.items()) if i.state == "open"]

    def create_issue(self, title: str, body: str, labels: Sequence[str] = ()) -> IssueRef:
        self._write("create_issue")
        _fits(body)
        number = next(self._numbers)
        issue = IssueRef(number, title, body, "open", _with_bot_label(labels), f"https://github.test/issues/{number}",
                         "2026-12-01T00:00:00Z", self.login)
        self.issues[number] = issue
        return issue

    def file_issue(self, title: str, body: str, labels: Sequence[str] = (), author: str = "a-person") -> IssueRef:
        """An issue someone opened (not the bot), with exactly ``labels``: test set-up, not part of the port."""
        issue = replace(self.create_issue(title, body, labels), author=author, labels=tuple(labels))
        self.issues[issue.number] = issue
        self.calls -= 1
        self.writes.pop()
        return issue

    def edit_issue(self, number: int, body: str) -> IssueRef:
        """A person edits an issue's body on GitHub: test set-up, not part of the port."""
        self.issues[number] = replace(self.issues[number], body=body)
        return self.issues[number]

    def update_issue(self, number: int, *, body: str | None = None, labels: Sequence[str] | None = None,
                     state: str | None = None) -> IssueRef:
        issue = self.get_issue(number)
        self.writes.append("update_issue")
        _fits(body)
        issue = replace(issue, body=issue.body if body is None else body,
                        labels=issue.labels if labels is None else _with_bot_label(labels), state=state or issue.state)
        self.issues[number] = issue
        return issue

    def add_comment(self, number: int, body: str) -> CommentRef:
        self._write("add_comment")
        if number not in self.issues and number not in self.pulls:
            raise GitHubError(f"issue #{number} not found", status=404)
        _fits(body)
        comment = CommentRef(next(self._ids), number, body, f"https://github.test/issues/{number}#c", self.login)
        self.comments.append(comment)
        return comment

    def comment_as(self, number: int, body: str, author: str) -> CommentRef:
        """A comment someone else wrote: test set-up, not part of the port."""
        comment = replace(self.add_comment(number, body), author=author)
        self.comments[-1] = comment
        self.calls -= 1
        self.writes.pop()
        return comment

    def find_comment_by_marker(self, number: int, marker: str) -> CommentRef | None:
        self._call()
        return next((c for c in self.comments if c.issue_number == number and marker in c.body
                     and written_by(c.author, [self.login])), None)

    def upsert_comment(self, number: int, marker: str, body: str) -> CommentRef:
        found = self.find_comment_by_marker(number, marker)
        if found is None:
            return self.add_comment(number, body if marker in body else f"{marker}\n{body}")
        self._write("upsert_comment")
        _fits(body)
        updated = replace(found, body=body if marker in body else f"{marker}\n{body}")
        self.comments[self.comments.index(found)] = updated
        return updated

    def comments_on(self, number: int) -> list[CommentRef]:
        return [c for c in self.comments if c.issue_number == number]

    # -- runs, statuses, dispatches

    def set_status(self, sha: str, state: str, context: str, description: str, target_url: str | None = None) -> None:
        self._write("set_status")
        # The adapter caps the description at GitHub's 140 characters, as here.
        text = description if len(description) <= 140 else description[:139] + "…"
        self.statuses.append({"sha": sha, "state": state, "context": context, "description": text,
                              "target_url": target_url})

    def statuses_for(self, sha: str) -> list[dict]:
        """The statuses set on ``sha``, oldest first: a test's reading, not part of the port."""
        return [s for s in self.statuses if s["sha"] == sha]

    def collaborator_permission(self, login: str) -> str:
        self._call()
        return next((p for name, p in self.permissions.items() if name.lower() == login.lower()), "read")

    def add_reaction(self, comment_id: int, content: str) -> None:
        self._write("add_reaction")
        mine = self.reactions.setdefault(comment_id, [])
        if gh.Reaction(content, self.login) not in mine:
            mine.append(gh.Reaction(content, self.login))

    def comment_reactions(self, comment_id: int) -> list[gh.Reaction]:
        self._call()
        return list(self.reactions.get(comment_id, []))

    def failed_jobs(self, run_id: int) -> list[gh.Job]:
        self._call()
        return [j for j in self.jobs.get(run_id, []) if j.conclusion in ("failure", "timed_out")]

    def job_log(self, job_id: int) -> str:
        self._call()
        if job_id not in self.logs:
            raise GitHubError(f"no log for job {job_id}", status=404)
        return self.logs[job_id]

    def dispatch_workflow(self, workflow: str, ref: str, inputs: dict[str, str]) -> None:
        self._write("dispatch_workflow")
        self.dispatched.append({"workflow": workflow, "ref": ref, "inputs": dict(inputs)})

    def commits_since(self, since: str, author: str) -> list[CommitRef]:
        self._call()
        return [c for c in self.commits if c.date >= since and c.author.lower() == author.lower()]

    # -- pull requests and branches

    def pull_files(self, number: int) -> list[gh.FileChange]:
        self._call()
        pr = self.pulls[number]
        return [gh.FileChange(p, "modified", 1, 0) for p in sorted(self.branches.get(pr.head_ref, Branch("", {})).files)]

    def review_comments(self, number: int) -> list[gh.ReviewComment]:
        self._call()
        return []

    def list_prs(self, state: str = "all") -> list[PullRef]:
        self._call()
        return [p for _, p in sorted(self.pulls.items()) if state in ("all", p.state)]

    def find_pr_by_marker(self, marker: str, state: str = "all") -> PullRef | None:
        return next((p for p in self.list_prs(state) if marker in p.body and written_by(p.author, [self.login])), None)

    def default_branch(self) -> str:
        self._call()
        return self.default

    def default_branch_sha(self) -> str:
        self._call()
        return self.branches[self.default].sha

    def point(self, branch: str, sha: str) -> None:
        """A branch at commit ``sha`` (made from the default branch's files, or moved): test set-up."""
        current = self.branches.get(branch) or Branch(sha, dict(self.branches[self.default].files))
        current.sha = sha
        self.branches[branch] = current

    def add_file(self, path: str, text: str, branch: str | None = None) -> None:
        """A file already on a branch (the default one unless named): test set-up, not part of the port."""
        self.branches[branch or self.default].files[path] = text

    def create_branch(self, name: str, from_sha: str) -> None:
        self._write("create_branch")
        if name in self.branches:
            raise GitHubError("Reference already exists", status=422)
        source = next((b for b in self.branches.values() if b.sha == from_sha), None)
        if source is None:
            raise GitHubError("Object does not exist", status=422)
        self.branches[name] = Branch(from_sha, dict(source.files))

    def commit_files(self, branch: str, files: Mapping[str, str | None], message: str) -> bool:
        self._call()
        target = self.branches[branch]
        after = dict(target.files)
        for path, text in files.items():
            if text is None:
                after.pop(path, None)
            else:
                after[path] = text
        if after == target.files:
            return False
        self.writes.append("commit_files")
        target.files, target.sha, target.commits = after, next(self._shas), target.commits + 1
        self.messages.append((branch, message))
        return True

    def add_pull(self, title: str = "A pull request", body: str = "", head_ref: str = "feature",
                 author: str = "a-person", *, state: str = "open", merged: bool = False, fork: bool = False) -> PullRef:
        """A pull request someone opened (from a fork's branch with ``fork``): test set-up, not part of the port."""
        number = next(self._numbers)
        self.pulls[number] = PullRef(number, "closed" if merged else state, merged, head_ref, body, title,
                                     f"https://github.test/pull/{number}", author,
                                     merged_at=_now() if merged else None, same_repo=not fork)
        self.bases[number] = self.default
        return self.pulls[number]

    def add_commit(self, message: str, author: str, date: str | None = None) -> CommitRef:
        """A commit on the default branch by ``author`` (now, unless ``date``): test set-up, not part of the port."""
        commit = CommitRef(next(self._shas), message, date or _now(), author)
        self.commits.append(commit)
        return commit

    def close(self, number: int) -> None:
        """A maintainer closes a PR without merging it: test set-up, not part of the port."""
        self.pulls[number] = replace(self.pulls[number], state="closed")

    def create_pr(self, title: str, body: str, head: str, base: str) -> PullRef:
        self._write("create_pr")
        if any(p.head_ref == head and p.state == "open" for p in self.pulls.values()):
            raise GitHubError(f"A pull request already exists for {head}", status=422)
        _fits(body)
        number = next(self._numbers)
        pr = PullRef(number, "open", False, head, body, title, f"https://github.test/pull/{number}", self.login)
        self.pulls[number], self.bases[number] = pr, base
        return pr

    def update_pr(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRef:
        self._write("update_pr")
        pr = self.pulls[number]
        _fits(body)
        pr = replace(pr, title=pr.title if title is None else title, body=pr.body if body is None else body)
        self.pulls[number] = pr
        return pr

    def merge(self, number: int) -> None:
        """Merge a PR (a fast-forward of its files onto the default branch): test set-up, not part of the port."""
        pr = self.pulls[number]
        main = self.branches[self.default]
        main.files, main.sha = dict(self.branches[pr.head_ref].files), next(self._shas)
        self.pulls[number] = replace(pr, state="closed", merged=True, merged_at=_now())

    def keys_of(self, number: int) -> list[str]:
        return marker_keys(self.pulls[number].body)

    # -- claims

    def claim(self, key: str) -> None:
        self._write("claim")
        if key in self.claims:
            raise GitHubError(f"another run holds the claim on {key}", status=409)
        self.claims.add(key)

    def release(self, key: str) -> None:
        self._write("release")
        self.claims.discard(key)

    # -- check runs and the gated-PR search (issue 30), kept in one block

    def create_check_run(self, run: gh.CheckRun) -> str:
        """As the adapter: GitHub's limits enforced (a 422), one request and one more per further 50 annotations."""
        self._write("create_check_run")
        self.calls += max(0, -(-len(run.annotations) // gh.ANNOTATIONS_PER_REQUEST) - 1)
        if len(run.summary) > gh.CHECK_TEXT_LIMIT:
            raise GitHubError(f"Only {gh.CHECK_TEXT_LIMIT} characters are allowed; {len(run.summary)} were supplied",
                              status=422)
        if len(run.actions) > 3:
            raise GitHubError("at most 3 actions", status=422)
        self.check_runs.append(run)
        return f"https://github.test/runs/{len(self.check_runs)}"

    def check_runs_for(self, sha: str) -> list[gh.CheckRun]:
        """The check runs made on ``sha``, oldest first: a test's reading, not part of the port."""
        return [r for r in self.check_runs if r.head_sha == sha]

    def search_pulls(self, qualifiers: str, context: str) -> list[gh.GatedPull]:
        """One request, as the adapter's GraphQL search: ``is:open``, ``is:closed`` and ``head:PREFIX`` are read."""
        self._call()
        terms = qualifiers.split()
        out = []
        for number, pr in sorted(self.pulls.items(), reverse=True):
            if ("is:open" in terms and pr.state != "open") or ("is:closed" in terms and pr.state != "closed"):
                continue
            if any(t.startswith("head:") and not pr.head_ref.startswith(t[5:]) for t in terms):
                continue
            out.append(gh.GatedPull(pr, self._gate_state(pr, context), tuple(self.comments_on(number))))
        return out[:100]

    def set_head(self, number: int, sha: str) -> None:
        """The head commit of PR ``number`` (what its gate's state is read on): test set-up, not part of the port."""
        self.heads[number] = sha

    def _gate_state(self, pr: PullRef, context: str) -> str:
        sha = self.heads.get(pr.number) or self.branches.get(pr.head_ref, Branch("", {})).sha
        runs = [r for r in self.check_runs_for(sha) if r.name == context]
        if runs:
            return runs[-1].conclusion
        statuses = [s for s in self.statuses_for(sha) if s["context"] == context]
        return statuses[-1]["state"] if statuses else "none"


def _with_bot_label(labels: Sequence[str]) -> tuple[str, ...]:
    """The adapter labels every issue the bot files or edits with the bot's label, first."""
    return tuple(dict.fromkeys([gh.BOT_LABEL, *labels]))


def _fits(body: str | None) -> None:
    """GitHub refuses a body over its limit with a 422, as the HTTP fake does."""
    if body is not None and len(body) > gh.BODY_LIMIT:
        raise GitHubError(f"body is too long (maximum is {gh.BODY_LIMIT} characters)", status=422)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
