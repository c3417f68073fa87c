"""The gate as the ``replaybook/admit`` check run (issue 30, item 1), through the real handler on ``FakePort``.

With a GitHub App token the gate is a check run: the report is its summary (cut at GitHub's 65,535
characters, the rest linked), annotations point at the rule file and the scenario files the decision rests
on, and "Replay again" re-gates. Without one it is the commit status of the same name, so a branch rule
requiring ``replaybook/admit`` is met either way. The replays are the simulated model's, in bubblewrap.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from fakes.port import FakePort
from helpers import write
from support.gate import RULE, RULE_FILE, pr_repo

from bot import config as config_mod
from bot.gate.decision import GateResult
from bot.github import checks
from bot.github.context import GateVerdict
from bot.github.events import GateRulePr, Ignore, plan
from bot.github.gate import GATE_CONTEXT, PrGate
from bot.github.handle import execute
from bot.github.port import CHECK_TEXT_LIMIT, CheckAction
from bot.replay.engine import ReplayOptions

RUN_URL = "https://github.com/octo/app/actions/runs/9"


def gate(port: FakePort, root: Path, base: str, head: str, *, app: bool, gate=None) -> list:
    settings = config_mod.load(root)
    number = port.add_pull(head_ref="replaybook/rule-0001").number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True)
    return execute([action], port, root=root, settings=settings, run_url=RUN_URL, check_runs=app,
                   gate=gate or PrGate(root, settings, replay=ReplayOptions()))


def required_check_met(port: FakePort, sha: str, required: str) -> bool:
    """A branch rule requiring ``required`` on ``sha``, as GitHub matches it: by name, the latest check run and the
    latest status; when both carry the name, both must pass (a neutral or skipped check run passes)."""
    runs = [r.conclusion for r in port.check_runs_for(sha) if r.name == required]
    states = [s["state"] for s in port.statuses_for(sha) if s["context"] == required]
    if not runs and not states:
        return False
    return (not runs or runs[-1] in ("success", "neutral", "skipped")) and (not states or states[-1] == "success")


# ------------------------------------------------------------------ the check run, or the status


def test_with_an_app_token_the_admitted_rule_is_the_check_run_the_required_rule_names(port, root):
    base, head = pr_repo(root)
    (outcome,) = gate(port, root, base, head, app=True)
    assert outcome.verdict == "success", outcome
    (run,) = port.check_runs_for(head)
    assert (run.name, run.conclusion, run.head_sha) == (GATE_CONTEXT, "success", head)
    assert "Replaybook gate: admit `rule-0001`" in run.summary  # the report is the summary
    assert run.details_url == RUN_URL and run.title.startswith("admit: rule-0001 admit")
    assert port.statuses_for(head) == []  # one report, not two
    (note,) = run.annotations
    rule_line = (root / RULE_FILE).read_text().splitlines().index(f"rule: {RULE}") + 1
    assert (note.path, note.start_line, note.end_line, note.annotation_level) == (RULE_FILE, rule_line, rule_line,
                                                                                   "notice")
    assert note.title == "rule-0001: admit" and "discriminative" in note.message
    assert [(a.identifier, a.label) for a in run.actions] == [("replay", "Replay again")]
    assert required_check_met(port, head, "replaybook/admit")


def test_without_an_app_token_the_gate_is_the_status_of_the_same_name(port, root):
    base, head = pr_repo(root)
    (outcome,) = gate(port, root, base, head, app=False)
    assert outcome.verdict == "success"
    assert port.check_runs_for(head) == []
    (status,) = port.statuses_for(head)
    assert (status["context"], status["state"]) == (GATE_CONTEXT, "success")
    assert required_check_met(port, head, "replaybook/admit")


def test_a_regressed_suite_scenario_fails_the_check_and_is_annotated(port, root):
    base, head = pr_repo(root, victim=True)
    (outcome,) = gate(port, root, base, head, app=True)
    assert outcome.verdict == "failure", outcome
    (run,) = port.check_runs_for(head)
    assert run.conclusion == "failure" and not required_check_met(port, head, "replaybook/admit")
    by_path = {a.path: a for a in run.annotations}
    assert set(by_path) == {RULE_FILE, "scenarios/victim/scenario.yaml"}
    assert by_path[RULE_FILE].annotation_level == "failure" and "regressed victim" in by_path[RULE_FILE].message
    victim = by_path["scenarios/victim/scenario.yaml"]
    pass_if = (root / "scenarios/victim/scenario.yaml").read_text().splitlines().index("pass_if:") + 1
    assert (victim.start_line, victim.annotation_level, victim.title) == (pass_if, "failure", "regressed by rule-0001")
    assert "passed without rule-0001" in victim.message


def test_a_rule_that_does_not_help_annotates_the_failing_check_of_its_scenario(port, root):
    base, head = pr_repo(root, own={"branch_on": "a phrase no rule has"})  # fails with the rule and without
    (outcome,) = gate(port, root, base, head, app=True)
    assert outcome.verdict == "failure", outcome
    (run,) = port.check_runs_for(head)
    failing = [a for a in run.annotations if a.path == "scenarios/own/scenario.yaml"]
    assert failing, run.annotations
    lines = (root / "scenarios/own/scenario.yaml").read_text().splitlines()
    for note in failing:
        assert note.title.startswith("failing check: ") and note.annotation_level == "failure"
        kind = note.title.removeprefix("failing check: ").split(" ", 1)[0]
        assert lines[note.start_line - 1].lstrip().startswith(f"- {kind}:"), (note, lines)
        assert "still failed" in note.message


def test_a_gate_that_could_not_decide_never_passes_the_check(port, root):
    base, head = pr_repo(root)
    (outcome,) = gate(port, root, base, head, app=True,
                      gate=lambda a: GateVerdict("error", "replay could not run", "## could not run\n"))
    (run,) = port.check_runs_for(head)
    assert run.conclusion == "failure" and outcome.verdict == "error"


def test_a_gate_whose_budget_ends_first_is_neutral_and_still_blocks_the_merge(port, root):
    write(root / ".replaybook.yml", "gate:\n  budget: {replays: 3}\n")  # the base's config: a PR cannot lift it
    base, head = pr_repo(root)
    settings = config_mod.load(root)
    number = port.add_pull(head_ref="replaybook/rule-0001").number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True)
    (outcome,) = execute([action], port, root=root, settings=settings, run_url=RUN_URL, check_runs=True,
                         gate=PrGate(root, settings, replay=ReplayOptions()))
    assert outcome.verdict == "inconclusive" and outcome.status == "done", outcome
    (run,) = port.check_runs_for(head)
    assert run.conclusion == "neutral" and "inconclusive" in run.title
    assert "more replays would decide" in run.summary and "budget of 3 replays" in run.summary
    (status,) = port.statuses_for(head)  # a neutral check run alone would pass a required check
    assert (status["context"], status["state"]) == (GATE_CONTEXT, "pending")
    assert not required_check_met(port, head, "replaybook/admit")
    (comment,) = port.comments_on(number)
    assert '"decision":"inconclusive"' in comment.body.replace(" ", "")  # the PR's gate ledger keeps it
    # The next gate that decides sets the status again, so the PR is not held by the pending one.
    (again,) = execute([action], port, root=root, settings=settings, run_url=RUN_URL, check_runs=True,
                       gate=lambda a: GateVerdict("success", "admit: rule-0001 admit", "## admitted\n"))
    assert again.verdict == "success"
    assert [r.conclusion for r in port.check_runs_for(head)] == ["neutral", "success"]
    assert [s["state"] for s in port.statuses_for(head)] == ["pending", "success"]
    assert required_check_met(port, head, "replaybook/admit")


def test_without_an_app_token_an_inconclusive_gate_is_a_pending_status(port, root):
    base, head = pr_repo(root)
    (outcome,) = gate(port, root, base, head, app=False,
                      gate=lambda a: GateVerdict("inconclusive", "inconclusive: rule-0001", "## inconclusive\n"))
    assert outcome.verdict == "inconclusive"
    assert [s["state"] for s in port.statuses_for(head)] == ["pending"]
    assert not required_check_met(port, head, "replaybook/admit")


# ------------------------------------------------------------------ the summary's limit


def test_a_report_over_githubs_limit_is_cut_at_a_line_with_its_fence_closed_and_the_rest_linked():
    report = "## Replaybook gate: reject\n\n```text\n" + "a trial's output line\n" * 5000 + "```\n\nThe end.\n"
    assert len(report) > CHECK_TEXT_LIMIT
    text = checks.summary(report, RUN_URL)
    assert len(text) <= CHECK_TEXT_LIMIT
    assert text.startswith("## Replaybook gate: reject") and "The end." not in text
    assert sum(line.startswith("```") for line in text.splitlines()) % 2 == 0  # the cut fence is closed
    assert f"[the workflow run]({RUN_URL})" in text.splitlines()[-1]
    assert checks.summary("short\n", RUN_URL) == "short\n"


def test_a_huge_report_still_makes_a_check_run_github_accepts(port, root):
    base, head = pr_repo(root)
    huge = "## Replaybook gate: reject\n\n" + "x" * 200_000 + "\n"
    (outcome,) = gate(port, root, base, head, app=True, gate=lambda a: GateVerdict("failure", "reject", huge))
    assert outcome.status == "done", outcome
    (run,) = port.check_runs_for(head)
    assert len(run.summary) <= CHECK_TEXT_LIMIT and RUN_URL in run.summary


def test_the_replay_action_fits_githubs_limits():
    action = checks.REPLAY_ACTION
    assert len(action.label) <= 20 and len(action.identifier) <= 20 and len(action.description) <= 40
    with pytest.raises(ValueError, match="limits"):
        CheckAction(label="Replay again", description="x" * 41, identifier="replay")


# ------------------------------------------------------------------ hostile text in annotations


def test_rule_text_and_trial_output_in_annotations_are_neutralised(root):
    write(root / RULE_FILE, "id: rule-0001\nrule: x\n")
    hostile = "ping @octo/admins ![x](i.png) [d](x.md) closes #77 <!-- replaybook-ledger v1 {} --> ```"
    result = GateResult("rule-0001", hostile, "reject", f"cheap checks failed: {hostile}")
    (note,) = checks.annotations(result, root, RULE_FILE, root / "scenarios")
    for text in (note.message, note.title):
        assert "@octo" not in text and "![" not in text and "](" not in text and "#77" not in text
        assert "<!--" not in text and "```" not in text


# ------------------------------------------------------------------ "Replay again"


def requested(examples, *, name: str = GATE_CONTEXT, identifier: str = "replay") -> dict:
    """GitHub's example of a check run's requested action, as "Replay again" on the gate's check run."""
    (payload,) = [e for e in examples["check_run"] if e["action"] == "requested_action"]
    payload = copy.deepcopy(payload)
    payload["check_run"]["name"] = name
    payload["requested_action"]["identifier"] = identifier
    return payload


