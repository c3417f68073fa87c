"""A stateful fake GitHub REST API, served over HTTP on 127.0.0.1.

PyGithub runs against it for real. It answers in GitHub's shapes (checked
against GitHub's OpenAPI description by tests/github/test_fake_github.py), builds
every absolute URL from the request's ``Host`` (PyGithub asserts on it),
pages lists with ``Link`` headers, counts every request, and injects faults:

    with FakeGitHub() as gh:
        gh.fail_next("/repos/o/r/issues", 502)
        gh.rate_limit_next("/repos/o/r/statuses", retry_after=1)
        gh.add_workflow_run(7, jobs=[{"name": "test", "conclusion": "failure"}], logs={"test": "..."})
        PyGithubAdapter("o/r", "token", gh.url, ...)

Endpoints: the repository; issues (list with state/labels, create, get,
edit); issue comments (list, create, get, edit); commit statuses (create,
combined); workflow runs (get), their jobs (list), a job (get) and its logs
(302 to plain text on the same host); a pull request's files and review
comments (list), seeded with ``add_pull``; pull requests (list, create, edit),
branches (get a ref, create one) and files on a branch through the Git
Data API (trees, commits, a ref's update), as the port writes them. Branch ``main`` starts at ``MAIN_SHA`` with
no files; ``add_file`` seeds one. Check runs (create, update) and the one GraphQL pull-request search the
adapter sends: see the block "Check runs and search" at the end.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

SECONDARY_LIMIT = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
DOCS = "https://docs.github.com/rest"
MAIN_SHA = "c" * 40


@dataclass
class Fault:
    prefix: str
    status: int
    method: str | None
    headers: dict[str, str]
    message: str
    count: int
    after_write: bool = False  # carry the request out, then answer with the error (a 502 from a proxy)


@dataclass
class Request:
    method: str
    path: str
    status: int
    body: Any = None


BOT_LOGIN = "github-actions[bot]"
"""Who every write through the API is made as: the workflow token's identity."""


@dataclass
class _State:
    issues: dict[int, dict] = field(default_factory=dict)
    comments: dict[int, dict] = field(default_factory=dict)
    statuses: dict[str, list[dict]] = field(default_factory=dict)
    runs: dict[int, dict] = field(default_factory=dict)
    jobs: dict[int, dict] = field(default_factory=dict)
    logs: dict[int, str] = field(default_factory=dict)
    pulls: dict[int, dict] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=lambda: {"main": MAIN_SHA})  # branch -> head sha
    files: dict[str, dict[str, str]] = field(default_factory=lambda: {"main": {}})  # branch -> path -> text
    commits: list[dict] = field(default_factory=list)  # on main, newest first: sha, message, date, author
    dispatches: list[dict] = field(default_factory=list)  # workflow, ref, inputs
    trees: dict[str, dict[str, str]] = field(default_factory=dict)  # tree sha -> path -> text (Git Data API)
    git_commits: dict[str, dict] = field(default_factory=dict)  # commit sha -> tree, parents, message
    labels: dict[str, dict] = field(default_factory=dict)  # repository labels created through the API: name -> label
    check_runs: dict[int, dict] = field(default_factory=dict)  # check runs (see "Check runs and search" below)
    next_id: int = 1000


class FakeGitHub:
    """One repository's worth of GitHub. Use as a context manager."""

    def __init__(self, owner: str = "octo", repo: str = "app", *, api_prefix: str = ""):
        self.owner, self.repo = owner, repo
        self.prefix = api_prefix.rstrip("/")
        self.state = _State()
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle

    def __enter__(self) -> FakeGitHub:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server and self._thread
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        """The base URL to give PyGithub."""
        assert self._server, "start the fake first: `with FakeGitHub() as gh:`"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

    @property
    def repo_path(self) -> str:
        return f"/repos/{self.owner}/{self.repo}"

    # Fault injection

    def fail_next(
        self,
        path_prefix: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        message: str | None = None,
        count: int = 1,
        method: str | None = None,
        after_write: bool = False,
    ) -> None:
        """Answer the next ``count`` requests whose path starts with ``path_prefix`` with ``status``.

        With ``after_write`` the request is carried out first, as when GitHub wrote and the answer was lost.
        """
        default = {404: "Not Found", 403: "Forbidden", 429: "Too Many Requests"}.get(status, "Server Error")
        with self.lock:
            self.faults.append(Fault(path_prefix, status, method, dict(headers or {}), message or default, count,
                                     after_write))

    def rate_limit_next(self, path_prefix: str, *, retry_after: int = 1, status: int = 403, count: int = 1) -> None:
        """A secondary rate limit, as GitHub sends it: 403 (or 429) with ``retry-after``."""
        self.fail_next(path_prefix, status, headers={"retry-after": str(retry_after)}, message=SECONDARY_LIMIT, count=count)

    # Seeding and inspection

    def add_workflow_run(self, run_id: int, *, jobs: list[dict], logs: dict[str, str] | None = None, head_sha: str = "a" * 40) -> dict:
        """A finished run whose ``jobs`` are dicts with ``name``, ``conclusion`` and optional ``steps``/``status``.

        ``logs`` maps a job name to its plain-text log.
        """
        with self.lock:
            run = {"id": run_id, "head_sha": head_sha, "job_ids": [], "conclusion": "success"}
            for spec in jobs:
                job_id = self._new_id()
                conclusion = spec.get("conclusion", "success")
                if conclusion not in ("success", "skipped", None):
                    run["conclusion"] = "failure"
                steps = spec.get("steps") or [{"name": "run", "conclusion": conclusion}]
                self.state.jobs[job_id] = {
                    "id": job_id,
                    "run_id": run_id,
                    "name": spec["name"],
                    "status": spec.get("status", "completed"),
                    "conclusion": conclusion,
                    "steps": [
                        {"number": i, "name": s["name"], "conclusion": s.get("conclusion"), "status": "completed"}
                        for i, s in enumerate(steps, 1)
                    ],
                    "head_sha": head_sha,
                }
                run["job_ids"].append(job_id)
                if logs and spec["name"] in logs:
                    self.state.logs[job_id] = logs[spec["name"]]
            self.state.runs[run_id] = run
            return run

    def add_pull(self, number: int, *, files: list[dict] | None = None, review_comments: list[dict] | None = None,
                 head_sha: str = "b" * 40, title: str = "A pull request", body: str | None = None,
                 state: str = "open", merged: bool = False, head_ref: str = "feature", base_ref: str = "main",
                 user: str = BOT_LOGIN, labels: list[str] | None = None, head_repo: str | None = None) -> dict:
        """A pull request, with its diff and review comments.

        ``files`` are dicts with ``filename`` and optional ``status``, ``additions``, ``deletions``;
        ``review_comments`` are dicts with ``path``, ``body`` and optional ``review_id``, ``line``;
        ``head_repo`` (owner/name) is another repository's for a PR from a fork.
        """
        with self.lock:
            now = _now()
            pull = {"number": number, "head_sha": head_sha, "files": [dict(f) for f in files or []], "comments": [],
                    "id": self._new_id(), "title": title, "body": body, "state": state, "merged": merged,
                    "head_ref": head_ref, "base_ref": base_ref, "created_at": now, "updated_at": now,
                    "closed_at": now if state == "closed" else None, "user": user, "labels": list(labels or []),
                    "head_repo": head_repo}
            for spec in review_comments or []:
                pull["comments"].append({**spec, "id": self._new_id()})
            self.state.pulls[number] = pull
            return pull

    def add_issue(self, title: str, body: str, labels: list[str], *, state: str = "open", user: str = "octocat") -> dict:
        """An issue as if ``user`` had opened it (numbers are shared with pull requests, as on GitHub)."""
        with self.lock:
            number = max([*self.state.pulls, *self.state.issues, 0]) + 1
            now = _now()
            issue = {"id": self._new_id(), "number": number, "title": title, "body": body, "state": state,
                     "labels": list(labels), "created_at": now, "updated_at": now, "user": user}
            self.state.issues[number] = issue
            return issue

    def add_file(self, path: str, text: str, branch: str = "main") -> None:
        with self.lock:
            self.state.files.setdefault(branch, {})[path] = text

    def close_pull(self, number: int, *, merged: bool = False) -> None:
        """Close a pull request; merging brings its branch's files into the base and, as GitHub does for a
        merge into the default branch, closes each issue its body names with ``Closes #N`` (or Fixes, Resolves)."""
        with self.lock:
            pull = self.state.pulls[number]
            pull.update(state="closed", merged=merged, closed_at=_now())
            if not merged:
                return
            head = self.state.files.get(pull["head_ref"])
            if head is not None:
                self.state.files[pull["base_ref"]] = dict(head)
            sha = hashlib.sha1(f"merge-{number}-{pull['head_sha']}".encode()).hexdigest()
            self.state.refs[pull["base_ref"]] = sha
            message = f"{pull['title']} (#{number})\n\n{pull['body'] or ''}"
            self.add_commit(message, author=pull["user"], sha=sha)
            if pull["base_ref"] == "main":
                for ref in re.findall(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?) #(\d+)\b", pull["body"] or ""):
                    issue = self.state.issues.get(int(ref))
                    if issue is not None:
                        issue.update(state="closed", state_reason="completed", updated_at=_now())

    def add_commit(self, message: str, *, author: str, sha: str | None = None, date: str | None = None) -> dict:
        """A commit on main (newest first in listings), for rule-hit scans."""
        with self.lock:
            commit = {"sha": sha or hashlib.sha1(f"{len(self.state.commits)}{message}".encode()).hexdigest(),
                      "message": message, "date": date or _now(), "author": author}
            self.state.commits.insert(0, commit)
            return commit

    @property
    def dispatches(self) -> list[dict]:
        return list(self.state.dispatches)

    @property
    def pulls(self) -> list[dict]:
        """Pull requests, oldest first (``files`` is the diff stat seeded by ``add_pull``)."""
        return list(self.state.pulls.values())

    def branch_files(self, branch: str) -> dict[str, str]:
        return dict(self.state.files.get(branch, {}))

    def writes(self) -> list[Request]:
        """Requests that change something (POST, PATCH, PUT), faults included."""
        return [r for r in self.requests if r.method != "GET"]

    def job_id(self, run_id: int, name: str) -> int:
        return next(j for j in self.state.runs[run_id]["job_ids"] if self.state.jobs[j]["name"] == name)

    def set_role(self, login: str, role: str) -> None:
        """``login``'s role on the repository: admin, maintain, write, triage or read (see "Comment commands")."""
        collaborators(self)[login] = role

    def reactions(self, comment_id: int) -> list[dict]:
        return list(reactions_on(self, comment_id))

    def add_comment(self, number: int, body: str, *, user: str = "octocat") -> dict:
        """A comment on issue or PR ``number`` as if ``user`` had written it."""
        with self.lock:
            now = _now()
            c = {"id": self._new_id(), "issue_number": number, "body": body, "created_at": now, "updated_at": now,
                 "user": user}
            self.state.comments[c["id"]] = c
            return c

    def delete_issue(self, number: int) -> None:
        with self.lock:
            self.state.issues.pop(number)

    @property
    def issues(self) -> list[dict]:
        return list(self.state.issues.values())

    def comments_on(self, number: int) -> list[dict]:
        return [c for c in self.state.comments.values() if c["issue_number"] == number]

    def statuses_for(self, sha: str) -> list[dict]:
        return list(self.state.statuses.get(sha, []))

    @property
    def calls(self) -> int:
        """Requests served, faults included."""
        return len(self.requests)

    def reset_calls(self) -> None:
        with self.lock:
            self.requests.clear()

    def _new_id(self) -> int:
        self.state.next_id += 1
        return self.state.next_id

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if path.startswith(fault.prefix) and fault.method in (None, method):
                    fault.count -= 1
                    if fault.count <= 0:
                        self.faults.remove(fault)
                    return fault
        return None


