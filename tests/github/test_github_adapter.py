"""The real PyGithub, through our adapter, against the fake GitHub on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fakes.github import MAIN_SHA, FakeGitHub
from helpers import REPO

from bot.github import (
    BODY_LIMIT,
    GitHubError,
    GitHubPort,
    IssueRef,
    PyGithubAdapter,
    fit_body,
    marker,
)

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
LOG = "setup\n" + "noise\n" * 50 + "##[error]Process completed with exit code 1.\n"


@pytest.fixture
def gh():
    with FakeGitHub("octo", "app") as fake:
        yield fake


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def github(gh, sleeps) -> PyGithubAdapter:
    adapter = PyGithubAdapter(
        "octo/app", "token", gh.url, sleep=sleeps.append, seconds_between_requests=0, seconds_between_writes=0
    )
    yield adapter
    adapter.close()


def file_incident(github: GitHubPort, key: str, title: str, body: str) -> IssueRef:
    """What capture does with one failure: one issue per key, a comment on each repeat."""
    mark = marker(key)
    found = github.find_issue_by_marker(mark)
    if found is None:
        return github.create_issue(title, f"{mark}\n{body}", ["incident"])
    github.add_comment(found.number, f"{mark}\nSeen again.\n\n{body}")
    return found


def test_the_adapter_is_a_port(github):
    assert isinstance(github, GitHubPort)


def test_the_core_does_not_load_pygithub():
    code = "import sys, bot.github, bot.github.port; assert 'github' not in sys.modules, 'PyGithub was imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_create_then_find_by_marker(github, gh):
    assert github.find_issue_by_marker(marker("run-1")) is None
    made = github.create_issue("CI failed", f"{marker('run-1')}\nboom", ["incident"])
    assert made.labels == ("replaybook", "incident")
    assert github.find_issue_by_marker(marker("run-1")) == made
    assert github.find_issue_by_marker(marker("run-2")) is None


def test_the_same_event_twenty_times_gives_one_issue_and_repeats_comment(github, gh):
    for _ in range(20):
        issue = file_incident(github, "ci-test-7", "CI failed: test", "##[error] boom")
    assert len(gh.issues) == 1
    assert len(gh.comments_on(issue.number)) == 19


def test_find_by_marker_sees_closed_issues_and_pages(gh, sleeps):
    small_pages = PyGithubAdapter(
        "octo/app", "t", gh.url, sleep=sleeps.append, seconds_between_requests=0, seconds_between_writes=0, per_page=2
    )
    for n in range(5):
        small_pages.create_issue(f"t{n}", marker(f"k{n}"))
    small_pages.update_issue(1, state="closed")
    gh.reset_calls()
    found = small_pages.find_issue_by_marker(marker("k0"))
    assert found is not None and found.state == "closed"
    assert gh.calls == 1  # oldest first: the first page holds it, no more pages are fetched
    assert small_pages.find_issue_by_marker(marker("nope")) is None


def test_update_issue(github, gh):
    made = github.create_issue("t", "old")
    gh.reset_calls()
    updated = github.update_issue(made.number, body="new", labels=["triage"], state="closed")
    assert (updated.body, updated.labels, updated.state) == ("new", ("replaybook", "triage"), "closed")
    assert gh.calls == 1  # the issue is lazy: PATCH only


def test_upsert_comment_edits_in_place(github, gh):
    issue = github.create_issue("PR", "x")
    first = github.upsert_comment(issue.number, marker("gate"), "gate: 2/5")
    second = github.upsert_comment(issue.number, marker("gate"), "gate: 5/5")
    github.add_comment(issue.number, "a human")
    third = github.upsert_comment(issue.number, marker("gate"), "gate: 5/5")
    assert first.id == second.id == third.id
    assert [c["body"] for c in gh.comments_on(issue.number)] == [f"{marker('gate')}\ngate: 5/5", "a human"]
    assert github.find_comment_by_marker(issue.number, marker("gate")) == third
    assert github.find_comment_by_marker(issue.number, marker("other")) is None


def test_set_status_makes_one_request(github, gh):
    github.set_status(SHA, "failure", "replaybook/gate", "x" * 200, "https://example.test/run/1")
    assert [(r.method, r.path) for r in gh.requests] == [("POST", f"/repos/octo/app/statuses/{SHA}")]
    (status,) = gh.statuses_for(SHA)
    assert (status["state"], status["context"], len(status["description"])) == ("failure", "replaybook/gate", 140)


def test_failed_jobs_and_their_logs_through_the_302(github, gh):
    gh.add_workflow_run(
        7,
        jobs=[
            {
                "name": "test",
                "conclusion": "failure",
                "steps": [{"name": "setup", "conclusion": "success"}, {"name": "pytest", "conclusion": "failure"}],
            },
            {"name": "lint", "conclusion": "success"},
            {"name": "slow", "conclusion": "timed_out"},
            {"name": "running", "conclusion": None, "status": "in_progress"},
        ],
        logs={"test": LOG},
    )
    jobs = github.failed_jobs(7)
    assert [j.name for j in jobs] == ["test", "slow"]
    assert [s.name for s in jobs[0].failed_steps] == ["pytest"]
    assert github.job_log(jobs[0].id) == LOG
    assert [r.status for r in gh.requests] == [200, 302, 200]
    with pytest.raises(GitHubError) as err:
        github.job_log(gh.job_id(7, "running"))  # only finished jobs have logs
    assert err.value.status == 404


def test_retries_5xx_with_exponential_backoff(github, gh, sleeps):
    gh.fail_next("/repos/octo/app/issues", 502, count=2, method="POST")
    made = github.create_issue("t", marker("k"))
    assert made.number == 1 and len(gh.issues) == 1
    assert sleeps == [1.0, 2.0]
    # A POST that makes an issue is resent only after listing shows it was not written.
    assert [(r.method, r.status) for r in gh.requests] == [("POST", 502), ("GET", 200), ("POST", 502), ("GET", 200),
                                                           ("POST", 201)]


def test_gives_up_after_the_retries(github, gh, sleeps):
    gh.fail_next("/repos/octo/app/statuses", 503, count=10)
    with pytest.raises(GitHubError) as err:
        github.set_status(SHA, "success", "replaybook/gate", "ok")
    assert err.value.status == 503
    assert sleeps == [1.0, 2.0, 4.0]
    assert gh.calls == 4


@pytest.mark.parametrize("status", [403, 429])
def test_honours_retry_after_on_a_secondary_rate_limit(github, gh, sleeps, status):
    gh.rate_limit_next("/repos/octo/app/issues", retry_after=7, status=status)
    github.create_issue("t", "b")
    assert sleeps == [7.0]
    assert [r.status for r in gh.requests] == [status, 201]


def test_a_plain_403_is_not_retried(github, gh, sleeps):
    gh.fail_next("/repos/octo/app/issues", 403, message="Resource not accessible by integration")
    with pytest.raises(GitHubError, match="403.*Resource not accessible by integration"):
        github.create_issue("t", "b")
    assert sleeps == []


def test_a_404_mid_flow_is_a_clear_error(github, gh):
    issue = github.create_issue("t", marker("k"))
    gh.delete_issue(issue.number)  # someone deleted it between delivery and report
    with pytest.raises(GitHubError) as err:
        github.upsert_comment(issue.number, marker("gate"), "report")
    assert err.value.status == 404
    assert f"/issues/{issue.number}/comments" in err.value.path
    assert "does not exist any more" in str(err.value)


def test_bodies_over_the_limit_are_trimmed_evidence_first(github, gh):
    evidence = "start\n" + "log line\n" * 9000 + "##[error] the real cause\n"
    parts = {"marker": marker("run-9"), "summary": "## What failed\npytest", "evidence": evidence, "footer": "-- replaybook"}
    with pytest.raises(GitHubError) as err:
        github.create_issue("too long", "\n\n".join(parts.values()))
    assert err.value.status == 422
    assert "body is too long" in err.value.render()

    body = fit_body(parts)
    assert len(body) <= BODY_LIMIT
    assert body.startswith(marker("run-9")) and "## What failed" in body and "-- replaybook" in body
    assert "##[error] the real cause" in body  # the tail of the log survives
    assert "Replaybook trimmed evidence by" in body.splitlines()[-1]
    made = github.create_issue("fits", body)
    assert github.find_issue_by_marker(marker("run-9")) == made


def test_short_bodies_are_left_alone():
    assert fit_body({"a": "x", "evidence": "y"}) == "x\n\ny"


def test_markers_refuse_keys_that_could_break_the_comment():
    assert marker("ci/run-7:attempt.2") == "<!-- replaybook:ci/run-7:attempt.2 -->"
    with pytest.raises(ValueError, match="cannot go in a marker"):
        marker("x -->")


def test_call_budgets(github, gh):
    """One captured failure costs at most 8 requests; one gate report at most 5."""
    gh.add_workflow_run(11, jobs=[{"name": "test", "conclusion": "failure"}, {"name": "lint"}], logs={"test": LOG})

    def measure(flow) -> int:
        gh.reset_calls()
        before = github.calls
        flow()
        assert github.calls - before == gh.calls  # the adapter counts what the server saw
        return gh.calls

    def capture():
        for job in github.failed_jobs(11):
            file_incident(github, f"run-11-{job.name}", f"CI failed: {job.name}", github.job_log(job.id))

    def gate(text: str):
        github.set_status(SHA, "success", "replaybook/gate", text)
        github.upsert_comment(1, marker("gate-pr-3"), text)

    assert measure(capture) == 5  # jobs, log 302, log download, find issue, create issue
    assert measure(capture) == 5  # a repeat: ... find issue, comment
    assert len(gh.issues) == 1
    assert measure(lambda: gate("5/5 passed")) == 3  # status, list comments, create comment
    assert measure(lambda: gate("4/5 passed")) == 3  # status, list comments, edit comment


# ------------------------------------------------------------------ branches, files and pull requests (from test_github_prs)


def test_branches_files_and_pull_requests_through_the_adapter(gh, github):
    assert github.default_branch_sha() == MAIN_SHA
    github.create_branch("replaybook/rule-0001", MAIN_SHA)
    with pytest.raises(GitHubError) as taken:
        github.create_branch("replaybook/rule-0001", MAIN_SHA)
    assert taken.value.status == 422
    rule, branch = "playbook/rules/rule-0001.yaml", "replaybook/rule-0001"
    assert github.commit_files(branch, {rule: "a\n", "notes.md": "n\n"}, "add") is True
    assert github.commit_files(branch, {rule: "a\n"}, "same") is False  # nothing changes: no commit
    assert github.commit_files(branch, {rule: "b\n"}, "edit") is True
    assert gh.branch_files(branch) == {rule: "b\n", "notes.md": "n\n"}
    assert github.commit_files(branch, {"notes.md": None, "never-there.md": None}, "rm") is True
    assert gh.branch_files("replaybook/rule-0001") == {"playbook/rules/rule-0001.yaml": "b\n"}
    assert github.commit_files(branch, {"notes.md": None}, "rm") is False  # already gone
    assert sum(r.path.endswith("/git/commits") and r.method == "POST" for r in gh.requests) == 3
    assert not [r for r in gh.writes() if "/contents/" in r.path]  # the Git Data API, never the contents API
    pr = github.create_pr("Rule", f"{marker('rule-0001')}\nbody", "replaybook/rule-0001", "main")
    assert (pr.state, pr.merged, pr.head_ref) == ("open", False, "replaybook/rule-0001")
    assert github.find_pr_by_marker(marker("rule-0001")) == pr
    assert github.find_pr_by_marker(marker("rule-0002")) is None
    edited = github.update_pr(pr.number, body=f"{marker('rule-0001')}\nnew")
    assert edited.body.endswith("new") and gh.pulls[-1]["body"] == edited.body
    gh.close_pull(pr.number, merged=True)
    assert github.find_pr_by_marker(marker("rule-0001"), state="open") is None
    assert github.find_pr_by_marker(marker("rule-0001")).merged is True


def test_a_write_waits_out_a_secondary_rate_limit(gh):
    waits: list[float] = []
    a = PyGithubAdapter("octo/app", "t", gh.url, sleep=waits.append, seconds_between_requests=0,
                        seconds_between_writes=0)
    gh.fail_next(gh.repo_path + "/git/commits", 403, headers={"retry-after": "7"}, method="POST")
    assert a.commit_files("main", {"x.txt": "x"}, "add") is True
    a.close()
    assert waits == [7.0] and gh.branch_files("main") == {"x.txt": "x"}