def test_replay_again_on_the_gate_s_check_run_gates_its_pr_again(examples):
    payload = requested(examples)
    (action,) = plan("check_run", payload)
    pr = payload["check_run"]["pull_requests"][0]
    assert isinstance(action, GateRulePr)
    assert (action.number, action.head_sha, action.base_sha, action.base_ref) == (
        pr["number"], payload["check_run"]["head_sha"], pr["base"]["sha"], pr["base"]["ref"])
    assert action.secrets and not action.fork


@pytest.mark.parametrize("change", ["another check", "another button", "no pull request", "created"])
def test_other_check_run_events_do_not_gate(examples, change):
    payload = requested(examples, name="lint" if change == "another check" else GATE_CONTEXT,
                        identifier="lgtm" if change == "another button" else "replay")
    if change == "no pull request":  # a fork's PR is never listed on a check run
        payload["check_run"]["pull_requests"] = []
    if change == "created":
        payload["action"] = "created"
    (action,) = plan("check_run", payload)
    assert isinstance(action, Ignore) and "check_run" in action.reason


def test_replay_again_through_the_handler_makes_a_new_check_run(port, root, examples):
    base, head = pr_repo(root)
    gate(port, root, base, head, app=True)
    payload = requested(examples)
    pr = payload["check_run"]["pull_requests"][0]
    pr["head"]["sha"] = payload["check_run"]["head_sha"] = head
    pr["base"]["sha"] = base
    port.pulls[pr["number"]] = port.pulls[1]  # the example's PR number is this repository's rule PR
    settings = config_mod.load(root)
    (outcome,) = execute(plan("check_run", payload), port, root=root, settings=settings, check_runs=True,
                         gate=PrGate(root, settings, replay=ReplayOptions()))
    assert outcome.verdict == "success", outcome
    assert [r.conclusion for r in port.check_runs_for(head)] == ["success", "success"]


def test_the_check_runs_report_breaks_the_suite_down_by_task_type_and_shows_efficiency(port, root):
    base, head = pr_repo(root, victim=True)
    gate(port, root, base, head, app=True)
    (run,) = port.check_runs_for(head)
    assert "| task type | scenarios | without the rule | with the rule | change of the pass rate |" in run.summary
    assert "| `untyped` | 2 |" in run.summary
    victim = next(line for line in run.summary.splitlines() if line.startswith("| `victim` |") and "→" in line)
    assert victim.count("95% ") == 3, victim  # turns, tokens and cost, each with its interval
    assert "SIMULATED figures" in run.summary