# Shapes. ``base`` is scheme://host[:port] as the client addressed us.


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _user(base: str, login: str = BOT_LOGIN, user_id: int = 41898282) -> dict:
    u = f"{base}/users/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_{user_id}",
        "avatar_url": f"{base}/avatars/u/{user_id}",
        "gravatar_id": "",
        "url": u,
        "html_url": f"{base}/{login}",
        "followers_url": f"{u}/followers",
        "following_url": f"{u}/following{{/other_user}}",
        "gists_url": f"{u}/gists{{/gist_id}}",
        "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{u}/subscriptions",
        "organizations_url": f"{u}/orgs",
        "repos_url": f"{u}/repos",
        "events_url": f"{u}/events{{/privacy}}",
        "received_events_url": f"{u}/received_events",
        "type": "Bot",
        "site_admin": False,
    }


_REPO_URLS = {
    "archive_url": "/{archive_format}{/ref}", "assignees_url": "/assignees{/user}", "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}", "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}", "commits_url": "/commits{/sha}", "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}", "contributors_url": "/contributors", "deployments_url": "/deployments",
    "downloads_url": "/downloads", "events_url": "/events", "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}", "git_refs_url": "/git/refs{/sha}", "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks", "issue_comment_url": "/issues/comments{/number}", "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}", "keys_url": "/keys{/key_id}", "labels_url": "/labels{/name}",
    "languages_url": "/languages", "merges_url": "/merges", "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}", "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}", "stargazers_url": "/stargazers", "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers", "subscription_url": "/subscription", "tags_url": "/tags",
    "teams_url": "/teams", "trees_url": "/git/trees{/sha}",
}


def _repo(fake: FakeGitHub, base: str) -> dict:
    api = f"{base}{fake.repo_path}"
    full = f"{fake.owner}/{fake.repo}"
    created = "2026-01-01T00:00:00Z"
    return {
        "id": 1296269, "node_id": "R_1296269", "name": fake.repo, "full_name": full,
        "owner": _user(base, fake.owner, 1), "private": False, "html_url": f"{base}/{full}",
        "description": None, "fork": False, "url": api,
        **{k: api + v for k, v in _REPO_URLS.items()},
        "clone_url": f"{base}/{full}.git", "git_url": f"git://127.0.0.1/{full}.git", "ssh_url": f"git@127.0.0.1:{full}.git",
        "svn_url": f"{base}/{full}", "mirror_url": None, "homepage": None, "language": "Python",
        "forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers": 0, "watchers_count": 0, "size": 1,
        "default_branch": "main", "open_issues": 0, "open_issues_count": 0,
        "has_issues": True, "has_downloads": False, "has_projects": False, "has_wiki": False, "has_pages": False, "has_discussions": False,
        "archived": False, "disabled": False, "license": None,
        "pushed_at": created, "created_at": created, "updated_at": created,
        "network_count": 0, "subscribers_count": 0,
    }


def _label(fake: FakeGitHub, base: str, name: str) -> dict:
    ident = zlib.crc32(name.encode())
    return {
        "id": ident, "node_id": f"LA_{ident}", "url": f"{base}{fake.repo_path}/labels/{name}",
        "name": name, "description": None, "color": "ededed", "default": False,
    }


def _issue(fake: FakeGitHub, base: str, issue: dict) -> dict:
    api = f"{base}{fake.repo_path}/issues/{issue['number']}"
    return {
        "id": issue["id"], "node_id": f"I_{issue['id']}", "url": api,
        "repository_url": f"{base}{fake.repo_path}", "labels_url": f"{api}/labels{{/name}}",
        "comments_url": f"{api}/comments", "events_url": f"{api}/events",
        "html_url": f"{base}/{fake.owner}/{fake.repo}/issues/{issue['number']}",
        "number": issue["number"], "state": issue["state"], "state_reason": issue.get("state_reason"),
        "title": issue["title"], "body": issue["body"], "user": _user(base, issue.get("user", BOT_LOGIN)),
        "labels": [_label(fake, base, n) for n in issue["labels"]],
        "assignee": None, "assignees": [], "milestone": None, "locked": False, "active_lock_reason": None,
        "comments": len(fake.comments_on(issue["number"])),
        "closed_at": issue.get("closed_at"), "created_at": issue["created_at"], "updated_at": issue["updated_at"],
        "author_association": "NONE",
    }


def _comment(fake: FakeGitHub, base: str, c: dict) -> dict:
    return {
        "id": c["id"], "node_id": f"IC_{c['id']}", "url": f"{base}{fake.repo_path}/issues/comments/{c['id']}",
        "html_url": f"{base}/{fake.owner}/{fake.repo}/issues/{c['issue_number']}#issuecomment-{c['id']}",
        "body": c["body"], "user": _user(base, c.get("user", BOT_LOGIN)), "created_at": c["created_at"], "updated_at": c["updated_at"],
        "issue_url": f"{base}{fake.repo_path}/issues/{c['issue_number']}", "author_association": "NONE",
    }


def _status(fake: FakeGitHub, base: str, s: dict, *, creator: bool = True) -> dict:
    out = {
        "url": f"{base}{fake.repo_path}/statuses/{s['sha']}", "avatar_url": None, "id": s["id"],
        "node_id": f"SC_{s['id']}", "state": s["state"], "description": s["description"],
        "target_url": s["target_url"], "context": s["context"], "created_at": s["created_at"],
        "updated_at": s["created_at"],
    }
    if creator:
        out["creator"] = _user(base)
    return out


