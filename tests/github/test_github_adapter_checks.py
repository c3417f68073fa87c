"""Check runs and the gated-PR search through the real PyGithub adapter, against the fake GitHub on 127.0.0.1.

The fake enforces GitHub's limits (50 annotations a request, a summary of 65,535 characters, GitHub's
action lengths), so these tests fail if the adapter sends what GitHub would refuse. The CLI end of it:
``replaybook github handle`` with ``REPLAYBOOK_GITHUB_APP=1`` makes the check run; without it, the status.
"""

from __future__ import annotations

import pytest
import requests
from fakes.github import FakeGitHub, check_runs_for
from support.github import HEAD, fork_rule_pr, handle

from bot import config as config_mod
from bot.github import PyGithubAdapter
from bot.github.checks import REPLAY_ACTION
from bot.github.context import GateVerdict
from bot.github.events import GateRulePr
from bot.github.gate import GATE_CONTEXT, GATE_MARKER
from bot.github.handle import execute
from bot.github.port import Annotation, CheckRun, GitHubError

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"


@pytest.fixture
def github(gh: FakeGitHub) -> PyGithubAdapter:
    adapter = PyGithubAdapter("octo/app", "token", gh.url, sleep=lambda s: None, seconds_between_requests=0,
                              seconds_between_writes=0)
    yield adapter
    adapter.close()


def notes(n: int) -> tuple[Annotation, ...]:
    return tuple(Annotation(f"scenarios/s{i}/scenario.yaml", i + 1, i + 1, "failure", f"check {i} failed", f"s{i}")
                 for i in range(n))


def test_a_check_run_with_120_annotations_is_one_create_and_two_updates(gh, github):
    run = CheckRun(GATE_CONTEXT, SHA, "failure", "reject: rule-0001 reject", "## Replaybook gate: reject\n",
                   notes(120), (REPLAY_ACTION,), "https://github.com/octo/app/actions/runs/9")
    gh.reset_calls()
    url = github.create_check_run(run)
    assert [(r.method, r.path) for r in gh.requests] == [("POST", "/repos/octo/app/check-runs")] + [
        ("PATCH", f"/repos/octo/app/check-runs/{next(iter(gh.state.check_runs))}")] * 2
    assert all(r.status in (200, 201) for r in gh.requests)
    (stored,) = check_runs_for(gh, SHA)
    assert url == f"{gh.url}/octo/app/runs/{stored['id']}"
    assert (stored["name"], stored["status"], stored["conclusion"]) == (GATE_CONTEXT, "completed", "failure")
    assert stored["output"]["summary"] == "## Replaybook gate: reject\n"
    assert [a["message"] for a in stored["annotations"]] == [f"check {i} failed" for i in range(120)]
    assert stored["annotations"][0] == {"path": "scenarios/s0/scenario.yaml", "start_line": 1, "end_line": 1,
                                        "annotation_level": "failure", "message": "check 0 failed", "title": "s0"}
    assert stored["actions"] == [{"label": "Replay again", "description": REPLAY_ACTION.description,
                                  "identifier": "replay"}]
    assert stored["details_url"] == "https://github.com/octo/app/actions/runs/9"


def test_the_fake_refuses_what_github_refuses(gh):
    api = f"{gh.url}{gh.repo_path}/check-runs"
    base = {"name": GATE_CONTEXT, "head_sha": SHA, "status": "completed", "conclusion": "success"}
    too_many = [a.as_json() for a in notes(51)]
    assert requests.post(api, json={**base, "output": {"title": "t", "summary": "s", "annotations": too_many}}
                         ).status_code == 422
    assert requests.post(api, json={**base, "output": {"title": "t", "summary": "s" * 65_536}}).status_code == 422
    assert requests.post(api, json={**base, "actions": [{"label": "x" * 21, "description": "d",
                                                         "identifier": "i"}]}).status_code == 422
    assert requests.post(api, json={**base, "conclusion": None}).status_code == 422
    assert requests.post(api, json=base).status_code == 201


def test_a_refused_check_run_is_a_github_error(gh, github):
    gh.fail_next(f"{gh.repo_path}/check-runs", 403)
    with pytest.raises(GitHubError) as caught:
        github.create_check_run(CheckRun(GATE_CONTEXT, SHA, "success", "admit", "ok"))
    assert caught.value.status == 403


# ------------------------------------------------------------------ the search


