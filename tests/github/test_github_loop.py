"""The whole loop on GitHub, end to end, against the fake GitHub.

Failed CI runs become incident issues; distill opens a rule PR citing them;
the gate replays the rule and sets `replaybook/admit`; merging the PR admits
the rule and closes the incident issues; the push that follows re-renders
PLAYBOOK.md through the maintenance PR. Every step is the real CLI
(`replaybook github handle`) with the real PyGithub, the anthropic SDK and the
builtin agent. The models are SIMULATED: capture and distill answer from an
AnswerBook, and the gate's "upstream" Messages API is a Gateway playing the
scenario's policy, found through ANTHROPIC_BASE_URL as a proxy would be.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.github import FakeGitHub
from support.github import git
from support.workflows import CAPTURED, LOG, RULE, SCENARIO

from bot.replay.gateway.answers import AnswerBook
from bot.replay.gateway.policy import load_policy
from bot.replay.gateway.server import Gateway


@pytest.fixture
def gh():
    with FakeGitHub("octo", "app") as fake:
        yield fake


class Actions:
    """What a workflow job gives the CLI: the event, the token, the API URLs, and the model's URL."""

    def __init__(self, cli, gh: FakeGitHub, monkeypatch, tmp: Path):
        self.cli, self.gh, self.mp, self.path = cli, gh, monkeypatch, tmp / "event.json"
        for name, value in {"GITHUB_EVENT_PATH": str(self.path), "GITHUB_REPOSITORY": "octo/app",
                            "GITHUB_TOKEN": "t", "GITHUB_API_URL": gh.url, "REPLAYBOOK_GITHUB_BACKOFF": "0",
                            "REPLAYBOOK_GITHUB_THROTTLE": "0"}.items():
            monkeypatch.setenv(name, value)
        for name in ("GITHUB_STEP_SUMMARY", "REPLAYBOOK_OPEN_PRS", "REPLAYBOOK_AGENT_LOGINS"):
            monkeypatch.delenv(name, raising=False)

    def model(self, gateway: Gateway | None) -> None:
        for name, value in {"ANTHROPIC_API_KEY": gateway and gateway.token,
                            "ANTHROPIC_BASE_URL": gateway and gateway.url}.items():
            if value:
                self.mp.setenv(name, value)
            else:
                self.mp.delenv(name, raising=False)

    def run(self, event: str, payload: dict, *, open_prs: bool = False) -> dict:
        self.mp.setenv("GITHUB_EVENT_NAME", event)
        if open_prs:
            self.mp.setenv("REPLAYBOOK_OPEN_PRS", "1")  # the job holds an App token
        else:
            self.mp.delenv("REPLAYBOOK_OPEN_PRS", raising=False)
        self.path.write_text(json.dumps(payload), encoding="utf-8")
        result = self.cli("github", "handle", "--json")
        out = json.loads(result.out)
        assert result.code == 0, out
        return out


def sync_checkout(root: Path, files: dict[str, str], message: str) -> str:
    """Make the checkout hold exactly ``files`` (plus git's own), commit, and return the commit id."""
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith((".git/", ".replaybook/")) and rel not in files:
            path.unlink()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def run_payload(run_id: int) -> dict:
    return {"action": "completed", "workflow": {"name": "CI", "path": ".github/workflows/ci.yml"},
            "workflow_run": {"id": run_id, "name": "CI", "path": ".github/workflows/ci.yml", "run_attempt": 1,
                             "conclusion": "failure", "status": "completed", "head_sha": "c" * 40,
                             "html_url": f"https://github.com/octo/app/actions/runs/{run_id}"},
            "repository": {"full_name": "octo/app", "default_branch": "main"}}


def pr_payload(number: int, head_ref: str, head_sha: str, base_sha: str) -> dict:
    repo = {"full_name": "octo/app"}
    return {"action": "opened", "number": number,
            "pull_request": {"number": number, "title": "Rule", "body": "", "labels": [], "user": {"login": "app"},
                             "head": {"ref": head_ref, "sha": head_sha, "repo": repo},
                             "base": {"ref": "main", "sha": base_sha, "repo": repo}},
            "repository": {"full_name": "octo/app", "default_branch": "main"}, "sender": {"login": "app"}}