def _job(fake: FakeGitHub, base: str, j: dict) -> dict:
    api = f"{base}{fake.repo_path}/actions"
    done = "2026-01-01T00:05:00Z" if j["status"] == "completed" else None
    return {
        "id": j["id"], "run_id": j["run_id"], "run_url": f"{api}/runs/{j['run_id']}", "run_attempt": 1,
        "node_id": f"CR_{j['id']}", "head_sha": j["head_sha"], "url": f"{api}/jobs/{j['id']}",
        "html_url": f"{base}/{fake.owner}/{fake.repo}/actions/runs/{j['run_id']}/job/{j['id']}",
        "status": j["status"], "conclusion": j["conclusion"], "created_at": "2026-01-01T00:00:00Z",
        "started_at": "2026-01-01T00:01:00Z", "completed_at": done, "name": j["name"],
        "steps": [
            {**s, "started_at": "2026-01-01T00:01:00Z", "completed_at": done} for s in j["steps"]
        ],
        "check_run_url": f"{base}{fake.repo_path}/check-runs/{j['id']}", "labels": ["ubuntu-latest"],
        "runner_id": 1, "runner_name": "fake runner", "runner_group_id": 1, "runner_group_name": "GitHub Actions",
        "workflow_name": "CI", "head_branch": "main",
    }


def _run(fake: FakeGitHub, base: str, run: dict) -> dict:
    api = f"{base}{fake.repo_path}/actions/runs/{run['id']}"
    repo = {k: v for k, v in _repo(fake, base).items() if k in _MINIMAL_REPO}
    return {
        "id": run["id"], "node_id": f"WFR_{run['id']}", "name": "CI", "head_branch": "main",
        "head_sha": run["head_sha"], "path": ".github/workflows/ci.yml", "display_title": "CI", "run_number": 1,
        "run_attempt": 1, "event": "push", "status": "completed", "conclusion": run["conclusion"],
        "workflow_id": 1, "url": api, "html_url": f"{base}/{fake.owner}/{fake.repo}/actions/runs/{run['id']}",
        "pull_requests": [], "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:05:00Z",
        "jobs_url": f"{api}/jobs", "logs_url": f"{api}/logs", "check_suite_url": f"{base}{fake.repo_path}/check-suites/1",
        "artifacts_url": f"{api}/artifacts", "cancel_url": f"{api}/cancel", "rerun_url": f"{api}/rerun",
        "workflow_url": f"{base}{fake.repo_path}/actions/workflows/1", "head_commit": None,
        "repository": repo, "head_repository": repo,
    }


def _diff_entry(fake: FakeGitHub, base: str, pull: dict, f: dict) -> dict:
    adds, dels = f.get("additions", 1), f.get("deletions", 0)
    sha = f"{zlib.crc32(f['filename'].encode()):08x}" * 5
    web = f"{base}/{fake.owner}/{fake.repo}"
    return {
        "sha": sha, "filename": f["filename"], "status": f.get("status", "modified"), "additions": adds,
        "deletions": dels, "changes": adds + dels, "blob_url": f"{web}/blob/{pull['head_sha']}/{f['filename']}",
        "raw_url": f"{web}/raw/{pull['head_sha']}/{f['filename']}",
        "contents_url": f"{base}{fake.repo_path}/contents/{f['filename']}?ref={pull['head_sha']}",
        "patch": f.get("patch", "@@ -1 +1 @@\n-old\n+new"),
    }


def _review_comment(fake: FakeGitHub, base: str, pull: dict, c: dict) -> dict:
    api = f"{base}{fake.repo_path}/pulls"
    html = f"{base}/{fake.owner}/{fake.repo}/pull/{pull['number']}#discussion_r{c['id']}"
    line = c.get("line", 1)
    return {
        "url": f"{api}/comments/{c['id']}", "pull_request_review_id": c.get("review_id"), "id": c["id"],
        "node_id": f"PRRC_{c['id']}", "diff_hunk": "@@ -1 +1 @@", "path": c["path"], "position": line,
        "original_position": line, "commit_id": pull["head_sha"], "original_commit_id": pull["head_sha"],
        "user": _user(base, "reviewer", 7), "body": c["body"], "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "html_url": html, "pull_request_url": f"{api}/{pull['number']}",
        "author_association": "MEMBER", "start_line": None, "original_start_line": None, "start_side": None,
        "line": line, "original_line": line, "side": "RIGHT", "subject_type": "line",
        "_links": {"self": {"href": f"{api}/comments/{c['id']}"}, "html": {"href": html},
                   "pull_request": {"href": f"{api}/{pull['number']}"}},
    }


def _pull(fake: FakeGitHub, base: str, p: dict, *, full: bool = False) -> dict:
    api = f"{base}{fake.repo_path}"
    url = f"{api}/pulls/{p['number']}"
    html = f"{base}/{fake.owner}/{fake.repo}/pull/{p['number']}"
    repo = _repo(fake, base)

    def side(ref: str, sha: str, full_name: str | None = None) -> dict:
        other = dict(repo, full_name=full_name, fork=True) if full_name else repo
        owner = (full_name or fake.owner).split("/")[0]
        return {"label": f"{owner}:{ref}", "ref": ref, "sha": sha, "repo": other, "user": _user(base, owner, 1)}

    head_sha = fake.state.refs.get(p["head_ref"], p["head_sha"])
    links = {"self": url, "html": html, "issue": f"{api}/issues/{p['number']}",
             "comments": f"{api}/issues/{p['number']}/comments", "review_comments": f"{url}/comments",
             "review_comment": f"{api}/pulls/comments{{/number}}", "commits": f"{url}/commits",
             "statuses": f"{api}/statuses/{head_sha}"}
    out = {
        "url": url, "id": p["id"], "node_id": f"PR_{p['id']}", "html_url": html, "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch", "issue_url": links["issue"], "commits_url": links["commits"],
        "review_comments_url": links["review_comments"], "review_comment_url": links["review_comment"],
        "comments_url": links["comments"], "statuses_url": links["statuses"], "number": p["number"],
        "state": p["state"], "locked": False, "title": p["title"], "user": _user(base, p.get("user", BOT_LOGIN)),
        "body": p["body"], "labels": [_label(fake, base, n) for n in p.get("labels", [])], "milestone": None, "active_lock_reason": None, "created_at": p["created_at"],
        "updated_at": p["updated_at"], "closed_at": p["closed_at"],
        "merged_at": p["closed_at"] if p["merged"] else None, "merge_commit_sha": None, "assignee": None,
        "assignees": [], "requested_reviewers": [], "requested_teams": [],
        "head": side(p["head_ref"], head_sha, p.get("head_repo")), "base": side(p["base_ref"], fake.state.refs.get(p["base_ref"], MAIN_SHA)),
        "_links": {k: {"href": v} for k, v in links.items()}, "author_association": "NONE", "auto_merge": None,
        "draft": False,
    }
    if full:
        out.update({"merged": p["merged"], "mergeable": None, "rebaseable": None, "mergeable_state": "unknown",
                    "merged_by": None, "comments": 0, "review_comments": len(p["comments"]), "commits": 1,
                    "maintainer_can_modify": False, "additions": 0, "deletions": 0, "changed_files": len(p["files"])})
    return out


def _ref(fake: FakeGitHub, base: str, branch: str) -> dict:
    sha = fake.state.refs[branch]
    return {"ref": f"refs/heads/{branch}", "node_id": f"REF_{zlib.crc32(branch.encode())}",
            "url": f"{base}{fake.repo_path}/git/refs/heads/{branch}",
            "object": {"type": "commit", "sha": sha, "url": f"{base}{fake.repo_path}/git/commits/{sha}"}}