def test_one_search_gives_each_rule_pr_its_gate_state_and_comments(gh, github):
    gh.add_pull(3, head_sha="a" * 40, head_ref="replaybook/rule-0003", title="Rule rule-0003")
    gh.add_pull(4, head_sha="b" * 40, head_ref="replaybook/rule-0004", title="Rule rule-0004")
    gh.add_pull(5, head_sha="c" * 40, head_ref="replaybook/rule-0005", state="closed", merged=True)
    gh.add_pull(6, head_sha="d" * 40, head_ref="feature", user="alice")
    api = f"{gh.url}{gh.repo_path}"
    requests.post(f"{api}/statuses/{'a' * 40}", json={"state": "failure", "context": GATE_CONTEXT})
    requests.post(f"{api}/check-runs", json={"name": GATE_CONTEXT, "head_sha": "b" * 40, "status": "completed",
                                             "conclusion": "success"})
    requests.post(f"{api}/check-runs", json={"name": "admit", "head_sha": "b" * 40, "status": "in_progress"})
    gh.add_comment(5, f"{GATE_MARKER}\n## Replaybook gate: admit", user="github-actions[bot]")
    gh.add_comment(5, "LGTM", user="alice")
    gh.reset_calls()
    found = {g.pull.number: g for g in github.search_pulls("head:replaybook/rule-", GATE_CONTEXT)}
    assert [(r.method, r.path) for r in gh.requests] == [("POST", "/graphql")]  # one request for all of it
    assert sorted(found) == [3, 4, 5]
    assert (found[3].gate, found[4].gate, found[5].gate) == ("failure", "success", "none")
    assert (found[5].pull.state, found[5].pull.merged, found[3].pull.state) == ("closed", True, "open")
    assert found[3].pull.author == "github-actions[bot]" and found[3].pull.same_repo  # GraphQL drops "[bot]"
    assert [(c.author, c.body.splitlines()[0]) for c in found[5].comments] == [
        ("github-actions[bot]", GATE_MARKER), ("alice", "LGTM")]
    assert github.calls == 1


def test_the_search_goes_to_graphql_beside_an_enterprise_api_prefix():
    with FakeGitHub("octo", "app", api_prefix="/api/v3") as gh:
        gh.add_pull(3, head_ref="replaybook/rule-0003")
        adapter = PyGithubAdapter("octo/app", "t", gh.url, seconds_between_requests=0, seconds_between_writes=0)
        try:
            assert [g.pull.number for g in adapter.search_pulls("head:replaybook/rule-", GATE_CONTEXT)] == [3]
        finally:
            adapter.close()
        assert gh.requests[-1].path == "/api/graphql"


# ------------------------------------------------------------------ the CLI


@pytest.mark.parametrize("app", [True, False], ids=["app token", "workflow token"])
def test_github_handle_reports_the_gate_as_a_check_run_only_with_an_app_token(cli, gh, event, monkeypatch, app):
    if app:
        monkeypatch.setenv("REPLAYBOOK_GITHUB_APP", "1")
    else:
        monkeypatch.delenv("REPLAYBOOK_GITHUB_APP", raising=False)
    event("pull_request", fork_rule_pr(cli.root, gh))
    out = handle(cli)
    assert out["code"] == 1, out  # a fork's rule PR: the gate could not run, and never passes
    runs, statuses = check_runs_for(gh, HEAD), gh.statuses_for(HEAD)
    if app:
        (run,) = runs
        assert (run["name"], run["conclusion"], statuses) == (GATE_CONTEXT, "failure", [])
        assert "never success" in run["output"]["summary"]
        assert run["actions"][0]["identifier"] == "replay"
    else:
        (status,) = statuses
        assert (status["context"], status["state"], runs) == (GATE_CONTEXT, "error", [])
    (comment,) = gh.comments_on(1)
    assert comment["body"].startswith(GATE_MARKER)


def test_a_check_run_github_refuses_falls_back_to_the_status_of_the_same_name(gh, github, root):
    gh.add_pull(3)
    gh.fail_next(f"{gh.repo_path}/check-runs", 403, message="You must authenticate via a GitHub App.")
    action = GateRulePr(number=3, head_sha=SHA, base_ref="main", base_sha="b" * 40, fork=False, secrets=True)
    (outcome,) = execute([action], github, root=root, settings=config_mod.load(root), check_runs=True,
                         gate=lambda a: GateVerdict("success", "admit: rule-0001 admit", "## Replaybook gate\n"))
    assert outcome.status == "done", outcome
    assert check_runs_for(gh, SHA) == []
    (status,) = gh.statuses_for(SHA)
    assert (status["context"], status["state"]) == (GATE_CONTEXT, "success")
