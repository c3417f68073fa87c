"""Our own workflows, run locally: each event through the real workflow file, against the fake GitHub.

tests/actsim/ runs each workflow's jobs and their ``run:`` steps in real
shells, with a real webhook payload (``@octokit/webhooks-examples``, edited
where the examples lack the case) in GITHUB_EVENT_PATH, in a workspace that is
a small git repository holding our workflows and composite actions. The
actions' ``install.sh`` makes a venv and pip-installs Replaybook; through
``stub_python`` the venv runs the code under test and pip only logs. Every
``replaybook github handle`` talks to ``FakeGitHub``; the models are
SIMULATED (a ``Gateway`` answering from an ``AnswerBook`` or a scenario's
policy, found through ANTHROPIC_BASE_URL as a proxy would be). No Docker, no
network.

Not covered here: that expressions never reach a ``run:`` script
(tests/github/test_workflows_lint.py checks every shipped workflow and action).
"""

from __future__ import annotations

import json

import pytest
from actsim import run_workflow
from fakes.github import FakeGitHub, check_runs_for
from helpers import REPO, rule_yaml, write
from support.admit_sim import (
    NAME,
    OWNER,
    PR_NUMBER,
    Sim,
    checkout,
    commit_all,
    gh_shim,
    make_rule_pr,
    make_workspace,
    only_job,
    pr_event,
    retarget,
)
from support.github import git
from support.webhooks import example
from support.workflows import CAPTURED, LOG, RULE, SCENARIO

from bot.github.issue_form import MARKER, read_block
from bot.replay.gateway.answers import AnswerBook
from bot.replay.gateway.policy import load_policy
from bot.replay.gateway.server import Gateway

WEBHOOKS = REPO / "tests" / "data" / "webhooks"
AGENT = "Codertocat"  # the author of the examples' pull requests


def failed_run(examples, run_id: int, conclusion: str = "failure") -> dict:
    """GitHub's example of a completed run, as a run of our watched `ci` workflow that ended ``conclusion``."""
    payload = retarget(example(examples, "workflow_run", "completed", workflow_run__conclusion="success"))
    payload["workflow"]["name"] = payload["workflow_run"]["name"] = "ci"
    payload["workflow"]["path"] = payload["workflow_run"]["path"] = ".github/workflows/ci.yml"
    payload["workflow_run"].update(id=run_id, conclusion=conclusion, run_attempt=1, head_branch="main")
    return payload


@pytest.fixture
def gh():
    with FakeGitHub(OWNER, NAME) as fake:
        yield fake


@pytest.fixture
def sim(tmp_path, gh) -> Sim:
    return Sim(make_workspace(tmp_path / "ws"), gh, tmp_path)


@pytest.fixture
def sim_scenario(tmp_path, gh) -> Sim:
    """A workspace with one scenario, whose failures dispatch distill at the second incident."""
    return Sim(make_workspace(tmp_path / "ws", scenario=True, distill_threshold=2), gh, tmp_path)


# ------------------------------------------------------------------ capture


def test_capture_files_one_incident_issue_per_failed_run_however_often_it_is_delivered(sim, gh, examples):
    gh.add_workflow_run(4242, jobs=[{"name": "test", "conclusion": "failure"}], logs={"test": LOG})
    payload = failed_run(examples, 4242)
    first = sim.run("capture", "workflow_run", payload)
    job = only_job(first, "capture")
    assert job.result == "success", first.log()
    assert checkout(job)["ref"] == "main"
    # install.sh installed Replaybook from the workspace (the action's own source), into its venv.
    assert sim.pip_log.read_text() == (  # the pinned dependencies by hash, then Replaybook itself from the action,
        # each by an isolated interpreter (-I) and a pip that reads no configuration (--isolated): the judge's seat
        f"pip -I --isolated install --quiet --disable-pip-version-check --require-hashes --only-binary=:all: "
        f"-r {sim.ws}/actions/requirements.lock\n"
        f"pip -I --isolated install --quiet --disable-pip-version-check --no-deps --no-build-isolation {sim.ws}\n")
    (issue,) = gh.issues
    assert "incident" in issue["labels"] and issue["title"] == "CI failure: ci / test"
    assert "<!-- replaybook:run-4242-job-test-" in issue["body"] and MARKER in issue["body"]
    assert "Needs triage" in issue["body"]  # no ANTHROPIC_API_KEY secret: capture cannot state the belief delta

    again = sim.run("capture", "workflow_run", payload)  # a redelivery
    assert again.jobs["capture"].result == "success", again.log()
    assert [i["number"] for i in gh.issues] == [issue["number"]] and gh.comments_on(issue["number"]) == []
    assert "already on #" in again.jobs["capture"].step("./actions/capture").stdout


def test_capture_ignores_a_successful_run(sim, gh, examples):
    gh.add_workflow_run(4243, jobs=[{"name": "test", "conclusion": "success"}])
    result = sim.run("capture", "workflow_run", failed_run(examples, 4243, conclusion="success"))
    job = only_job(result, "capture")  # the workflow cannot filter on the conclusion: the job runs, the bot ignores
    assert job.result == "success", result.log()
    assert "only failure and timed_out are captured" in job.step("./actions/capture").stdout
    assert gh.issues == [] and gh.dispatches == []


