"""``replaybook github handle`` end to end: the real CLI and PyGithub against the fake GitHub.

Payloads are trimmed copies of GitHub's webhook shapes (only the fields
``plan`` reads), written to a temp file as Actions does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import requests
from fakes.github import SECONDARY_LIMIT, FakeGitHub
from support.github import (
    DATA,
    HEAD,
    REPOSITORY,
    base_repo,
    fork_rule_pr,
    git,
    handle,
    rule_pr_payload,
    run_payload,
    seed_run,
)

from bot import config as config_mod
from bot.errors import BadInput
from bot.github import PyGithubAdapter
from bot.github.events import GateRulePr
from bot.github.handle import GATE_MARKER, GateVerdict, PrGate, execute
from bot.github.issue_form import MARKER as BLOCK_MARKER
from bot.github.port import BODY_LIMIT

# ------------------------------------------------------------------ capture_run


def test_a_failed_run_files_one_incident_issue_with_block_and_marker(cli, gh, event):
    seed_run(gh)
    event("workflow_run", run_payload())
    out = handle(cli)
    assert out["code"] == 0, out
    (issue,) = gh.issues
    assert issue["labels"] == ["replaybook", "incident"]
    assert "<!-- replaybook:run-7-job-test-3.11-" in issue["body"]
    assert "<!-- replaybook:run-7-attempt-1-job-test-3.11-" in issue["body"]
    assert BLOCK_MARKER + "\n```yaml\n" in issue["body"] and "triage: true" in issue["body"]
    assert "Needs triage" in issue["body"]
    assert [o["kind"] for o in out["outcomes"]] == ["capture_run", "distill_if_due"]
    assert [o["status"] for o in out["outcomes"]] == ["done", "skipped"]  # 1 incident: below the threshold
    # jobs, claim, find issue, log 302, log download, create issue, release, count open incidents
    assert out["api_calls"] == gh.calls == 8


def test_the_capture_that_reaches_the_threshold_dispatches_distill_once(cli, gh, event):
    (cli.root / ".replaybook.yml").write_text("github:\n  distill_threshold: 2\n", encoding="utf-8")
    gh.add_pull(50, title="Rule rule-0001", head_ref="replaybook/rule-0001",
                body="<!-- replaybook:rule-0001 -->\n<!-- replaybook:cite:gh-1 -->")
    outcomes = []
    for run_id in (7, 8, 9, 10):
        seed_run(gh, run_id)
        event("workflow_run", run_payload(run_id))
        gh.reset_calls()
        out = handle(cli)
        assert out["code"] == 0, out
        outcomes.append(out["outcomes"][-1]["summary"])
        assert gh.calls <= 10, out  # per captured failure, dispatch and the claim included
    # #1 is cited by an open rule PR, so it waits for no distill: the third capture reaches two.
    assert outcomes[0].startswith("1 undistilled") and outcomes[1].startswith("1 undistilled")
    assert outcomes[2] == "2 undistilled incident(s) reached the threshold of 2: dispatched replaybook-distill.yml"
    assert outcomes[3].startswith("3 undistilled")  # past it: the weekly run, not every capture, picks it up
    assert gh.dispatches == [{"workflow": "replaybook-distill.yml", "ref": "main", "inputs": {"reason": "threshold"}}]


def test_twenty_deliveries_make_one_issue_and_no_comment(cli, gh, event):
    seed_run(gh)
    event("workflow_run", run_payload())
    handle(cli)
    for _ in range(19):
        gh.reset_calls()
        out = handle(cli)
        assert [o["status"] for o in out["outcomes"]] == ["unchanged", "skipped"]
        assert gh.calls == 4  # jobs, claim, find issue, release: the log is not even fetched, nor incidents counted
    assert len(gh.issues) == 1
    assert gh.comments_on(1) == []


def test_a_second_attempt_comments_once(cli, gh, event):
    seed_run(gh)
    event("workflow_run", run_payload())
    handle(cli)
    event("workflow_run", run_payload(attempt=2))
    gh.reset_calls()
    out = handle(cli)
    assert out["code"] == 0 and "commented on #1" in out["outcomes"][0]["summary"]
    # jobs, claim, find issue, find comment, log 302, download, comment, release
    assert out["api_calls"] == gh.calls == 8
    assert out["outcomes"][1]["summary"] == "no new incident in this delivery"  # a repeat is not a new incident
    for _ in range(3):
        assert handle(cli)["outcomes"][0]["status"] == "unchanged"
    (comment,) = gh.comments_on(1)
    assert comment["body"].startswith("<!-- replaybook:run-7-attempt-2-job-test-3.11-")
    assert len(gh.issues) == 1


def test_a_huge_log_excerpt_fits_and_says_it_was_trimmed(cli, gh, event, monkeypatch):
    from bot.github import capture as handle_mod

    real = handle_mod.fit_body
    monkeypatch.setattr(handle_mod, "fit_body", lambda parts, **kw: real(parts, limit=3_000, **kw))
    seed_run(gh)
    event("workflow_run", run_payload())
    assert handle(cli)["code"] == 0
    body = gh.issues[0]["body"]
    assert len(body) <= 3_000 and "Replaybook trimmed evidence by" in body
    assert BLOCK_MARKER in body  # the yaml block is never cut
    assert BODY_LIMIT == 65_536


def test_5xx_and_a_secondary_rate_limit_mid_flow_are_retried(cli, gh, event):
    seed_run(gh)
    event("workflow_run", run_payload())
    gh.fail_next("/repos/octo/app/actions/runs/7/jobs", 502)
    gh.fail_next("/repos/octo/app/issues", 403, headers={"retry-after": "0"}, message=SECONDARY_LIMIT, method="POST")
    out = handle(cli)
    assert out["code"] == 0, out
    assert len(gh.issues) == 1
    assert [r.status for r in gh.requests if r.status >= 400] == [502, 403]


def test_a_github_failure_that_outlasts_the_retries_is_reported_not_hidden(cli, gh, event):
    seed_run(gh)
    event("workflow_run", run_payload())
    gh.fail_next("/repos/octo/app/actions/runs/7/jobs", 503, count=10)
    out = handle(cli)
    assert out["code"] == 1
    assert out["outcomes"][0]["status"] == "failed" and "503" in out["outcomes"][0]["summary"]


# ------------------------------------------------------------------ issue forms


def open_issue(gh: FakeGitHub, body: str) -> None:
    requests.post(f"{gh.url}{gh.repo_path}/issues", json={"title": "Incident", "body": body, "labels": ["incident"]})


def form_payload(body: str, action: str = "opened", old: str | None = None) -> dict:
    payload = json.loads((DATA / "webhooks" / "issues-opened-incident-form.json").read_text(encoding="utf-8"))
    payload["action"] = action
    payload["issue"].update(number=1, body=body)
    if old is not None:
        payload["changes"] = {"body": {"from": old}}
    return payload


def test_an_invalid_form_gets_a_label_and_one_comment_then_a_fix_clears_them(cli, gh, event):
    valid = json.loads((DATA / "webhooks" / "issues-opened-incident-form.json").read_text())["issue"]["body"]
    bad = valid.replace("wrong_assumption", "no idea").replace("\r\n22\r\n", "\r\nlots\r\n")
    assert bad != valid
    open_issue(gh, bad)
    event("issues", form_payload(bad))
    gh.reset_calls()
    out = handle(cli)
    assert out["code"] == 0, out
    issue = gh.issues[0]
    assert "incident:invalid" in issue["labels"] and issue["body"] == bad  # the person's text is kept
    (comment,) = gh.comments_on(1)
    assert "Cost (minutes)" in comment["body"] and "Failure class" in comment["body"]
    assert out["api_calls"] == gh.calls == 4  # get issue, list comments, comment, label
    handle(cli)  # the same delivery again: still one comment
    assert len(gh.comments_on(1)) == 1

    requests.patch(f"{gh.url}{gh.repo_path}/issues/1", json={"body": valid})  # the person fixes it
    event("issues", form_payload(valid, "edited", old=bad))
    out = handle(cli)
    assert out["code"] == 0, out
    # get issue, edit body and labels, list comments, edit comment, count open incidents (a new one is readable)
    assert out["api_calls"] == 5
    issue = gh.issues[0]
    assert "incident:invalid" not in issue["labels"] and "incident" in issue["labels"]
    assert issue["body"].startswith(valid) and BLOCK_MARKER in issue["body"]
    assert "failure_class: wrong_assumption" in issue["body"]
    (comment,) = gh.comments_on(1)
    assert "Fixed" in comment["body"]


# ------------------------------------------------------------------ rule PRs and the gate


def test_a_fork_rule_pr_gets_error_never_success(cli, gh, event, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    event("pull_request", fork_rule_pr(cli.root, gh))
    out = handle(cli)
    assert out["code"] == 1  # the gate could not run: the job says so too
    (status,) = gh.statuses_for(HEAD)
    assert status["state"] == "error" and status["context"] == "replaybook/admit"
    assert status["description"] == "replay could not run: no secrets on fork PRs"
    assert all(s["state"] != "success" for s in gh.statuses_for(HEAD))
    (comment,) = gh.comments_on(1)
    assert comment["body"].startswith(GATE_MARKER) and "never success" in comment["body"]
    assert "could not run" in summary.read_text()


def settings_for(root: Path):
    return config_mod.load(root)


def test_a_gate_run_sets_the_status_and_edits_one_comment_in_place(gh, root, tmp_path):
    requests.post(f"{gh.url}{gh.repo_path}/issues", json={"title": "Add rule-0042"})
    action = GateRulePr(number=1, head_sha=HEAD, base_ref="main", base_sha="b" * 40, fork=False, secrets=True)
    port = PyGithubAdapter("octo/app", "t", gh.url, sleep=lambda s: None, seconds_between_requests=0,
                           seconds_between_writes=0)
    summary = tmp_path / "summary.md"
    verdicts = iter([GateVerdict("failure", "reject: rule-0042 " + "x" * 200, "## Gate\n\nreject 0/3"),
                     GateVerdict("success", "admit: rule-0042 admit", "## Gate\n\nadmit 5/5")])
    counts = []
    for _ in range(2):
        gh.reset_calls()
        (outcome,) = execute([action], port, root=root, settings=settings_for(root), gate=lambda a: next(verdicts),
                             step_summary=summary)
        counts.append(gh.calls)
        assert outcome.status == "done"
    port.close()
    # status; the earlier gate comment (its ledger block, bot/github/ledger.py); list comments, create (then edit)
    assert counts == [4, 4]
    states = [s["state"] for s in gh.statuses_for(HEAD)]
    assert states == ["success", "failure"]  # newest first
    assert len(gh.statuses_for(HEAD)[1]["description"]) <= 140
    (comment,) = gh.comments_on(1)
    assert comment["body"] == f"{GATE_MARKER}\n## Gate\n\nadmit 5/5"
    assert summary.read_text().count("## Gate") == 2


def test_a_gate_that_cannot_decide_reports_error(gh, root):
    action = GateRulePr(number=None, head_sha=HEAD, base_ref="main", base_sha="nope", fork=False, secrets=True,
                        merge_group=True)
    port = PyGithubAdapter("octo/app", "t", gh.url, sleep=lambda s: None, seconds_between_requests=0,
                           seconds_between_writes=0)
    settings = settings_for(root)
    (outcome,) = execute([action], port, root=root, settings=settings, gate=PrGate(root, settings))
    port.close()
    assert outcome.status == "failed" and "not a commit id" in outcome.summary
    assert [s["state"] for s in gh.statuses_for(HEAD)] == ["error"]


def test_git_gate_finds_changed_rules_and_reads_the_base_playbook(root, tmp_path):
    from helpers import rule_yaml, write

    base = base_repo(root)
    write(root / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002", text="A rule -- named oddly."))
    write(root / "playbook" / "rules" / "--output=x.yaml", "id: x\n")  # a name that looks like an option: data
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001", text="Changed on the branch."))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "head")
    gate = PrGate(root, settings_for(root))
    assert gate.changed_rules(base) == ["playbook/rules/--output=x.yaml", "playbook/rules/rule-0001.yaml",
                                        "playbook/rules/rule-0002.yaml"]
    book = gate.judged_against(base, [])  # the base commit's playbook, from git objects
    assert [r.id for r in book.admitted()] == ["rule-0001"]
    assert "Changed on the branch" not in book.admitted()[0].rule
    assert [r.id for r in gate.judged_against(base, ["playbook/rules/rule-0001.yaml"]).admitted()] == []
    assert not (root / ".git" / "worktrees").exists()  # nothing in the repository changed
    # No API key and no replay given: the gate cannot run, so it says error rather than simulating.
    action = GateRulePr(number=1, head_sha=HEAD, base_ref="main", base_sha=base, fork=False, secrets=True)
    with pytest.raises(BadInput, match="ANTHROPIC_API_KEY"):
        gate(action)


def test_a_hits_only_change_needs_no_replay_and_the_cap_is_checked_on_the_result(root):
    from helpers import make_scenario, rule_yaml, write

    from bot.gate.decision import cheap_checks

    write(root / ".replaybook.yml", "cap: 2\n")
    base = base_repo(root)
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001", last_hit="2026-11-20"))
    git(root, "commit", "-qam", "record a hit")
    gate = PrGate(root, settings_for(root))  # no API key: any replay would be an error
    assert gate.changed_rules(base) == []
    verdict = gate(GateRulePr(number=3, head_sha=HEAD, base_ref="main", base_sha=base, fork=False, secrets=True))
    assert verdict.state == "success" and "bookkeeping" in verdict.description

    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001", text="When X, do Y instead.",
                                                                   cites=("gh-4", "gh-9")))
    make_scenario(root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a person edits the rule")
    names = gate.changed_rules(base)
    assert names == ["playbook/rules/rule-0001.yaml"]  # a real change is replayed
    book = gate.judged_against(base, names)
    _, problems = cheap_checks(book, root / names[0])
    assert problems == []  # judged as new: its own old text is not a twin, nor its id taken

    # Two rule PRs merged together in a merge group: three rules against a cap of two.
    for n in (2, 3):
        write(root / "playbook" / "rules" / f"rule-000{n}.yaml", rule_yaml(f"rule-000{n}", text=f"When {n}, do {n}."))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "merge group")
    group = GateRulePr(number=None, head_sha=HEAD, base_ref="main", base_sha=base, fork=False, secrets=True,
                       merge_group=True)
    verdict = gate(group)
    assert verdict.state == "failure" and verdict.description == "3 rules past the cap of 2"
    assert "merged result of this merge group" in verdict.report


# ------------------------------------------------------------------ the rest


def test_dry_run_plans_and_calls_nothing(cli, gh, event, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    event("workflow_run", run_payload())
    result = cli("github", "handle", "--dry-run")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert [a["kind"] for a in data["actions"]] == ["capture_run", "distill_if_due"]
    assert data["api_calls"] == 0 and gh.calls == 0


def test_a_rejected_agent_pr_is_filed_from_payload_review_comments_and_diff_stat(cli, gh, event):
    gh.add_pull(9, files=[{"filename": "api/limits.py", "additions": 40, "deletions": 2}],
                review_comments=[{"path": "api/limits.py", "body": "tests were run from the root", "review_id": 55}])
    payload = copy.deepcopy(rule_pr_payload(fork=False, number=9))
    payload["action"] = "closed"
    payload["pull_request"].update(merged=False, title="Add rate limiting", body="Adds a limiter",
                                   user={"login": "copilot-swe-agent[bot]"})
    event("pull_request", payload)
    out = handle(cli, "--agent-login", "copilot-swe-agent[bot]")
    assert out["code"] == 0, out
    (issue,) = gh.issues
    assert "<!-- replaybook:pr-9-closed -->" in issue["body"]
    assert "api/limits.py | +40 -2" in issue["body"] and "tests were run from the root" in issue["body"]
    # claim, find issue, review comments, files, create issue, release, count open incidents
    assert out["api_calls"] == 7
    assert handle(cli, "--agent-login", "copilot-swe-agent[bot]")["outcomes"][0]["status"] == "unchanged"
    assert len(gh.issues) == 1


@pytest.mark.parametrize("name,payload", [
    ("schedule", {"schedule": "0 3 * * *"}),
    ("push", {"ref": "refs/heads/main", "after": HEAD, "repository": REPOSITORY,
              "commits": [{"added": ["playbook/rules/rule-0003.yaml"], "modified": [], "removed": []}]}),
])
def test_without_the_opt_in_pr_writing_actions_say_so_and_fail(cli, gh, event, name, payload):
    event(name, payload)
    out = handle(cli)
    assert out["code"] == 1
    assert out["outcomes"][0]["status"] == "not_implemented" and "REPLAYBOOK_OPEN_PRS=1" in out["outcomes"][0]["summary"]
    assert gh.calls == 0


def test_ignored_events_record_why(cli, gh, event):
    event("star", {"action": "created"})
    result = cli("github", "handle")
    assert result.code == 0 and "ignore" in result.out and "star" in result.out
    assert "0 GitHub API call(s)" in result.out


@pytest.mark.parametrize("content,expect", [(None, "no such event payload"), ("{not json", "not valid JSON")])
def test_a_bad_payload_file_is_bad_input_naming_it(cli, event, tmp_path, monkeypatch, content, expect):
    path = tmp_path / "event.json"
    event("workflow_run", {})
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    result = cli("github", "handle")
    assert result.code == 2 and expect in result.err and "event.json" in result.err


def test_the_github_section_of_the_config_names_the_agent_and_flags_override_it(cli, gh, event):
    (cli.root / ".replaybook.yml").write_text("github:\n  agent_logins: [\"copilot-swe-agent[bot]\"]\n"
                                              "  distill_threshold: 0\n", encoding="utf-8")
    gh.add_pull(9, files=[{"filename": "api/limits.py"}])
    payload = copy.deepcopy(rule_pr_payload(fork=False, number=9))
    payload["action"] = "closed"
    payload["pull_request"].update(merged=False, user={"login": "copilot-swe-agent[bot]"})
    event("pull_request", payload)
    out = handle(cli)
    assert [o["kind"] for o in out["outcomes"]] == ["capture_rejected_pr"]  # threshold 0: no count
    assert out["outcomes"][0]["status"] == "done" and len(gh.issues) == 1
    out = handle(cli, "--agent-login", "someone-else")  # the flag wins over the config
    assert out["outcomes"][0]["status"] == "skipped" and "not an agent login" in out["outcomes"][0]["summary"]


def test_a_bad_github_section_is_bad_input(cli, gh, event):
    (cli.root / ".replaybook.yml").write_text("github:\n  distill_threshold: many\n", encoding="utf-8")
    event("workflow_run", run_payload())
    result = cli("github", "handle", "--json")
    assert result.code == 2 and "distill_threshold" in result.err and "Traceback" not in result.err


def test_the_command_fails_unless_the_gate_admits_so_its_job_can_be_the_required_check(cli, gh, event):
    from helpers import rule_yaml, write

    root = cli.root
    write(root / ".replaybook.yml", "cap: 1\n")
    base = base_repo(root)
    write(root / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002", text="When X, do Y."))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a second rule past the cap of one")
    payload = rule_pr_payload(fork=False, number=3)
    payload["pull_request"]["base"]["sha"] = base
    gh.add_pull(3)
    event("pull_request", payload)
    out = handle(cli)
    assert out["code"] == 1, out
    (outcome,) = out["outcomes"]
    assert (outcome["status"], outcome["verdict"]) == ("done", "failure")
    assert [s["state"] for s in gh.statuses_for(HEAD)] == ["failure"]

    event("pull_request", rule_pr_payload(fork=False, number=3) | {"action": "closed"})  # nothing to gate: exit 0
    assert handle(cli)["code"] == 0


@pytest.mark.parametrize("status", [502, 504])
def test_a_post_that_wrote_before_it_failed_is_not_made_twice(cli, gh, event, status):
    seed_run(gh)
    event("workflow_run", run_payload())
    gh.fail_next("/repos/octo/app/issues", status, method="POST", after_write=True)
    out = handle(cli)
    assert out["code"] == 0, out
    assert len(gh.issues) == 1, [i["number"] for i in gh.issues]
    seed_run(gh)
    event("workflow_run", run_payload(attempt=2))
    gh.fail_next("/repos/octo/app/issues/1/comments", status, method="POST", after_write=True)
    out = handle(cli)
    assert out["code"] == 0, out
    assert len(gh.comments_on(1)) == 1


def test_ten_concurrent_deliveries_of_one_failure_give_one_issue(gh, root):
    """No concurrency group here: ten runs of the real handler at once, each with its own client."""
    import threading

    from bot.github.events import CaptureRun

    seed_run(gh)
    action = CaptureRun(run_id=7, run_attempt=1, workflow="CI", conclusion="failure", head_sha=HEAD,
                        html_url="https://github.com/octo/app/actions/runs/7", key="run-7-attempt-1")
    settings, results = settings_for(root), []

    def deliver() -> None:
        port = PyGithubAdapter("octo/app", "t", gh.url, sleep=lambda s: None, seconds_between_requests=0,
                               seconds_between_writes=0)
        try:
            results.extend(execute([action], port, root=root, settings=settings))
        finally:
            port.close()

    threads = [threading.Thread(target=deliver) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(gh.issues) == 1 and gh.comments_on(1) == []
    assert sorted(o.status for o in results) == ["done"] + ["unchanged"] * 9, results
    assert gh.state.labels == {}  # every claim released


PLAIN = ("Seen on the upload service today.\n\n```yaml\ntask: Fix the flaky upload test\n"
         "failure_class: wrong_assumption\ntrigger: CI failed on main\nbelieved: tests run from the repo root\n"
         "actual: packages/api has its own pytest.ini\ncost_minutes: 20\n```\n")


def test_a_plain_yaml_incident_issue_is_accepted_and_checked_field_by_field(cli, gh, event):
    bad = PLAIN.replace("wrong_assumption", "no idea").replace("cost_minutes: 20", "cost_minutes: lots")
    open_issue(gh, bad)
    event("issues", form_payload(bad))
    assert handle(cli)["code"] == 0
    issue = gh.issues[0]
    assert "incident:invalid" in issue["labels"]
    (comment,) = gh.comments_on(1)
    assert "`Failure class` (failure_class)" in comment["body"] and "`Cost (minutes)` (cost_minutes)" in comment["body"]

    requests.patch(f"{gh.url}{gh.repo_path}/issues/1", json={"body": PLAIN})  # the person fixes it
    event("issues", form_payload(PLAIN, "edited", old=bad))
    assert handle(cli)["code"] == 0
    issue = gh.issues[0]
    assert "incident:invalid" not in issue["labels"]
    assert issue["body"].startswith(PLAIN) and BLOCK_MARKER in issue["body"] and "cost_minutes: 20" in issue["body"]

    normalised = issue["body"]
    edited = normalised.replace("cost_minutes: 20", "cost_minutes: 45", 1)  # their block, not the bot's
    requests.patch(f"{gh.url}{gh.repo_path}/issues/1", json={"body": edited})
    event("issues", form_payload(edited, "edited", old=normalised))
    out = handle(cli)
    assert out["code"] == 0
    assert gh.issues[0]["body"].count("cost_minutes: 45") == 2, (out, gh.issues[0]["body"])
