"""PyGithub's objects read into the port's records (issues, PRs, commits, comments, jobs), and its exceptions into
:class:`~bot.github.port.GitHubError`. Only the adapter imports this (it needs PyGithub)."""

from __future__ import annotations

import hashlib
from datetime import timezone
from typing import Any
from urllib.parse import quote

from github import GithubException
from github.WorkflowJob import WorkflowJob

from bot.github.port import (
    PERMISSIONS,
    BranchRules,
    CommentRef,
    CommitRef,
    DeployEnvironment,
    GatedPull,
    GitHubError,
    IssueRef,
    Job,
    PullRef,
    Reaction,
    RequiredCheck,
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


# ------------------------------------------------------------------ GraphQL answers (the gated-PR search)

SEARCH_PULLS = """
query ReplaybookGatedPulls($q: String!, $first: Int!) {
  search(query: $q, type: ISSUE, first: $first) {
    issueCount
    nodes {
      __typename
      ... on PullRequest {
        number title body url state merged mergedAt headRefName isCrossRepository
        author { __typename login }
        labels(first: 20) { nodes { name } }
        comments(last: 100) { nodes { databaseId author { __typename login } body url } }
        commits(last: 1) { nodes { commit { oid statusCheckRollup { contexts(first: 100) { nodes {
          __typename
          ... on CheckRun { name status conclusion }
          ... on StatusContext { context state }
        } } } } } }
      }
    }
  }
}
"""
"""One search: pull requests with their comments (the gate ledger) and their head's checks (the gate's state)."""

_PENDING = {"QUEUED", "IN_PROGRESS", "WAITING", "REQUESTED", "PENDING", "EXPECTED"}


def _login(actor: Any) -> str:
    """A REST-style login: GraphQL gives a bot's without the ``[bot]`` suffix REST shows."""
    if not isinstance(actor, dict):
        return ""
    login = str(actor.get("login") or "")
    return f"{login}[bot]" if actor.get("__typename") == "Bot" and login and not login.endswith("[bot]") else login


def gate_state(contexts: list[Any], context: str) -> str:
    """The state of the check run named ``context``, else of the commit status of that context, else none."""
    checks = [c for c in contexts if isinstance(c, dict) and c.get("__typename") == "CheckRun" and c.get("name") == context]
    if checks:
        last = checks[-1]
        if str(last.get("status") or "").upper() != "COMPLETED":
            return "pending"
        return str(last.get("conclusion") or "pending").lower()
    statuses = [c for c in contexts if isinstance(c, dict) and c.get("__typename") == "StatusContext"
                and c.get("context") == context]
    if statuses:
        state = str(statuses[-1].get("state") or "").upper()
        return "pending" if state in _PENDING else state.lower()
    return "none"


def gated_pull(node: dict, context: str) -> GatedPull:
    """One pull request of the GraphQL search, as the port's record."""
    state = str(node.get("state") or "").upper()
    number = int(node["number"])
    commits = ((node.get("commits") or {}).get("nodes") or [{}])
    rollup = ((commits[-1] or {}).get("commit") or {}).get("statusCheckRollup") or {}
    contexts = (rollup.get("contexts") or {}).get("nodes") or []
    pull = PullRef(number=number, state="open" if state == "OPEN" else "closed", merged=bool(node.get("merged")),
                   head_ref=str(node.get("headRefName") or ""), body=str(node.get("body") or ""),
                   title=str(node.get("title") or ""), url=str(node.get("url") or ""), author=_login(node.get("author")),
                   merged_at=node.get("mergedAt"), labels=tuple(str(n.get("name")) for n in
                                                              (node.get("labels") or {}).get("nodes") or [] if n),
                   same_repo=not node.get("isCrossRepository", True))
    comments = tuple(CommentRef(id=int(c.get("databaseId") or 0), issue_number=number, body=str(c.get("body") or ""),
                                url=str(c.get("url") or ""), author=_login(c.get("author")))
                     for c in (node.get("comments") or {}).get("nodes") or [] if isinstance(c, dict))
    return GatedPull(pull, gate_state(contexts, context), comments)


UNPROTECTED = ("Branch not protected", "Required status checks not enabled")
"""GitHub's messages with a 404 from the protection endpoints when the branch has no such protection."""


class SetupReads:
    """The adapter's :class:`~bot.github.port.SetupPort` (what ``replaybook doctor`` reads), over its ``_get``:
    GitHub's published REST shapes read into the port's records."""

    _repo: Any

    def _get(self, url: str, params: dict | None = None) -> Any:
        raise NotImplementedError

    def branch_rules(self, branch: str) -> BranchRules:
        """The active ruleset rules on ``branch``: its required checks, and whether a merge queue is on (read access)."""
        checks, queue = [], False
        for rule in self._pages(f"{self._repo.url}/rules/branches/{quote(branch, safe='')}", None):
            kind = rule.get("type") if isinstance(rule, dict) else None
            queue = queue or kind == "merge_queue"
            if kind != "required_status_checks":
                continue
            source = f"ruleset {rule.get('ruleset_source') or rule.get('ruleset_id') or '?'}"
            for item in (rule.get("parameters") or {}).get("required_status_checks") or []:
                if isinstance(item, dict) and isinstance(item.get("context"), str):
                    checks.append(RequiredCheck(item["context"], item.get("integration_id"), source))
        return BranchRules(tuple(checks), queue)

    def protection_checks(self, branch: str) -> tuple[RequiredCheck, ...]:
        """The checks classic branch protection requires on ``branch`` (administration: read; else 403 or 404)."""
        try:
            data = self._get(f"{self._repo.url}/branches/{quote(branch, safe='')}/protection/required_status_checks")
        except GitHubError as exc:
            # GitHub's 404 to a reader who may see the protection: there is none. Any other 404 may hide it.
            if exc.status == 404 and any(m in exc.message for m in UNPROTECTED):
                return ()
            raise
        data = data if isinstance(data, dict) else {}
        pinned = [RequiredCheck(c["context"], c.get("app_id"), "branch protection")
                  for c in data.get("checks") or [] if isinstance(c, dict) and isinstance(c.get("context"), str)]
        named = {c.context for c in pinned}
        return tuple(pinned + [RequiredCheck(c, None, "branch protection") for c in data.get("contexts") or []
                               if isinstance(c, str) and c not in named])

    def secret_names(self) -> frozenset[str]:
        """Names of the Actions secrets the workflows can read, the repository's and its organisation's (GitHub lists
        no value)."""
        return self._names("secrets")

    def variable_names(self) -> frozenset[str]:
        """Names of the Actions variables, the repository's and its organisation's (their values are not kept)."""
        return self._names("variables")

    def environment(self, name: str) -> DeployEnvironment | None:
        """The environment ``name`` and its deployment branch policy; None when it does not exist (404)."""
        url = f"{self._repo.url}/environments/{quote(name, safe='')}"
        try:
            data = self._get(url)
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        policy = data.get("deployment_branch_policy") if isinstance(data, dict) else None
        if not isinstance(policy, dict):
            return DeployEnvironment(name, "all")
        if policy.get("protected_branches") is True:
            return DeployEnvironment(name, "protected")
        if policy.get("custom_branch_policies") is not True:
            return DeployEnvironment(name, "all")
        items = self._pages(f"{url}/deployment-branch-policies", "branch_policies")
        return DeployEnvironment(name, "custom", tuple(
            ("tag:" if item.get("type") == "tag" else "") + item["name"] for item in items
            if isinstance(item, dict) and isinstance(item.get("name"), str)))

    def environment_secret_names(self, name: str) -> frozenset[str]:
        """Names of the environment's own secrets (GitHub lists no value)."""
        return frozenset(item["name"] for item in
                         self._pages(f"{self._repo.url}/environments/{quote(name, safe='')}/secrets", "secrets")
                         if isinstance(item, dict) and isinstance(item.get("name"), str))

    def _names(self, what: str) -> frozenset[str]:
        return frozenset(item["name"] for path in (what, f"organization-{what}")
                         for item in self._pages(f"{self._repo.url}/actions/{path}", what)
                         if isinstance(item, dict) and isinstance(item.get("name"), str))

    def _pages(self, url: str, key: str | None, limit: int = 10) -> list:
        """Every item of a listing, 100 a page (``key``: the list's field when GitHub answers with an object)."""
        out: list = []
        for page in range(1, limit + 1):
            data = self._get(url, {"per_page": 100, "page": page})
            items = (data.get(key) if isinstance(data, dict) else None) if key else data
            out += items if isinstance(items, list) else []
            if not isinstance(items, list) or len(items) < 100:
                return out
        return out


class CommentCalls:
    """The adapter's calls for comment commands, over its ``_get`` and ``_post``: who may run one
    (the collaborator-permission endpoint), and the reaction that marks one handled."""

    _repo: Any

    def _get(self, url: str, params: dict | None = None) -> Any:
        raise NotImplementedError

    def _post(self, url: str, body: dict) -> Any:
        raise NotImplementedError

    def collaborator_permission(self, login: str) -> str:
        """admin, write, read or none (one request); a login GitHub does not know is ``none``."""
        try:
            data = self._get(f"{self._repo.url}/collaborators/{quote(login, safe='')}/permission")
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise
        value = data.get("permission") if isinstance(data, dict) else None
        return value if value in PERMISSIONS else "none"

    def add_reaction(self, comment_id: int, content: str) -> None:
        self._post(f"{self._repo.url}/issues/comments/{int(comment_id)}/reactions", {"content": content})

    def comment_reactions(self, comment_id: int, limit: int = 10) -> list[Reaction]:
        """Every reaction on the comment, 100 a page (at most ``limit`` pages)."""
        out: list[Reaction] = []
        for page in range(1, limit + 1):
            items = self._get(f"{self._repo.url}/issues/comments/{int(comment_id)}/reactions",
                              {"per_page": 100, "page": page})
            items = items if isinstance(items, list) else []
            out += [Reaction(str(r.get("content") or ""), str((r.get("user") or {}).get("login") or ""))
                    for r in items if isinstance(r, dict)]
            if len(items) < 100:
                break
        return out