def _blob_sha(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


_MINIMAL_REPO = {"id", "node_id", "name", "full_name", "owner", "private", "html_url", "description", "fork", "url", *_REPO_URLS}


# The server


class _Reply(Exception):
    def __init__(self, status: int, body: Any = None, headers: dict[str, str] | None = None):
        self.status, self.body, self.headers = status, body, headers or {}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> _Reply:
    return _Reply(status, {"message": message, "documentation_url": DOCS, "status": str(status)}, headers)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes; without this each answer waits ~40 ms

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    @property
    def base(self) -> str:
        return f"http://{self.headers['Host']}"

    def _serve(self, method: str) -> None:
        fake = self.fake
        parts = urlsplit(self.path)
        path = parts.path[len(fake.prefix):] if fake.prefix and parts.path.startswith(fake.prefix) else parts.path
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        try:
            fault = fake._fault_for(method, path)
            if fault and not fault.after_write:
                raise _error(fault.status, fault.message, fault.headers)
            with fake.lock:
                reply = _route(fake, self.base, method, path, query, body)
            if fault:
                raise _error(fault.status, fault.message, fault.headers)
        except _Reply as r:
            reply = r
        fake.requests.append(Request(method, path, reply.status, body))
        self._send(reply)

    def _send(self, reply: _Reply) -> None:
        if isinstance(reply.body, str):
            data, ctype = reply.body.encode(), "text/plain; charset=utf-8"
        elif reply.body is None:
            data, ctype = b"", "application/json; charset=utf-8"
        else:
            data, ctype = json.dumps(reply.body).encode(), "application/json; charset=utf-8"
        self.send_response(reply.status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def _route(fake: FakeGitHub, base: str, method: str, path: str, query: dict, body: Any) -> _Reply:
    if path.endswith("/graphql") and method == "POST":  # GraphQL lives beside the REST prefix (/api/graphql)
        return _graphql(fake, base, body)
    if path.startswith("/_blobs/logs/") and method == "GET":
        job_id = int(path.rsplit("/", 1)[1])
        if job_id not in fake.state.logs:
            raise _error(404, "Not Found")
        return _Reply(200, fake.state.logs[job_id])
    rp = fake.repo_path
    if not (path == rp or path.startswith(rp + "/")):
        raise _error(404, "Not Found")
    rest = path[len(rp):]
    for pattern, verb, handler in _ROUTES:
        m = re.fullmatch(pattern, rest)
        if m and verb == method:
            return handler(fake, base, query, body, *m.groups())
    raise _error(404, "Not Found")


def _page(base: str, path: str, query: dict, items: list) -> _Reply:
    per_page = max(1, min(100, int(query.get("per_page", 30))))
    page = max(1, int(query.get("page", 1)))
    chunk = items[(page - 1) * per_page: page * per_page]
    last = max(1, -(-len(items) // per_page))
    links = []

    def link(n: int, rel: str) -> str:
        return f'<{base}{path}?{urlencode({**query, "page": n, "per_page": per_page})}>; rel="{rel}"'

    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        links += [link(1, "first"), link(page - 1, "prev")]
    return _Reply(200, chunk, {"Link": ", ".join(links)} if links else {})


def _found(table: dict, key: str) -> dict:
    """``table[int(key)]``, or GitHub's 404."""
    item = table.get(int(key))
    if item is None:
        raise _error(404, "Not Found")
    return item


def _get_issue(fake: FakeGitHub, number: str) -> dict:
    return _found(fake.state.issues, number)


def _list_issues(fake, base, query, body):
    state = query.get("state", "open")
    wanted = {n for n in query.get("labels", "").split(",") if n}
    items = [
        i for i in fake.state.issues.values()
        if (state == "all" or i["state"] == state) and wanted <= set(i["labels"])
    ]
    if query.get("direction", "desc") == "desc":
        items.reverse()
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/issues", query, items)
    reply.body = [_issue(fake, base, i) for i in reply.body]
    return reply


def _create_issue(fake, base, query, body):
    if not body or not body.get("title"):
        raise _invalid("Issue", "title", "missing_field")
    _check_body_size(body.get("body"))
    number = len(fake.state.issues) + 1
    while number in fake.state.issues:
        number += 1
    now = _now()
    issue = {
        "id": fake._new_id(), "number": number, "title": body["title"], "body": body.get("body"),
        "state": "open", "labels": [_name(x) for x in body.get("labels", [])], "created_at": now, "updated_at": now,
        "user": BOT_LOGIN,
    }
    fake.state.issues[number] = issue
    return _Reply(201, _issue(fake, base, issue), {"Location": f"{base}{fake.prefix}{fake.repo_path}/issues/{number}"})


def _edit_issue(fake, base, query, body, number):
    issue = _get_issue(fake, number)
    body = body or {}
    _check_body_size(body.get("body"))
    for key in ("title", "body", "state", "state_reason"):
        if key in body:
            issue[key] = body[key]
    if "labels" in body:
        issue["labels"] = [_name(x) for x in body["labels"]]
    issue["closed_at"] = _now() if issue["state"] == "closed" else None
    issue["updated_at"] = _now()
    return _Reply(200, _issue(fake, base, issue))


def _issue_or_pull(fake: FakeGitHub, number: str) -> None:
    """A pull request is an issue too: its conversation comments live under /issues/N/comments."""
    if int(number) not in fake.state.pulls:
        _get_issue(fake, number)


def _list_comments(fake, base, query, body, number):
    _issue_or_pull(fake, number)
    items = fake.comments_on(int(number))
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/issues/{number}/comments", query, items)
    reply.body = [_comment(fake, base, c) for c in reply.body]
    return reply


def _create_comment(fake, base, query, body, number):
    _issue_or_pull(fake, number)
    _check_body_size((body or {}).get("body"))
    now = _now()
    c = {"id": fake._new_id(), "issue_number": int(number), "body": body["body"], "created_at": now, "updated_at": now,
         "user": BOT_LOGIN}
    fake.state.comments[c["id"]] = c
    return _Reply(201, _comment(fake, base, c))


def _get_comment(fake: FakeGitHub, comment_id: str) -> dict:
    return _found(fake.state.comments, comment_id)


def _edit_comment(fake, base, query, body, comment_id):
    c = _get_comment(fake, comment_id)
    _check_body_size((body or {}).get("body"))
    c["body"], c["updated_at"] = body["body"], _now()
    return _Reply(200, _comment(fake, base, c))


def _label_reply(fake, base, label: dict) -> dict:
    return {**_label(fake, base, label["name"]), "description": label.get("description"), "color": label["color"]}


def _create_label(fake, base, query, body):
    name = str((body or {}).get("name") or "")
    if not name:
        raise _invalid("Label", "name", "missing_field")
    if name.lower() in {n.lower() for n in fake.state.labels}:
        raise _invalid("Label", "name", "already_exists")
    fake.state.labels[name] = {"name": name, "description": body.get("description"), "color": body.get("color", "ededed")}
    return _Reply(201, _label_reply(fake, base, fake.state.labels[name]))


def _get_label(fake, base, query, body, name):
    label = fake.state.labels.get(unquote(name))
    if label is None:
        raise _error(404, "Not Found")
    return _Reply(200, _label_reply(fake, base, label))


def _delete_label(fake, base, query, body, name):
    if fake.state.labels.pop(unquote(name), None) is None:
        raise _error(404, "Not Found")
    return _Reply(204, None)


def _create_status(fake, base, query, body, sha):
    body = body or {}
    if body.get("state") not in ("error", "failure", "pending", "success"):
        raise _invalid("Status", "state", "custom")
    if len(body.get("description") or "") > 140:
        raise _error(422, "Validation Failed: description is too long (maximum is 140 characters)")
    s = {
        "id": fake._new_id(), "sha": sha, "state": body["state"], "context": body.get("context", "default"),
        "description": body.get("description"), "target_url": body.get("target_url"), "created_at": _now(),
    }
    fake.state.statuses.setdefault(sha, []).insert(0, s)
    return _Reply(201, _status(fake, base, s))


def _combined_status(fake, base, query, body, ref):
    latest: dict[str, dict] = {}
    for s in fake.state.statuses.get(ref, []):
        latest.setdefault(s["context"], s)
    states = {s["state"] for s in latest.values()}
    state = "failure" if states & {"failure", "error"} else "pending" if "pending" in states or not states else "success"
    repo = {k: v for k, v in _repo(fake, base).items() if k in _MINIMAL_REPO}
    return _Reply(200, {
        "state": state, "sha": ref, "total_count": len(latest),
        "statuses": [_status(fake, base, s, creator=False) for s in latest.values()],
        "repository": repo, "commit_url": f"{base}{fake.repo_path}/commits/{ref}",
        "url": f"{base}{fake.repo_path}/commits/{ref}/status",
    })


def _get_run(fake, base, query, body, run_id):
    return _Reply(200, _run(fake, base, _found(fake.state.runs, run_id)))


def _list_jobs(fake, base, query, body, run_id):
    run = _found(fake.state.runs, run_id)
    jobs = [fake.state.jobs[j] for j in run["job_ids"]]
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/actions/runs/{run_id}/jobs", query, jobs)
    reply.body = {"total_count": len(jobs), "jobs": [_job(fake, base, j) for j in reply.body]}
    return reply


def _get_job(fake, base, query, body, job_id):
    return _Reply(200, _job(fake, base, _found(fake.state.jobs, job_id)))


def _job_logs(fake, base, query, body, job_id):
    job = fake.state.jobs.get(int(job_id))
    if job is None or job["status"] != "completed" or int(job_id) not in fake.state.logs:
        raise _error(404, "Not Found")
    return _Reply(302, None, {"Location": f"{base}/_blobs/logs/{job_id}?sig=fake"})


def _get_pull(fake: FakeGitHub, number: str) -> dict:
    return _found(fake.state.pulls, number)


def _list_pull_files(fake, base, query, body, number):
    pull = _get_pull(fake, number)
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/pulls/{number}/files", query, pull["files"])
    reply.body = [_diff_entry(fake, base, pull, f) for f in reply.body]
    return reply


def _list_review_comments(fake, base, query, body, number):
    pull = _get_pull(fake, number)
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/pulls/{number}/comments", query, pull["comments"])
    reply.body = [_review_comment(fake, base, pull, c) for c in reply.body]
    return reply


def _list_pulls(fake, base, query, body):
    state = query.get("state", "open")
    items = [p for p in fake.state.pulls.values() if state == "all" or p["state"] == state]
    if query.get("direction", "desc" if query.get("sort", "created") == "created" else "asc") == "desc":
        items.reverse()
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/pulls", query, items)
    reply.body = [_pull(fake, base, p) for p in reply.body]
    return reply


def _create_pull(fake, base, query, body):
    body = body or {}
    for key in ("title", "head", "base"):
        if not body.get(key):
            raise _invalid("PullRequest", key, "missing_field")
    _check_body_size(body.get("body"))
    head = str(body["head"]).split(":")[-1]
    if head not in fake.state.refs or body["base"] not in fake.state.refs:
        raise _invalid("PullRequest", "head" if head not in fake.state.refs else "base", "invalid")
    if any(p["head_ref"] == head and p["state"] == "open" for p in fake.state.pulls.values()):
        raise _invalid("PullRequest", "head", "custom", f"A pull request already exists for {fake.owner}:{head}.")
    number = max([*fake.state.pulls, *fake.state.issues, 0]) + 1
    fake.add_pull(number, title=body["title"], body=body.get("body"), head_ref=head, base_ref=body["base"],
                  head_sha=fake.state.refs[head])
    url = f"{base}{fake.prefix}{fake.repo_path}/pulls/{number}"
    return _Reply(201, _pull(fake, base, fake.state.pulls[number], full=True), {"Location": url})


def _edit_pull(fake, base, query, body, number):
    pull = _get_pull(fake, number)
    body = body or {}
    _check_body_size(body.get("body"))
    for key in ("title", "body"):
        if key in body:
            pull[key] = body[key]
    if body.get("state") in ("open", "closed"):
        pull["state"] = body["state"]
        pull["closed_at"] = _now() if body["state"] == "closed" else None
    pull["updated_at"] = _now()
    return _Reply(200, _pull(fake, base, pull, full=True))


def _get_ref(fake, base, query, body, ref):
    branch = unquote(ref)[len("heads/"):]
    if branch not in fake.state.refs:
        raise _error(404, "Not Found")
    return _Reply(200, _ref(fake, base, branch))


def _create_ref(fake, base, query, body):
    body = body or {}
    ref, sha = str(body.get("ref", "")), str(body.get("sha", ""))
    if not ref.startswith("refs/heads/") or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise _error(422, f"{ref!r} is not a valid ref name." if sha else "Invalid request.")
    branch = ref[len("refs/heads/"):]
    if branch in fake.state.refs:
        raise _error(422, "Reference already exists")
    source = next((b for b, s in fake.state.refs.items() if s == sha), None)
    if source is None:
        raise _error(422, "Object does not exist")
    fake.state.refs[branch] = sha
    fake.state.files[branch] = dict(fake.state.files.get(source, {}))
    return _Reply(201, _ref(fake, base, branch), {"Location": f"{base}{fake.prefix}{fake.repo_path}/git/{ref}"})


def _merge_pull(fake, base, query, body, number):
    pull = _get_pull(fake, number)
    if pull["state"] != "open":
        raise _error(405, "Pull Request is not mergeable")
    fake.close_pull(pull["number"], merged=True)
    return _Reply(200, {"sha": fake.state.refs[pull["base_ref"]], "merged": True,
                        "message": "Pull Request successfully merged"})


def _list_commits(fake, base, query, body):
    since, author = query.get("since", ""), query.get("author")
    items = [c for c in fake.state.commits
             if c["date"] >= since.replace("+00:00", "Z") and (author is None or c["author"] == author)]
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/commits", query, items)
    reply.body = [_commit(fake, base, c) for c in reply.body]
    return reply


def _commit(fake: FakeGitHub, base: str, c: dict) -> dict:
    api, sha = f"{base}{fake.repo_path}", c["sha"]
    person = {"name": c["author"], "email": f"{c['author']}@users.noreply.github.com", "date": c["date"]}
    return {"sha": sha, "node_id": f"C_{sha[:8]}", "url": f"{api}/commits/{sha}",
            "html_url": f"{base}/{fake.owner}/{fake.repo}/commit/{sha}", "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {"url": f"{api}/git/commits/{sha}", "author": person, "committer": person, "message": c["message"],
                       "comment_count": 0, "tree": {"sha": "d" * 40, "url": f"{api}/git/trees/{'d' * 40}"},
                       "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None,
                                        "verified_at": None}},
            "author": _user(base, c["author"], 7), "committer": _user(base, "web-flow", 19864447), "parents": []}


def _dispatch(fake, base, query, body, workflow):
    body = body or {}
    if not body.get("ref"):
        raise _invalid("Workflow", "ref", "missing_field")
    inputs = body.get("inputs") or {}
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise _error(422, "Invalid request. For 'properties/inputs', values must be strings.")
    fake.state.dispatches.append({"workflow": unquote(workflow), "ref": body["ref"], "inputs": inputs})
    return _Reply(204)


# The Git Data API: a commit of many files at once (get the head commit and its tree, post a tree and a
# commit, move the ref). A tree's sha is a hash of its files, so equal trees have equal shas.


def _tree_sha(files: dict[str, str]) -> str:
    return hashlib.sha1(json.dumps(sorted(files.items())).encode()).hexdigest()


def _files_at(fake: FakeGitHub, commit_sha: str) -> dict[str, str]:
    if commit_sha in fake.state.git_commits:
        return dict(fake.state.trees[fake.state.git_commits[commit_sha]["tree"]])
    branch = next((b for b, head in fake.state.refs.items() if head == commit_sha), None)
    if branch is None:
        raise _error(404, "Not Found")
    return dict(fake.state.files.get(branch, {}))


def _git_commit(fake: FakeGitHub, base: str, sha: str, files: dict[str, str], message: str, parents: list[str]) -> dict:
    api = f"{base}{fake.repo_path}"
    tree = _tree_sha(files)
    fake.state.trees.setdefault(tree, files)
    person = {"name": "replaybook[bot]", "email": "bot@example.com", "date": _now()}
    return {"sha": sha, "node_id": f"C_{sha[:8]}", "url": f"{api}/git/commits/{sha}",
            "html_url": f"{base}/{fake.owner}/{fake.repo}/commit/{sha}", "author": person, "committer": person,
            "message": message, "tree": {"sha": tree, "url": f"{api}/git/trees/{tree}"},
            "parents": [{"sha": p, "url": f"{api}/git/commits/{p}", "html_url": f"{base}/{fake.owner}/{fake.repo}/commit/{p}"}
                        for p in parents],
            "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None,
                             "verified_at": None}}


def _get_git_commit(fake, base, query, body, sha):
    known = fake.state.git_commits.get(sha, {})
    return _Reply(200, _git_commit(fake, base, sha, _files_at(fake, sha), known.get("message", "commit"),
                                   known.get("parents", [])))


def _tree_answer(fake: FakeGitHub, base: str, sha: str, files: dict[str, str]) -> dict:
    api = f"{base}{fake.repo_path}"
    entries = [{"path": path, "mode": "100644", "type": "blob", "sha": _blob_sha(text), "size": len(text.encode()),
                "url": f"{api}/git/blobs/{_blob_sha(text)}"} for path, text in sorted(files.items())]
    return {"sha": sha, "url": f"{api}/git/trees/{sha}", "tree": entries, "truncated": False}


def _get_tree(fake, base, query, body, sha):
    files = fake.state.trees.get(sha)
    if files is None:
        raise _error(404, "Not Found")
    if query.get("recursive") in (None, "", "0", "false"):
        raise _error(422, "the fake serves recursive trees only; pass recursive=1")
    return _Reply(200, _tree_answer(fake, base, sha, files))


def _create_tree(fake, base, query, body):
    body = body or {}
    files = dict(fake.state.trees[body["base_tree"]]) if body.get("base_tree") in fake.state.trees else {}
    if body.get("base_tree") and body["base_tree"] not in fake.state.trees:
        raise _error(404, "Not Found")
    for entry in body.get("tree") or []:
        if entry.get("type") != "blob" or entry.get("mode") != "100644":
            raise _invalid("Tree", "tree", "invalid", "the fake serves regular files (blob, 100644) only")
        if "content" in entry:
            files[entry["path"]] = entry["content"]
        elif entry.get("sha") is None:
            if entry["path"] not in files:  # GitHub refuses to delete what the base tree lacks
                raise _error(422, f"GitRPC::BadObjectState: {entry['path']} is not in the base tree")
            del files[entry["path"]]
        else:
            raise _invalid("Tree", "tree", "invalid", "the fake takes content, not blob shas")
    sha = _tree_sha(files)
    fake.state.trees[sha] = files
    return _Reply(201, _tree_answer(fake, base, sha, files))


def _create_git_commit(fake, base, query, body):
    body = body or {}
    tree, parents = body.get("tree"), list(body.get("parents") or [])
    if tree not in fake.state.trees or not body.get("message"):
        raise _invalid("Commit", "tree" if tree not in fake.state.trees else "message", "invalid")
    sha = hashlib.sha1(f"{tree}{parents}{body['message']}{len(fake.state.git_commits)}".encode()).hexdigest()
    fake.state.git_commits[sha] = {"tree": tree, "parents": parents, "message": body["message"]}
    return _Reply(201, _git_commit(fake, base, sha, fake.state.trees[tree], body["message"], parents))


def _update_ref(fake, base, query, body, ref):
    branch = unquote(ref)[len("heads/"):]
    body = body or {}
    if branch not in fake.state.refs:
        raise _error(422, "Reference does not exist")
    commit = fake.state.git_commits.get(str(body.get("sha")))
    if commit is None:
        raise _error(422, "Object does not exist")
    if not body.get("force") and fake.state.refs[branch] not in commit["parents"]:
        raise _error(422, "Update is not a fast forward")
    fake.state.refs[branch] = body["sha"]
    fake.state.files[branch] = dict(fake.state.trees[commit["tree"]])
    return _Reply(200, _ref(fake, base, branch))


def _name(label: Any) -> str:
    return label["name"] if isinstance(label, dict) else str(label)


def _check_body_size(text: str | None) -> None:
    if text and len(text) > 65_536:
        raise _invalid("Issue", "body", "custom", "body is too long (maximum is 65536 characters)")


def _invalid(resource: str, field_name: str, code: str, message: str | None = None) -> _Reply:
    error = {"resource": resource, "field": field_name, "code": code, **({"message": message} if message else {})}
    return _Reply(422, {"message": "Validation Failed", "errors": [error], "documentation_url": DOCS})


_ROUTES = [
    (r"", "GET", lambda fake, base, q, b: _Reply(200, _repo(fake, base))),
    (r"/issues", "GET", _list_issues),
    (r"/issues", "POST", _create_issue),
    (r"/issues/(\d+)", "GET", lambda fake, base, q, b, n: _Reply(200, _issue(fake, base, _get_issue(fake, n)))),
    (r"/issues/(\d+)", "PATCH", _edit_issue),
    (r"/issues/(\d+)/comments", "GET", _list_comments),
    (r"/issues/(\d+)/comments", "POST", _create_comment),
    (r"/issues/comments/(\d+)", "GET", lambda fake, base, q, b, i: _Reply(200, _comment(fake, base, _get_comment(fake, i)))),
    (r"/issues/comments/(\d+)", "PATCH", _edit_comment),
    (r"/statuses/([0-9a-fA-F]+)", "POST", _create_status),
    (r"/commits/([^/]+)/status", "GET", _combined_status),
    (r"/actions/runs/(\d+)", "GET", _get_run),
    (r"/actions/runs/(\d+)/jobs", "GET", _list_jobs),
    (r"/actions/jobs/(\d+)", "GET", _get_job),
    (r"/actions/jobs/(\d+)/logs", "GET", _job_logs),
    (r"/pulls/(\d+)/files", "GET", _list_pull_files),
    (r"/pulls/(\d+)/comments", "GET", _list_review_comments),
    (r"/pulls", "GET", _list_pulls),
    (r"/pulls", "POST", _create_pull),
    (r"/pulls/(\d+)", "PATCH", _edit_pull),
    (r"/pulls/(\d+)/merge", "PUT", _merge_pull),
    (r"/commits", "GET", _list_commits),
    (r"/actions/workflows/([^/]+)/dispatches", "POST", _dispatch),
    (r"/labels", "POST", _create_label),
    (r"/labels/([^/]+)", "GET", _get_label),
    (r"/labels/([^/]+)", "DELETE", _delete_label),
    (r"/git/refs", "POST", _create_ref),
    (r"/git/ref/(heads/.+)", "GET", _get_ref),
    (r"/git/refs/(heads/.+)", "PATCH", _update_ref),
    (r"/git/commits/([0-9a-f]{40})", "GET", _get_git_commit),
    (r"/git/commits", "POST", _create_git_commit),
    (r"/git/trees/([0-9a-f]{40})", "GET", _get_tree),
    (r"/git/trees", "POST", _create_tree),
]


# ------------------------------------------------------------------ Check runs and search (issue 30)
#
# Kept in one block so features added beside it merge cleanly. POST /check-runs and PATCH
# /check-runs/{id} validate what GitHub validates (a summary of at most 65,535 characters, at most 50
# annotations a request in GitHub's annotation shape, at most 3 actions with GitHub's length limits) and
# keep every annotation; POST /graphql answers the one search the adapter sends (``search(query:,
# type: ISSUE)`` over pull requests, with each one's comments and its head commit's check-suite rollup),
# in GitHub's GraphQL shapes, understanding the qualifiers ``repo:``, ``is:pr``, ``is:open`` and ``head:``.

CHECK_TEXT_LIMIT = 65_535
_LEVELS = ("notice", "warning", "failure")
_CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out")


def check_runs_for(fake: FakeGitHub, sha: str) -> list[dict]:
    """The check runs created on ``sha``, oldest first, each with every annotation it was given."""
    return [r for r in fake.state.check_runs.values() if r["head_sha"] == sha]


def _check_output(output: Any) -> dict:
    if output is None:
        return {}
    if not isinstance(output, dict) or not isinstance(output.get("title"), str) or not isinstance(
            output.get("summary"), str):
        raise _invalid("CheckRun", "output", "missing_field", "output needs a title and a summary")
    for key in ("summary", "text"):
        if len(output.get(key) or "") > CHECK_TEXT_LIMIT:
            raise _invalid("CheckRun", f"output.{key}", "custom",
                           f"Invalid request.\n\nOnly {CHECK_TEXT_LIMIT} characters are allowed; "
                           f"{len(output[key])} were supplied.")
    annotations = output.get("annotations") or []
    if len(annotations) > 50:
        raise _invalid("CheckRun", "output.annotations", "custom", "at most 50 annotations a request")
    for a in annotations:
        if not (isinstance(a, dict) and isinstance(a.get("path"), str) and isinstance(a.get("start_line"), int)
                and isinstance(a.get("end_line"), int) and a.get("annotation_level") in _LEVELS
                and isinstance(a.get("message"), str)):
            raise _invalid("CheckRun", "output.annotations", "invalid", f"annotation {a!r:.120} is not GitHub's shape")
    return output


def _check_actions(actions: Any) -> list[dict]:
    actions = actions or []
    if len(actions) > 3:
        raise _invalid("CheckRun", "actions", "custom", "at most 3 actions")
    for a in actions:
        if not (isinstance(a, dict) and 0 < len(a.get("label") or "") <= 20 and 0 < len(a.get("identifier") or "") <= 20
                and 0 < len(a.get("description") or "") <= 40):
            raise _invalid("CheckRun", "actions", "custom", f"action {a!r:.120} is over GitHub's limits")
    return actions


def _apply_check(run: dict, body: dict) -> None:
    if body.get("status", run.get("status")) == "completed" and body.get("conclusion", run.get("conclusion")) is None:
        raise _invalid("CheckRun", "conclusion", "missing_field", "conclusion is required when status is completed")
    if body.get("conclusion") is not None and body["conclusion"] not in _CONCLUSIONS:
        raise _invalid("CheckRun", "conclusion", "invalid")
    output = _check_output(body.get("output"))
    if "actions" in body:
        run["actions"] = _check_actions(body["actions"])
    for key in ("name", "details_url", "external_id", "status", "conclusion", "started_at", "completed_at"):
        if key in body:
            run[key] = body[key]
    if "conclusion" in body and "status" not in body:
        run["status"] = "completed"
    if output:
        run["output"] = {k: output.get(k) for k in ("title", "summary", "text")}
        run["annotations"] += [dict(a) for a in output.get("annotations") or []]


def _check_run(fake: FakeGitHub, base: str, run: dict) -> dict:
    api = f"{base}{fake.repo_path}/check-runs/{run['id']}"
    output = run.get("output") or {}
    return {
        "id": run["id"], "head_sha": run["head_sha"], "node_id": f"CR_{run['id']}",
        "external_id": run.get("external_id"), "url": api,
        "html_url": f"{base}/{fake.owner}/{fake.repo}/runs/{run['id']}", "details_url": run.get("details_url"),
        "status": run.get("status", "queued"), "conclusion": run.get("conclusion"),
        "started_at": run.get("started_at") or run["created_at"], "completed_at": run.get("completed_at"),
        "output": {"title": output.get("title"), "summary": output.get("summary"), "text": output.get("text"),
                   "annotations_count": len(run["annotations"]), "annotations_url": f"{api}/annotations"},
        "name": run["name"], "check_suite": {"id": 5000 + run["id"]}, "app": None, "pull_requests": [],
    }


def _create_check_run(fake, base, query, body):
    body = body or {}
    if not isinstance(body.get("name"), str) or not isinstance(body.get("head_sha"), str):
        raise _invalid("CheckRun", "name" if not isinstance(body.get("name"), str) else "head_sha", "missing_field")
    run = {"id": fake._new_id(), "head_sha": body["head_sha"], "name": body["name"], "annotations": [],
           "actions": [], "created_at": _now(), "status": body.get("status", "queued")}
    _apply_check(run, body)
    fake.state.check_runs[run["id"]] = run
    return _Reply(201, _check_run(fake, base, run))


def _update_check_run(fake, base, query, body, run_id):
    run = _found(fake.state.check_runs, run_id)
    _apply_check(run, body or {})
    return _Reply(200, _check_run(fake, base, run))


_ROUTES += [
    (r"/check-runs", "POST", _create_check_run),
    (r"/check-runs/(\d+)", "PATCH", _update_check_run),
]


def _gate_rollup(fake: FakeGitHub, sha: str) -> list[dict]:
    """The head commit's contexts as GraphQL's statusCheckRollup lists them: the latest of each name."""
    nodes: dict[str, dict] = {}
    for run in check_runs_for(fake, sha):
        nodes[run["name"]] = {"__typename": "CheckRun", "name": run["name"], "status": run["status"].upper(),
                              "conclusion": (run.get("conclusion") or "").upper() or None}
    for s in reversed(fake.state.statuses.get(sha, [])):  # stored newest first
        nodes["status:" + s["context"]] = {"__typename": "StatusContext", "context": s["context"],
                                           "state": s["state"].upper()}
    return list(nodes.values())


def _actor(login: str) -> dict:
    """GraphQL's author: a bot's login carries no ``[bot]`` suffix there, and its type says Bot."""
    if login.endswith("[bot]"):
        return {"__typename": "Bot", "login": login.removesuffix("[bot]")}
    return {"__typename": "User", "login": login}


def _search_matches(fake: FakeGitHub, p: dict, terms: list[str]) -> bool:
    for term in terms:
        key, _, value = term.partition(":")
        if key == "repo" and value.lower() != f"{fake.owner}/{fake.repo}".lower():
            return False
        if key == "is" and value == "open" and p["state"] != "open":
            return False
        if key == "is" and value == "closed" and p["state"] != "closed":
            return False
        if key == "head" and not p["head_ref"].startswith(value):
            return False
    return True


def _graphql(fake: FakeGitHub, base: str, body: Any) -> _Reply:
    query, variables = (body or {}).get("query", ""), (body or {}).get("variables") or {}
    if "search(" not in query or "type: ISSUE" not in query:
        return _Reply(200, {"errors": [{"message": "the fake answers only the adapter's pull-request search"}]})
    terms = str(variables.get("q", "")).split()
    if "is:pr" not in terms:
        return _Reply(200, {"errors": [{"message": "the fake searches pull requests only (is:pr)"}]})
    found = sorted((p for p in fake.state.pulls.values() if _search_matches(fake, p, terms)),
                   key=lambda p: p["updated_at"], reverse=True)
    first = int(variables.get("first", 100))
    nodes = []
    for p in found[:first]:
        head_sha = fake.state.refs.get(p["head_ref"], p["head_sha"])
        comments = [{"databaseId": c["id"], "author": _actor(c.get("user", BOT_LOGIN)), "body": c["body"],
                     "url": f"{base}/{fake.owner}/{fake.repo}/pull/{p['number']}#issuecomment-{c['id']}"}
                    for c in fake.comments_on(p["number"])][-100:]
        nodes.append({
            "__typename": "PullRequest", "number": p["number"], "title": p["title"], "body": p["body"] or "",
            "url": f"{base}/{fake.owner}/{fake.repo}/pull/{p['number']}",
            "state": "MERGED" if p["merged"] else p["state"].upper(), "merged": p["merged"],
            "mergedAt": p["closed_at"] if p["merged"] else None, "headRefName": p["head_ref"],
            "isCrossRepository": bool(p.get("head_repo")), "author": _actor(p.get("user", BOT_LOGIN)),
            "labels": {"nodes": [{"name": n} for n in p.get("labels", [])]},
            "comments": {"nodes": comments},
            "commits": {"nodes": [{"commit": {"oid": head_sha, "statusCheckRollup": {
                "contexts": {"nodes": _gate_rollup(fake, head_sha)}}}}]},
        })
    return _Reply(200, {"data": {"search": {"issueCount": len(found), "nodes": nodes}}})


# ------------------------------------------------------------------ The set-up (issue 30, `replaybook doctor`)
#
# Kept in one block, as the check runs are. ``setup(fake)`` holds a repository's settings as GitHub's REST API
# publishes them: rulesets (GET /rules/branches/{branch}: the active rules of every ruleset on the branch, each
# with ``ruleset_source_type``, ``ruleset_source`` and ``ruleset_id``), classic branch protection's required status
# checks (GET /branches/{branch}/protection/required_status_checks; 404 "Branch not protected" when it has none),
# and the names of Actions secrets and variables, the repository's and those its organisation shares with it
# (GET /actions/secrets, /actions/organization-secrets, /actions/variables, /actions/organization-variables).
# Deployment environments as GitHub's REST docs shape them (GET /environments/{name}: ``deployment_branch_policy``
# null for every branch, else ``{protected_branches, custom_branch_policies}``, and a ``branch_policy`` protection
# rule; GET /environments/{name}/deployment-branch-policies: ``{total_count, branch_policies: [{id, node_id, name,
# type}]}``; GET /environments/{name}/secrets: ``{total_count, secrets: [{name, created_at, updated_at}]}``; 404
# "Not Found" for an environment that does not exist).
# A token without the permission is ``fail_next(path, 403, message="Resource not accessible by integration")``.


@dataclass
class Setup:
    rulesets: list[dict] = field(default_factory=list)  # {"id", "name", "rules": [{"type", "parameters"?}]}
    protection: dict[str, dict] = field(default_factory=dict)  # branch -> {"strict", "checks": [(context, app_id)]}
    secrets: list[str] = field(default_factory=list)
    org_secrets: list[str] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    org_variables: dict[str, str] = field(default_factory=dict)
    environments: dict[str, dict] = field(default_factory=dict)  # name -> {"policy", "secrets"}

    def add_environment(self, name: str, *, policy: str | list[str] | None = None, secrets: list[str] = ()) -> None:
        """An environment: ``policy`` None (every branch), "protected" (protected branches), or a list of custom
        branch name patterns (a ``tag:`` prefix makes a tag pattern); ``secrets`` its environment secrets' names."""
        self.environments[name] = {"policy": policy, "secrets": list(secrets)}

    def add_ruleset(self, name: str, *, required: list[str | tuple[str, int | None]] = (), merge_queue: bool = False,
                    strict: bool = False) -> dict:
        """A ruleset on the default branch requiring ``required`` (a context, or (context, integration_id))."""
        rules: list[dict] = []
        if required:
            checks = [{"context": c} if isinstance(c, str) else {"context": c[0], **({"integration_id": c[1]}
                                                                                   if c[1] is not None else {})}
                      for c in required]
            rules.append({"type": "required_status_checks", "parameters": {
                "required_status_checks": checks, "strict_required_status_checks_policy": strict}})
        if merge_queue:
            rules.append({"type": "merge_queue", "parameters": {
                "check_response_timeout_minutes": 60, "grouping_strategy": "ALLGREEN", "max_entries_to_build": 5,
                "max_entries_to_merge": 5, "merge_method": "MERGE", "min_entries_to_merge": 1,
                "min_entries_to_merge_wait_minutes": 5}})
        ruleset = {"id": 42 + len(self.rulesets), "name": name, "rules": rules}
        self.rulesets.append(ruleset)
        return ruleset

    def protect(self, branch: str = "main", *, checks: list[str | tuple[str, int | None]] = (), strict: bool = True) -> None:
        """Classic branch protection on ``branch`` requiring ``checks``."""
        self.protection[branch] = {"strict": strict, "checks": [(c, None) if isinstance(c, str) else c for c in checks]}


def setup(fake: FakeGitHub) -> Setup:
    """The fake repository's settings (made on first use)."""
    with fake.lock:
        if not hasattr(fake, "_setup"):
            fake._setup = Setup()  # type: ignore[attr-defined]
        return fake._setup  # type: ignore[attr-defined]


def _branch_rules(fake, base, query, body, branch):
    rules = [{**rule, "ruleset_source_type": "Repository", "ruleset_source": f"{fake.owner}/{fake.repo}",
              "ruleset_id": ruleset["id"]} for ruleset in setup(fake).rulesets for rule in ruleset["rules"]]
    return _page(base, f"{fake.prefix}{fake.repo_path}/rules/branches/{branch}", query, rules)


def _required_status_checks(fake, base, query, body, branch):
    protection = setup(fake).protection.get(unquote(branch))
    if protection is None:
        raise _error(404, "Branch not protected")
    url = f"{base}{fake.repo_path}/branches/{branch}/protection/required_status_checks"
    return _Reply(200, {"url": url, "strict": protection["strict"], "contexts_url": f"{url}/contexts",
                        "contexts": [c for c, _ in protection["checks"]],
                        "checks": [{"context": c, "app_id": a} for c, a in protection["checks"]]})


def _environment_of(fake, name):
    env = setup(fake).environments.get(unquote(name))
    if env is None:
        raise _error(404, "Not Found")
    return env


def _environment(fake, base, query, body, name):
    env, name = _environment_of(fake, name), unquote(name)
    policy = env["policy"]
    rules = [] if policy is None else [{"id": 3756, "node_id": "MDQ6R2F0ZTM3NTY=", "type": "branch_policy"}]
    return _Reply(200, {
        "id": 161088068, "node_id": "MDExOkVudmlyb25tZW50MTYxMDg4MDY4", "name": name,
        "url": f"{base}{fake.repo_path}/environments/{quote(name, safe='')}",
        "html_url": f"https://github.com/{fake.owner}/{fake.repo}/deployments/activity_log?environments_filter={name}",
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "protection_rules": rules,
        "deployment_branch_policy": None if policy is None else {
            "protected_branches": policy == "protected", "custom_branch_policies": isinstance(policy, list)}})


def _deployment_branch_policies(fake, base, query, body, name):
    env = _environment_of(fake, name)
    patterns = env["policy"] if isinstance(env["policy"], list) else []
    items = [{"id": 361471 + i, "node_id": f"MDE2OkdhdGVCcmFuY2hQb2xpY3kz{i}", "name": p.removeprefix("tag:"),
              "type": "tag" if p.startswith("tag:") else "branch"} for i, p in enumerate(patterns)]
    per_page = max(1, min(100, int(query.get("per_page", 30))))
    page = max(1, int(query.get("page", 1)))
    return _Reply(200, {"total_count": len(items), "branch_policies": items[(page - 1) * per_page: page * per_page]})


def _names_listing(key: str, names, *, values: dict[str, str] | None = None):
    def handler(fake, base, query, body):
        items = [{"name": n, **({"value": values(fake)[n]} if values else {}), "created_at": "2026-01-01T00:00:00Z",
                  "updated_at": "2026-01-01T00:00:00Z"} for n in sorted(names(fake))]
        per_page = max(1, min(100, int(query.get("per_page", 30))))
        page = max(1, int(query.get("page", 1)))
        return _Reply(200, {"total_count": len(items), key: items[(page - 1) * per_page: page * per_page]})
    return handler


_ROUTES += [
    (r"/rules/branches/([^/]+)", "GET", _branch_rules),
    (r"/branches/([^/]+)/protection/required_status_checks", "GET", _required_status_checks),
    (r"/actions/secrets", "GET", _names_listing("secrets", lambda f: setup(f).secrets)),
    (r"/actions/organization-secrets", "GET", _names_listing("secrets", lambda f: setup(f).org_secrets)),
    (r"/actions/variables", "GET", _names_listing("variables", lambda f: setup(f).variables,
                                                   values=lambda f: setup(f).variables)),
    (r"/actions/organization-variables", "GET", _names_listing("variables", lambda f: setup(f).org_variables,
                                                                values=lambda f: setup(f).org_variables)),
    (r"/environments/([^/]+)", "GET", _environment),
    (r"/environments/([^/]+)/deployment-branch-policies", "GET", _deployment_branch_policies),
]


def _environment_secrets(fake, base, query, body, name):
    env = _environment_of(fake, name)
    return _names_listing("secrets", lambda f: env["secrets"])(fake, base, query, body)


_ROUTES.append((r"/environments/([^/]+)/secrets", "GET", _environment_secrets))


# ------------------------------------------------------------------ Comment commands (issue 30)
#
# Who may run a command (GET /collaborators/{user}/permission: the ``permission`` field, admin, write, read or
# none; GitHub's legacy field maps maintain to write and triage to read, ``role_name`` keeps the role) and the
# reactions that mark a command comment handled (GET and POST /issues/comments/{id}/reactions; a second POST of
# the same content by the same user answers 200 with the existing reaction, as GitHub does).

_LEGACY = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read", "none": "none"}
_REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def collaborators(fake: FakeGitHub) -> dict[str, str]:
    """login -> role (admin, maintain, write, triage, read); anyone else reads as ``read`` (a public repository)."""
    with fake.lock:
        if not hasattr(fake, "_roles"):
            fake._roles = {}  # type: ignore[attr-defined]
        return fake._roles  # type: ignore[attr-defined]


def reactions_on(fake: FakeGitHub, comment_id: int) -> list[dict]:
    with fake.lock:
        if not hasattr(fake, "_reactions"):
            fake._reactions = {}  # type: ignore[attr-defined]
        return fake._reactions.setdefault(int(comment_id), [])  # type: ignore[attr-defined]


def _permission(fake, base, query, body, login):
    login = unquote(login)
    role = next((r for name, r in collaborators(fake).items() if name.lower() == login.lower()), "read")
    user = {**_user(base, login, 7000 + len(login)), "type": "User", "role_name": role}
    return _Reply(200, {"permission": _LEGACY[role], "role_name": role, "user": user})


def _reaction(base: str, r: dict) -> dict:
    return {"id": r["id"], "node_id": f"REA_{r['id']}", "user": _user(base, r["user"]), "content": r["content"],
            "created_at": r["created_at"]}


def _list_reactions(fake, base, query, body, comment_id):
    _get_comment(fake, comment_id)
    items = [r for r in reactions_on(fake, int(comment_id)) if query.get("content") in (None, r["content"])]
    reply = _page(base, f"{fake.prefix}{fake.repo_path}/issues/comments/{comment_id}/reactions", query, items)
    reply.body = [_reaction(base, r) for r in reply.body]
    return reply


def _create_reaction(fake, base, query, body, comment_id):
    _get_comment(fake, comment_id)
    content = (body or {}).get("content")
    if content not in _REACTIONS:
        raise _invalid("Reaction", "content", "invalid")
    mine = reactions_on(fake, int(comment_id))
    found = next((r for r in mine if r["content"] == content and r["user"] == BOT_LOGIN), None)
    if found is not None:
        return _Reply(200, _reaction(base, found))
    r = {"id": fake._new_id(), "user": BOT_LOGIN, "content": content, "created_at": _now()}
    mine.append(r)
    return _Reply(201, _reaction(base, r))


_ROUTES += [
    (r"/collaborators/([^/]+)/permission", "GET", _permission),
    (r"/issues/comments/(\d+)/reactions", "GET", _list_reactions),
    (r"/issues/comments/(\d+)/reactions", "POST", _create_reaction),
]


def served_endpoints() -> Iterator[tuple[str, str]]:
    """(method, path template) for every endpoint the fake serves, in OpenAPI's spelling."""
    names = {r"(\d+)": "{n}", r"([0-9a-fA-F]+)": "{sha}", r"([0-9a-f]{40})": "{sha}", r"([^/]+)": "{ref}", r"(heads/.+)": "{ref}",
             r"(.+)": "{path}"}
    for pattern, verb, _ in _ROUTES:
        text = pattern
        for rx, name in names.items():
            text = text.replace(rx, name)
        yield verb, "/repos/{owner}/{repo}" + text