def test_capture_is_not_triggered_by_unwatched_workflows(sim, gh, examples):
    payload = failed_run(examples, 4244)
    payload["workflow_run"]["name"] = "docs"
    result = sim.run("capture", "workflow_run", payload)
    assert not result.triggered and "not in workflows ['ci']" in result.why
    assert gh.calls == 0


def test_capture_normalises_an_incident_issue_form(sim, gh):
    payload = retarget(json.loads((WEBHOOKS / "issues-opened-incident-form.json").read_text("utf-8")))
    issue = gh.add_issue(payload["issue"]["title"], payload["issue"]["body"], ["incident"])
    payload["issue"]["number"] = issue["number"]
    result = sim.run("capture", "issues", payload)
    job = only_job(result, "capture")
    assert job.result == "success", result.log()
    body = gh.issues[0]["body"]
    assert body.startswith(payload["issue"]["body"])  # the person's text is kept
    block = read_block(body, where="issue")
    assert block is not None, body
    assert block["believed"] == "Tests are run from repo root with `pytest`" and block["cost_minutes"] == 22
    assert gh.comments_on(issue["number"]) == []


def test_capture_files_a_closed_agent_pr_without_checking_out_its_code(sim, gh, examples):
    payload = retarget(example(examples, "pull_request", "closed"))
    number = payload["pull_request"]["number"]
    gh.add_pull(number, head_sha=payload["pull_request"]["head"]["sha"], state="closed", user=AGENT,
                files=[{"filename": "README.md", "additions": 3, "deletions": 1}])
    result = sim.run("capture", "pull_request_target", payload, vars={"REPLAYBOOK_AGENT_LOGINS": f"bot {AGENT}"})
    job = only_job(result, "capture")
    assert job.result == "success", result.log()
    # The "pwn request" guard: the job reads the default branch, never the PR's head.
    assert checkout(job)["ref"] == "main" != payload["pull_request"]["head"]["ref"]
    assert checkout(job)["persist-credentials"] is False
    (issue,) = gh.issues
    assert issue["title"].startswith(f"Rejected agent PR #{number}:")
    assert f"<!-- replaybook:pr-{number}-closed -->" in issue["body"]

    # Without the variable no PR is the agent's: nothing is filed.
    gh.delete_issue(issue["number"])
    other = sim.run("capture", "pull_request_target", payload)
    assert other.jobs["capture"].result == "success" and gh.issues == []
    assert "agent_logins" in other.jobs["capture"].step("./actions/capture").stdout


# ------------------------------------------------------------------ distill


def test_capture_reaches_the_threshold_and_the_dispatched_distill_opens_a_rule_pr(sim_scenario, gh, examples):
    sim = sim_scenario
    sim.seed_main()
    book = AnswerBook().add("gh-1", json.dumps({"kind": "rule", "rule": RULE, "cites": ["gh-1", "gh-2"],
                                                "task_types": [], "scenario": {"existing": SCENARIO.name}}))
    book.add("", json.dumps(CAPTURED))
    with Gateway(book) as analyst:
        for run_id in (7, 8):
            gh.add_workflow_run(run_id, jobs=[{"name": "test", "conclusion": "failure"}], logs={"test": LOG})
            result = sim.run("capture", "workflow_run", failed_run(examples, run_id), model=analyst)
            assert only_job(result, "capture").result == "success", result.log()
        assert [i["number"] for i in gh.issues] == [1, 2]
        assert not any("Needs triage" in i["body"] for i in gh.issues)  # the analyst stated each belief delta
        # The second incident reached github.distill_threshold (2): capture dispatched distill, once.
        (dispatch,) = gh.dispatches
        assert dispatch == {"workflow": "replaybook-distill.yml", "ref": "main", "inputs": {"reason": "threshold"}}
        assert (sim.ws / ".github" / "workflows" / dispatch["workflow"]).is_file()

        # GitHub runs the dispatched workflow, as the App.
        result = sim.run("distill", "workflow_dispatch", {"inputs": dispatch["inputs"]}, model=analyst,
                         vars={"REPLAYBOOK_APP_ID": "12345"}, secrets={"REPLAYBOOK_APP_PRIVATE_KEY": "-----BEGIN"})
    job = only_job(result, "distill")
    assert job.result == "success", result.log()
    assert job.step("app").inputs["app-id"] == "12345"
    assert job.step("./actions/distill").inputs["bot-login"] == "replaybook[bot]"  # the App's PRs are the bot's
    distill = job.step("./actions/distill")
    assert distill.inputs["github-token"] == "app-token"  # the App's token, not the workflow's
    (pr,) = gh.pulls
    assert pr["head_ref"] == "replaybook/rule-0001" and pr["state"] == "open", distill.stdout
    assert "Closes #1" in pr["body"] and "Closes #2" in pr["body"]
    files = gh.branch_files("replaybook/rule-0001")
    assert "cites: [gh-1, gh-2]" in files["playbook/rules/rule-0001.yaml"]
    assert f"replay: scenarios/{SCENARIO.name}" in files["playbook/rules/rule-0001.yaml"]
    assert "rule-0001" in distill.stdout and job.errors == []