def test_failed_runs_become_a_rule_that_the_gate_admits_and_the_merge_closes(cli, gh, monkeypatch, tmp_path):
    root = cli.root
    (root / ".replaybook.yml").write_text("github:\n  watched_workflows: [CI]\n  distill_threshold: 2\n",
                                          encoding="utf-8")
    shutil.copytree(SCENARIO, root / "scenarios" / "monorepo-test-cwd",
                    ignore=shutil.ignore_patterns("incidents", "logs", "rule.yaml"))
    assert cli("playbook", "render").code == 0
    git(root, "init", "-q", "-b", "main")
    main_sha = sync_checkout(root, {p.relative_to(root).as_posix(): p.read_text("utf-8")
                                    for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}, "start")
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            gh.add_file(path.relative_to(root).as_posix(), path.read_text("utf-8"))
    gh.state.refs["main"] = main_sha
    actions = Actions(cli, gh, monkeypatch, tmp_path)

    # 1. Two failed CI runs: two incident issues, and the second one reaches the distill threshold.
    book = AnswerBook().add("gh-1", json.dumps({"kind": "rule", "rule": RULE, "cites": ["gh-1", "gh-2"],
                                                "task_types": [], "scenario": {"existing": "monorepo-test-cwd"}}))
    book.add("", json.dumps(CAPTURED))
    with Gateway(book) as analyst:
        actions.model(analyst)
        for run_id in (7, 8):
            gh.add_workflow_run(run_id, jobs=[{"name": "test", "conclusion": "failure"}], logs={"test": LOG})
            gh.reset_calls()
            out = actions.run("workflow_run", run_payload(run_id))
            assert out["api_calls"] <= 10  # per captured failure, the claim included
        assert [i["number"] for i in gh.issues] == [1, 2]
        assert all("triage: false" in i["body"] or "triage:" not in i["body"] for i in gh.issues)
        assert gh.dispatches == [{"workflow": "replaybook-distill.yml", "ref": "main", "inputs": {"reason": "threshold"}}]

        # 2. The dispatched distill job (with an App token) opens one rule PR that closes both issues.
        out = actions.run("workflow_dispatch", {"inputs": {"reason": "threshold"}}, open_prs=True)
    (pr,) = gh.pulls
    assert pr["head_ref"] == "replaybook/rule-0001", out
    assert "Closes #1" in pr["body"] and "Closes #2" in pr["body"]
    files = gh.branch_files("replaybook/rule-0001")
    assert "cites: [gh-1, gh-2]" in files["playbook/rules/rule-0001.yaml"]

    # 3. The admit gate on the PR: the checkout is the PR head; the base playbook comes from git.
    git(root, "checkout", "-q", "-b", "replaybook/rule-0001")
    head_sha = sync_checkout(root, files, "rule PR")
    actions.model(None)
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:  # the SIMULATED "real" model upstream
        actions.model(model)
        gh.reset_calls()
        out = actions.run("pull_request", pr_payload(pr["number"], "replaybook/rule-0001", head_sha, main_sha))
        assert gh.calls <= 5  # the budget per gate report: status, list comments, comment
    (status,) = gh.statuses_for(head_sha)
    assert (status["state"], status["context"]) == ("success", "replaybook/admit"), out
    assert status["description"].startswith("admit: rule-0001 admit")
    (comment,) = gh.comments_on(pr["number"])
    assert "Replaybook gate: admit `rule-0001`" in comment["body"]

    # 4. Merging is admission: the rule is on main and the incident issues are closed.
    gh.close_pull(pr["number"], merged=True)
    assert [i["state"] for i in gh.issues] == ["closed", "closed"]
    main_files = gh.branch_files("main")
    assert "playbook/rules/rule-0001.yaml" in main_files

    # 5. The push to main finds PLAYBOOK.md stale and opens the maintenance PR that renders it.
    git(root, "checkout", "-q", "main")
    after = sync_checkout(root, main_files, "merge rule PR")
    gh.state.refs["main"] = after  # the pushed commit is main's head
    push = {"ref": "refs/heads/main", "after": after, "repository": {"full_name": "octo/app", "default_branch": "main"},
            "commits": [{"added": ["playbook/rules/rule-0001.yaml"], "modified": [], "removed": []}]}
    out = actions.run("push", push, open_prs=True)
    (maintenance,) = [p for p in gh.pulls if p["head_ref"] == "replaybook/maintenance"]
    gh.close_pull(maintenance["number"], merged=True)
    sync_checkout(root, gh.branch_files("main"), "merge maintenance PR")
    assert "rule-0001" in (root / "playbook" / "PLAYBOOK.md").read_text("utf-8")
    check = cli("playbook", "check")
    assert check.code == 0, check.out + check.err
    assert actions.run("push", {**push, "after": git(root, "rev-parse", "HEAD")}, open_prs=True)["outcomes"][0][
        "summary"].startswith("ok:")