def test_distill_without_an_app_uses_the_workflow_token(sim, gh):
    sim.seed_main()
    result = sim.run("distill", "workflow_dispatch", {"inputs": {"reason": "threshold"}},
                     secrets={"GITHUB_TOKEN": "ghs_workflow"})
    job = only_job(result, "distill")
    assert job.step("app").kind == "skipped"
    assert job.step("./actions/distill").inputs["github-token"] == "ghs_workflow"
    assert job.step("./actions/distill").inputs["bot-login"] == ""  # github-actions[bot], the default
    # Without the ANTHROPIC_API_KEY secret the required input is empty: the job fails and says what is missing.
    assert job.result == "failure", result.log()
    assert "distill needs a model" in job.step("./actions/distill").stdout
    assert any("replaybook github handle exited 1" in e for e in job.errors)
    assert gh.pulls == []


def test_a_push_that_leaves_the_playbook_stale_gets_the_maintenance_pr(tmp_path, gh, examples):
    sim = Sim(make_workspace(tmp_path / "ws", scenario=True), gh, tmp_path)
    write(sim.ws / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001", cites=("gh-1", "gh-2"), text=RULE))
    after = commit_all(sim.ws, "Merge the rule PR")  # PLAYBOOK.md is not re-rendered: a rule PR never touches it
    sim.seed_main()
    payload = retarget(example(examples, "push", ref="refs/heads/master"))  # a branch push with one commit
    (commit,) = payload["commits"]
    commit.update(id=after, added=["playbook/rules/rule-0001.yaml"], modified=[], removed=[])
    payload.update(ref="refs/heads/main", after=after, head_commit=commit)
    app = {"vars": {"REPLAYBOOK_APP_ID": "12345"}, "secrets": {"REPLAYBOOK_APP_PRIVATE_KEY": "-----BEGIN"}}
    result = sim.run("distill", "push", payload, **app)
    assert "paths filters ignored" in result.why  # actsim does not check `paths: [playbook/**]`
    job = only_job(result, "distill")
    assert job.result == "success", result.log()
    (pr,) = gh.pulls
    assert pr["head_ref"] == "replaybook/maintenance"
    assert "rule-0001" in gh.branch_files("replaybook/maintenance")["playbook/PLAYBOOK.md"]

    # The bot's own branches never start it.
    mine = sim.run("distill", "push", {**payload, "ref": "refs/heads/replaybook/rule-0002"}, **app)
    assert not mine.triggered and "branches-ignore" in mine.why


def test_distill_on_a_push_to_another_branch_runs_nothing(tmp_path, gh, examples):
    sim = Sim(make_workspace(tmp_path / "ws", scenario=True), gh, tmp_path)
    sim.seed_main()
    payload = retarget(example(examples, "push", ref="refs/heads/master"))
    (commit,) = payload["commits"]
    commit.update(added=["playbook/rules/rule-0001.yaml"], modified=[], removed=[])
    payload.update(ref="refs/heads/feature")  # a person's branch, not the default one
    result = sim.run("distill", "push", payload)
    assert result.triggered and result.jobs["distill"].result == "skipped", result.log()
    assert gh.pulls == [] and gh.writes() == []


# ------------------------------------------------------------------ admit

@pytest.fixture
def rule_pr(tmp_path, gh) -> tuple[Sim, str, str]:
    return make_rule_pr(tmp_path, gh)


def test_admit_replays_the_rule_and_the_required_job_passes_when_it_is_admitted(rule_pr, gh, examples):
    sim, base, head = rule_pr
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:  # the SIMULATED "real" model upstream
        result = sim.run("admit", "pull_request_target", pr_event(examples, head, base), model=model)
    job = only_job(result, "admit")
    assert job.result == "success", result.log()
    assert checkout(job, "head")["fetch-depth"] == 0 and checkout(job, "head")["ref"] == head  # the PR, as data
    assert not checkout(job, ".replaybook-gate").get("ref")  # the gate's code: the event's commit, the base's
    assert job.step("dispatched").kind == "skipped"
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("success", "replaybook/admit"), result.log()
    assert status["description"].startswith("admit: rule-0001 admit")
    (comment,) = gh.comments_on(PR_NUMBER)
    assert "Replaybook gate: admit `rule-0001`" in comment["body"]
    assert "Replaybook gate: admit `rule-0001`" in job.summary  # the report, in the job summary too


def hostile_rule_pr(rule_pr, **fields) -> tuple[Sim, str, str]:
    """The rule PR, with its scenario edited by the PR's author (``fields`` merged into scenario.yaml)."""
    import yaml

    sim, base, _ = rule_pr
    path = sim.ws / "scenarios" / SCENARIO.name / "scenario.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.update(fields)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    head = commit_all(sim.ws, "scenario: hostile")
    sim.gh.state.pulls[PR_NUMBER]["head_sha"] = head
    return sim, base, head


def posted(gh: FakeGitHub, head: str, job) -> str:
    return json.dumps([gh.statuses_for(head), gh.comments_on(PR_NUMBER)]) + job.summary + "".join(job.errors)


def test_admit_on_a_scenario_whose_setup_plants_fsmonitor_runs_none_of_it_on_the_runner(rule_pr, gh, examples,
                                                                                          tmp_path):
    marker = tmp_path / "pwned"
    hook = f"#!/bin/sh\necho ran >> {marker}\ncat /proc/$PPID/environ >> {marker} 2>/dev/null\nexit 1\n"
    write(rule_pr[0].ws / "scenarios" / SCENARIO.name / "repo" / "hook.sh", hook)
    sim, base, head = hostile_rule_pr(rule_pr, setup=[
        "chmod +x hook.sh",
        "bash -c 'mkdir sub && cd sub && git init -q && echo a > f && git add f && "
        "git -c user.name=a -c user.email=b commit -qm x && git config core.fsmonitor $PWD/../hook.sh && echo b > f'"])
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        result = sim.run("admit", "pull_request_target", pr_event(examples, head, base), model=model)
        job = only_job(result, "admit")
        assert not marker.exists(), "the scenario's fsmonitor ran on the runner, next to the secrets"
        assert model.token not in posted(gh, head, job) and "ghs_fake_workflow_token" not in posted(gh, head, job)


def test_admit_on_a_requirements_file_outside_the_scenario_posts_none_of_it(rule_pr, gh, examples):
    sim, base, head = hostile_rule_pr(rule_pr, requirements_file="/proc/self/environ", requirements=[])
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        result = sim.run("admit", "pull_request_target", pr_event(examples, head, base), model=model)
        job = only_job(result, "admit")
        (status,) = gh.statuses_for(head)
        assert status["state"] != "success", result.log()
        text = posted(gh, head, job)
        assert "requirements_file" in text, result.log()
        assert model.token not in text and "ghs_fake_workflow_token" not in text
        assert "PATH=" not in text and "HOME=" not in text  # nothing of the environment it named


def test_admit_never_passes_a_fork_pr_and_passes_a_pr_that_adds_no_rule(rule_pr, gh, examples):
    sim, base, head = rule_pr
    # A fork PR gets no secrets on GitHub: no model. The gate says so and the required job fails.
    fork = sim.run("admit", "pull_request_target", pr_event(examples, head, base, head_repo="mallory/app"))
    job = only_job(fork, "admit")
    assert job.result == "failure", fork.log()
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("error", "replaybook/admit")
    assert "replay could not run" in status["description"]
    assert any("the gate did not admit" in e for e in job.errors)
    # On GitHub a fork PR's token is also read-only (unless the repository sends write tokens to forks): the
    # status cannot even be set. The required job still fails, never passes.
    gh.fail_next(f"{gh.repo_path}/statuses", 403, method="POST", message="Resource not accessible by integration")
    read_only = sim.run("admit", "pull_request_target", pr_event(examples, head, base, head_repo="mallory/app"))
    job = only_job(read_only, "admit")
    assert job.result == "failure", read_only.log()
    assert len(gh.statuses_for(head)) == 1
    assert "could not run" in job.summary  # the report still reaches the job summary, written first

    # A PR from any other branch that adds the same rule is gated all the same: no model, so never success.
    git(sim.ws, "commit", "-q", "--allow-empty", "-m", "the same rule, another branch")
    same = git(sim.ws, "rev-parse", "HEAD")
    other = sim.run("admit", "pull_request_target", pr_event(examples, same, base, head_ref="changes"))
    assert only_job(other, "admit").result == "failure", other.log()
    assert [s["state"] for s in gh.statuses_for(same)] == ["error"]

    # A PR that changes nothing an agent is told: the required job passes at once.
    git(sim.ws, "checkout", "-q", "main")
    git(sim.ws, "commit", "-q", "--allow-empty", "-m", "nothing an agent is told")
    nothing = git(sim.ws, "rev-parse", "HEAD")
    plain = sim.run("admit", "pull_request_target", pr_event(examples, nothing, base, head_ref="changes"))
    assert only_job(plain, "admit").result == "success", plain.log()
    (status,) = gh.statuses_for(nothing)
    assert (status["state"], status["description"]) == ("success", "no rule changed")


FORGED = """name: replaybook-admit
on: [pull_request, pull_request_target]
jobs:
  admit:
    runs-on: ubuntu-latest
    steps:
      - run: echo FORGED-PASS
"""


def test_admit_judges_with_the_base_definition_however_the_pr_edits_the_workflow_or_the_action(rule_pr, gh, examples):
    """A same-repository PR rewrites the admit workflow and the gate's action to pass without a replay: the run is
    still the base's workflow and the base's action, so the gate still replays (here it cannot: no model key)."""
    sim, base, _ = rule_pr
    write(sim.ws / ".github" / "workflows" / "replaybook-admit.yml", FORGED)
    write(sim.ws / "actions" / "admit" / "action.yml",
          "name: forged\nruns:\n  using: composite\n  steps:\n    - shell: bash\n      run: echo FORGED-PASS\n")
    head = commit_all(sim.ws, "make the gate pass")
    sim.gh.state.pulls[PR_NUMBER]["head_sha"] = head
    result = sim.run("admit", "pull_request_target", pr_event(examples, head, base))
    job = only_job(result, "admit")
    assert "FORGED-PASS" not in result.log()
    assert job.result == "failure", result.log()  # the base's gate: a rule to replay and no model, never success
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("error", "replaybook/admit"), result.log()
    assert (sim.ws / ".replaybook-gate" / "actions" / "admit" / "action.yml").read_text() != \
        (sim.ws / "actions" / "admit" / "action.yml").read_text()  # the action that ran is the base's


def test_admit_gives_a_fork_pr_neither_the_model_key_nor_an_app_token(rule_pr, gh, examples):
    sim, base, head = rule_pr
    result = sim.run("admit", "pull_request_target", pr_event(examples, head, base, head_repo="mallory/app"),
                     secrets={"ANTHROPIC_API_KEY": "sk-never-for-forks", "REPLAYBOOK_APP_PRIVATE_KEY": "pem"},
                     vars={"REPLAYBOOK_APP_ID": "904213"})
    job = only_job(result, "admit")
    assert job.step("app").kind == "skipped", result.log()
    gate = next(s for s in job.steps if s.name.endswith("/actions/admit"))
    assert gate.inputs["anthropic-api-key"] == "" and not gate.inputs["app-token"], gate.inputs
    (status,) = gh.statuses_for(head)
    assert status["state"] == "error" and "replay could not run" in status["description"]


def test_admit_gates_a_merge_group(rule_pr, gh, examples):
    sim, base, head = rule_pr  # the merge queue's commit: the rule on top of main
    payload = retarget(example(examples, "merge_group", "checks_requested"))
    payload["merge_group"].update(head_sha=head, base_sha=base, base_ref="refs/heads/main",
                                  head_ref=f"refs/heads/gh-readonly-queue/main/pr-{PR_NUMBER}-{base}")
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        result = sim.run("admit", "merge_group", payload, model=model)
    job = only_job(result, "admit")
    assert job.result == "success", result.log()
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("success", "replaybook/admit")
    assert status["description"].startswith("admit: rule-0001 admit")  # replayed, not "no rule file changed"
    assert gh.comments_on(PR_NUMBER) != []  # the queued PR, found from the merge group's branch name


def test_admit_dispatched_by_hand_gates_the_pr_head(rule_pr, gh, examples):
    sim, base, head = rule_pr
    git(sim.ws, "checkout", "-q", "main")  # a dispatch runs on the default branch; checkout moves to the PR head
    payload = retarget(example(examples, "workflow_dispatch"))
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        result = sim.run("admit", "workflow_dispatch", payload, inputs={"pr": PR_NUMBER}, model=model,
                         shims={"gh": gh_shim()})
    job = only_job(result, "admit")
    assert job.result == "success", result.log()
    assert job.step("dispatched").outputs["head-sha"] == head
    assert checkout(job, "head")["ref"] == head and git(sim.ws / "head", "rev-parse", "HEAD") == head
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("success", "replaybook/admit"), result.log()
    assert status["description"].startswith("admit: rule-0001 admit")  # replayed, not "no rule file changed"


def test_admit_dispatched_with_an_agent_and_trials_re_gates_with_them(rule_pr, gh, examples):
    """`/replaybook replay --agent builtin --trials 2` dispatches these inputs: the gate replays at most 2 trials."""
    sim, base, head = rule_pr
    git(sim.ws, "checkout", "-q", "main")
    payload = retarget(example(examples, "workflow_dispatch"))
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        result = sim.run("admit", "workflow_dispatch", payload, model=model, shims={"gh": gh_shim()},
                         inputs={"pr": PR_NUMBER, "agent": "builtin", "trials": "2"})
    job = only_job(result, "admit")
    assert job.result == "success", result.log()
    assert (job.step("dispatched").outputs["agent"], job.step("dispatched").outputs["trials"]) == ("builtin", "2")
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("success", "replaybook/admit"), result.log()
    [comment] = gh.comments_on(PR_NUMBER)
    # the model is real to the bot, so the default `gate.own_test: auto` gates in pairs: the trials arrive and
    # the comment says they do not apply to that test
    assert ("Re-gated as asked: agent ` builtin `, the paired test (`gate.own_test: auto`, for a real model)"
            in comment["body"]) and "`--trials 2` does not apply" in comment["body"]
    assert "before and after in pairs" in comment["body"]


@pytest.mark.parametrize("inputs, error", [
    ({"agent": "builtin\nx", "trials": ""}, "agent must name an agent"),
    ({"agent": "$(touch pwned)", "trials": ""}, "agent must name an agent"),
    ({"agent": "", "trials": "9"}, "trials must be from 1 to 5"),
    ({"agent": "", "trials": "1; touch pwned"}, "trials must be a whole number"),
    ({"agent": "", "trials": "05"}, "trials must be a whole number"),
])
def test_admit_dispatched_with_bad_options_stops_before_anything_runs(rule_pr, gh, examples, inputs, error):
    sim, base, head = rule_pr
    git(sim.ws, "checkout", "-q", "main")
    payload = retarget(example(examples, "workflow_dispatch"))
    result = sim.run("admit", "workflow_dispatch", payload, shims={"gh": gh_shim()},
                     inputs={"pr": PR_NUMBER, **inputs})
    job = only_job(result, "admit")
    assert job.result == "failure" and any(error in e for e in job.errors), result.log()
    assert job.step("dispatched").rc == 2
    assert gh.statuses_for(head) == [] and gh.comments_on(PR_NUMBER) == [] and gh.writes() == []
    assert not (sim.ws / "pwned").exists()


# ------------------------------------------------------------------ comment commands (the distill workflow's commands job)


def comment_event(examples, gh: FakeGitHub, body: str, *, user: str, number: int = PR_NUMBER) -> tuple[dict, dict]:
    """GitHub's example of a new comment, as ``user`` writing ``body`` on PR #``number``; (payload, comment)."""
    comment = gh.add_comment(number, body, user=user)
    payload = retarget(example(examples, "issue_comment", "created"))
    payload["issue"].update(number=number, state="open",
                            pull_request={"url": f"https://api.github.com/repos/{OWNER}/{NAME}/pulls/{number}"})
    payload["comment"].update(id=comment["id"], body=body)
    payload["comment"]["user"]["login"] = payload["sender"]["login"] = user
    return payload, comment


def command_replies(gh: FakeGitHub, comment: dict) -> list[dict]:
    from bot.github.command_run import reply_key
    from bot.github.port import marker

    return [c for c in gh.comments_on(comment["issue_number"]) if marker(reply_key(comment["id"])) in c["body"]]


def test_commands_job_a_maintainers_replay_dispatches_the_gate_which_re_gates_as_asked(rule_pr, gh, examples):
    sim, base, head = rule_pr
    gh.set_role("maint", "maintain")
    payload, comment = comment_event(examples, gh, "Once more, fewer trials:\n\n/replaybook replay --trials 2",
                                     user="maint")
    result = sim.run("distill", "issue_comment", payload)
    job = only_job(result, "commands")
    assert job.result == "success", result.log()
    assert result.jobs["distill"].result == "skipped"  # distill itself never runs on a comment
    assert checkout(job)["ref"] == "main" and git(sim.ws, "rev-parse", "HEAD") == base  # never the PR's code
    assert gh.dispatches == [{"workflow": "replaybook-admit.yml", "ref": "main",
                              "inputs": {"pr": str(PR_NUMBER), "trials": "2"}}]
    [reply] = command_replies(gh, comment)
    assert "`--trials 2` does not apply" in reply["body"]  # a real model: the default gates in pairs
    assert [r["content"] for r in gh.reactions(comment["id"])] == ["eyes"]

    # GitHub then starts the admit workflow with those inputs: it re-gates the PR's head with them.
    dispatch = retarget(example(examples, "workflow_dispatch"))
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        gate = sim.run("admit", "workflow_dispatch", dispatch, inputs=gh.dispatches[0]["inputs"], model=model,
                       shims={"gh": gh_shim()})
    assert only_job(gate, "admit").result == "success", gate.log()
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("success", "replaybook/admit")
    gate_comment = next(c for c in gh.comments_on(PR_NUMBER) if "replaybook:gate" in c["body"])
    assert "`--trials 2` does not apply" in gate_comment["body"] and "before and after in pairs" in gate_comment["body"]


def test_commands_job_a_read_only_users_replay_gets_one_reply_and_runs_nothing(rule_pr, gh, examples):
    sim, base, head = rule_pr
    gh.set_role("reader", "read")
    payload, comment = comment_event(examples, gh, "/replaybook replay", user="reader")
    for _ in range(2):  # delivered, then the job re-run
        result = sim.run("distill", "issue_comment", payload)
        assert only_job(result, "commands").result == "success", result.log()
    assert gh.dispatches == [] and gh.statuses_for(head) == []
    [reply] = command_replies(gh, comment)
    assert "only people with write permission" in reply["body"]
    assert gh.reactions(comment["id"]) == []  # no "handled" mark for someone not allowed


def test_commands_job_reads_a_comment_without_a_command_and_calls_nothing(sim, gh, examples):
    gh.add_pull(PR_NUMBER)
    payload, _ = comment_event(examples, gh, "LGTM, but `/replaybook replay` would be nice", user="maint")
    gh.reset_calls()
    result = sim.run("distill", "issue_comment", payload)
    job = only_job(result, "commands")
    assert job.result == "success" and job.step("look").outputs.get("found") is None, result.log()
    assert gh.calls == 0 and gh.dispatches == []


def replay_again(examples, head: str, base: str, *, name: str = "replaybook/admit") -> dict:
    """GitHub's example of a check run's requested action, as "Replay again" on the gate's check run of the PR."""
    payload = retarget(example(examples, "check_run", "requested_action"))
    payload["check_run"].update(name=name, head_sha=head)
    payload["requested_action"]["identifier"] = "replay"
    (pr,) = payload["check_run"]["pull_requests"]
    pr["number"] = PR_NUMBER
    pr["head"].update(ref="replaybook/rule-0001", sha=head)
    pr["base"].update(ref="main", sha=base)
    return payload


def test_replay_again_as_the_app_gates_the_pr_head_into_a_new_check_run(rule_pr, gh, examples):
    sim, base, head = rule_pr
    git(sim.ws, "checkout", "-q", "main")  # a check_run event runs on the default branch; checkout moves to the PR
    app = {"vars": {"REPLAYBOOK_APP_ID": "12345"}, "secrets": {"REPLAYBOOK_APP_PRIVATE_KEY": "a key"}}
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        result = sim.run("admit", "check_run", replay_again(examples, head, base), model=model,
                         shims={"gh": gh_shim()}, **app)
    job = only_job(result, "admit")
    assert job.result == "success", result.log()
    assert checkout(job, "head")["ref"] == head and git(sim.ws / "head", "rev-parse", "HEAD") == head
    (run,) = check_runs_for(gh, head)
    assert (run["name"], run["conclusion"]) == ("replaybook/admit", "success"), result.log()
    assert "Replaybook gate: admit `rule-0001`" in run["output"]["summary"]
    assert gh.statuses_for(head) == []  # the App's check run, not the status


def test_a_fork_pr_in_a_repository_with_the_app_still_gets_the_gate_s_error_never_success(rule_pr, gh, examples):
    sim, base, head = rule_pr
    # The App is configured (a variable forks can read), but a fork's run gets no secret: no key, no App token.
    result = sim.run("admit", "pull_request_target", pr_event(examples, head, base, head_repo="mallory/app"),
                     vars={"REPLAYBOOK_APP_ID": "12345"})
    job = only_job(result, "admit")
    assert job.result == "failure", result.log()
    assert job.step("app").outcome == "skipped"  # a fork's run does not try to mint: the gate uses the workflow's token
    (status,) = gh.statuses_for(head)
    assert (status["state"], status["context"]) == ("error", "replaybook/admit")
    assert check_runs_for(gh, head) == []


def test_another_check_runs_button_starts_no_gate(rule_pr, gh, examples):
    sim, base, head = rule_pr
    result = sim.run("admit", "check_run", replay_again(examples, head, base, name="lint"), shims={"gh": gh_shim()})
    assert result.triggered and result.jobs["admit"].result == "skipped", result.log()
    assert check_runs_for(gh, head) == [] and gh.statuses_for(head) == []


# ------------------------------------------------------------------ replay


@pytest.mark.parametrize("rule, passed", [("playbook/proposed/rule-0001.yaml", True), ("", False)],
                         ids=["with-the-rule", "empty-playbook"])
def test_replay_fans_out_one_leg_per_scenario_and_reports_once(tmp_path, gh, examples, rule, passed):
    ws = make_workspace(tmp_path / "ws", scenario=True)
    write(ws / "playbook" / "proposed" / "rule-0001.yaml", rule_yaml("rule-0001", text=RULE))
    commit_all(ws, "a candidate rule")
    sim = Sim(ws, gh, tmp_path)
    payload = retarget(example(examples, "workflow_dispatch"))
    inputs = {"scenario": "", "rule": rule, "model": "scripted", "trials": 1}  # scenario "": every scenario
    result = sim.run("replay", "workflow_dispatch", payload, inputs=inputs)
    verdict = "success" if passed else "failure"
    # The report runs whether or not a leg failed, and its step (the suite's check) fails with it.
    assert {k: j.result for k, j in result.jobs.items()} == {
        "list": "success", f"replay ({SCENARIO.name})": verdict, "report": verdict}, result.log()
    assert result.jobs["list"].outputs == {"scenarios": f'["{SCENARIO.name}"]'}
    (leg,) = result.legs("replay")
    assert leg.name == f"replay {SCENARIO.name}" and leg.matrix == {"scenario": SCENARIO.name}
    (artifact,) = result.artifacts.values()  # uploaded even by a failed leg (if: always())
    assert list(artifact) == [f"{SCENARIO.name}.json"]
    summary = result.jobs["report"].summary
    assert sum(line.startswith("|---") for line in summary.splitlines()) == 1, summary  # one table
    (row,) = [line for line in summary.splitlines() if line.startswith(f"| {SCENARIO.name} |")]
    assert row.startswith(f"| {SCENARIO.name} | {'passed' if passed else 'failed'} | {1 if passed else 0}/1 |"), row
    assert gh.calls == 0  # a replay never talks to GitHub


def test_replay_of_an_unknown_scenario_fails_before_fanning_out(sim, gh, examples):
    result = sim.run("replay", "workflow_dispatch", retarget(example(examples, "workflow_dispatch")),
                     inputs={"scenario": "no-such-scenario"})
    assert {k: j.result for k, j in result.jobs.items()} == {"list": "failure", "replay": "skipped",
                                                             "report": "skipped"}, result.log()


def test_admit_dispatched_for_a_fork_pr_refuses_before_checking_anything_out(rule_pr, gh, examples):
    sim, _, head = rule_pr
    result = sim.run("admit", "workflow_dispatch", retarget(example(examples, "workflow_dispatch")),
                     inputs={"pr": PR_NUMBER}, secrets={"ANTHROPIC_API_KEY": "sk-never-used"},
                     shims={"gh": gh_shim(fork=True)})
    job = only_job(result, "admit")
    assert job.result == "failure", result.log()
    # no App token (vars unset), then the refusal: no checkout (the PR's nor the gate's), no replay with secrets
    assert [s.kind for s in job.steps] == ["skipped", "run", "skipped", "skipped", "skipped"]
    assert any(f"PR #{PR_NUMBER} comes from a fork" in e for e in job.errors)
    assert gh.statuses_for(head) == []


# ------------------------------------------------------------------ doctor (issue 30)

DOCTOR_WORKFLOW = """\
name: replaybook-doctor
on:
  workflow_dispatch:
permissions: {}
jobs:
  doctor:
    runs-on: ubuntu-latest
    permissions:
      contents: read
    env:
      REPLAYBOOK_ACTIONS_SHA: 0123456789abcdef0123456789abcdef01234567  # the release the workflows pin (a test's)
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          persist-credentials: false
      - uses: ./actions/replay
        with:
          mode: doctor
          app-id: ${{ vars.REPLAYBOOK_APP_ID }}
"""


def doctor_sim(tmp_path, gh) -> Sim:
    """A workspace whose Replaybook workflows are what `replaybook init` writes (pinned to a release), with the
    documented doctor job (docs/github.md, "replaybook doctor") running the replay action in `mode: doctor`."""
    from bot.github import init as init_mod

    ws = make_workspace(tmp_path / "ws")
    for rel in init_mod.WORKFLOWS.values():
        (ws / rel).unlink()
    init_mod.apply(init_mod.plan(ws, actions_sha="0123456789abcdef0123456789abcdef01234567"))
    write(ws / ".github" / "workflows" / "replaybook-doctor.yml", DOCTOR_WORKFLOW)
    commit_all(ws, "init")
    return Sim(ws, gh, tmp_path)


def test_the_doctor_step_checks_the_set_up_on_the_runner_into_the_step_summary(tmp_path, gh):
    from fakes.github import setup

    sim = doctor_sim(tmp_path, gh)
    repo = setup(gh)
    repo.add_ruleset("main", required=[("replaybook/admit", 904213)])  # pinned to the App
    repo.secrets += ["ANTHROPIC_API_KEY"]
    repo.add_environment("replaybook-gate", policy=["main"], secrets=["REPLAYBOOK_APP_PRIVATE_KEY"])
    result = sim.run("doctor", "workflow_dispatch", {"inputs": {}}, vars={"REPLAYBOOK_APP_ID": "904213"},
                     secrets={"GITHUB_TOKEN": "ghs_workflow"})
    job = only_job(result, "doctor")
    assert job.result == "success", result.log()
    assert "| required check | ok: `replaybook/admit` is required on main" in job.summary
    assert "| sandbox | ok:" in job.summary
    assert "vars.REPLAYBOOK_APP_ID is set" in job.summary  # given by the step, as the token may not list variables
    # A workflow's GITHUB_TOKEN may not list secrets: cannot tell, never a failure.
    gh.fail_next("/repos/octo/app/actions/secrets", 403, message="Resource not accessible by integration")
    repo.rulesets.clear()
    result = sim.run("doctor", "workflow_dispatch", {"inputs": {}}, vars={"REPLAYBOOK_APP_ID": "904213"},
                     secrets={"GITHUB_TOKEN": "ghs_workflow"})
    job = only_job(result, "doctor")
    assert job.result == "failure", result.log()
    assert "| required check | **fail**:" in job.summary and "unknown: cannot tell" in job.summary
    assert any("the set-up has findings" in e for e in job.errors)



STEAL = """\
name: innocent-ci
on: pull_request
jobs:
  plain:
    runs-on: ubuntu-latest
    steps:
      - run: echo "key=[${{ secrets.REPLAYBOOK_APP_PRIVATE_KEY }}]"
  in-env:
    runs-on: ubuntu-latest
    environment: replaybook-gate
    steps:
      - run: echo "key=[${{ secrets.REPLAYBOOK_APP_PRIVATE_KEY }}]"
"""
KEY = "the-app-key"
GATE_ENV = {"replaybook-gate": {"branches": ["main", "gh-readonly-queue/main/*"],
                                "secrets": {"REPLAYBOOK_APP_PRIVATE_KEY": KEY}}}


def test_a_pull_request_workflow_a_pr_adds_cannot_read_the_app_key_the_base_gate_can(rule_pr, gh, examples, tmp_path):
    """The App's key as a repository secret: a workflow the PR adds on `pull_request` reads it (the attack, shown
    to work). As the environment's secret (default branch only): that workflow reads nothing, its job naming the
    environment is refused, and the admit job on `pull_request_target` (the base branch) still gets the key."""
    sim, base, head = rule_pr
    steal = tmp_path / "steal.yml"
    steal.write_text(STEAL)

    def leaked(**kw) -> dict[str, str]:
        result = run_workflow(steal, "pull_request", pr_event(examples, head, base), workspace=sim.ws,
                              repository=f"{OWNER}/{NAME}", api_url=gh.url, **kw)
        return {jid: (job.refused or "".join(s.stdout for s in job.steps)) for jid, job in result.jobs.items()}

    before = leaked(secrets={"REPLAYBOOK_APP_PRIVATE_KEY": KEY})  # the layout before: a repository secret
    assert before == {"plain": f"key=[{KEY}]\n", "in-env": f"key=[{KEY}]\n"}
    after = leaked(environments=GATE_ENV)
    assert after["plain"] == "key=[]\n"
    assert "is not allowed to deploy to replaybook-gate" in after["in-env"]
    assert KEY not in str(after)
    result = sim.run("admit", "pull_request_target", pr_event(examples, head, base), vars={"REPLAYBOOK_APP_ID": "12345"},
                     environments=GATE_ENV)
    job = only_job(result, "admit")
    assert not job.refused and job.step("app").inputs["private-key"] == KEY, result.log()
