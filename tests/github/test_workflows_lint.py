"""The workflows and composite actions we ship, and the ones `replaybook init` writes, pass zizmor and actionlint.

Both linters come with the test extra. A missing linter fails these tests
rather than skipping them: CI installs the extra, so a skip would hide a gap.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from bot.github import init as init_mod

WORKFLOWS = REPO / ".github" / "workflows"
ACTIONS = REPO / "actions"
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed; pip install '.[test]' (it is in the test extra)"
    return found


def zizmor(*paths: Path, no_ignores: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_CONFIG")}
    flags = ["--no-ignores"] if no_ignores else []
    return subprocess.run([_tool("zizmor"), "--offline", "--no-progress", *flags, *map(str, paths)],
                          capture_output=True, text=True, env=env, timeout=120)


def actionlint(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_tool("actionlint"), "-no-color", *map(str, files)], capture_output=True, text=True,
                          timeout=120)


def _clean(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stdout + done.stderr


def test_shipped_workflows_and_actions_pass_zizmor():
    done = zizmor(WORKFLOWS, ACTIONS)
    _clean(done)
    assert "No findings to report" in done.stdout + done.stderr


def test_shipped_workflows_pass_actionlint():
    _clean(actionlint(*sorted(WORKFLOWS.glob("*.yml"))))


@pytest.mark.parametrize("local_actions", [False, True])
def test_what_init_writes_passes_both_linters(tmp_path, local_actions):
    plan = init_mod.apply(init_mod.plan(tmp_path, local_actions=local_actions, actions_sha="0" * 40))
    assert not plan.needs_work or all(f.state == "missing" for f in plan.needs_work)
    files = sorted((tmp_path / ".github" / "workflows").glob("*.yml"))
    assert [f.name for f in files] == sorted(Path(p).name for p in init_mod.WORKFLOWS.values())
    if local_actions:  # `uses: ./actions/NAME` needs the actions beside the workflows (the gate's: the base's copy)
        shutil.copytree(ACTIONS, tmp_path / "actions")
        shutil.copytree(ACTIONS, tmp_path / init_mod.GATE_CHECKOUT / "actions")
    done = zizmor(tmp_path / ".github" / "workflows")
    _clean(done)
    _clean(actionlint(*files))
    if not local_actions:
        # With every finding shown (--no-ignores), what a user gets holds no suppressed finding but the
        # triggers capture exists for (workflow_run, pull_request_target) and the comment commands' issue_comment,
        # which check out no PR code, and the gate's pull_request_target, which runs the base's definition and
        # reads the PR's head only as data (docs/github.md, "The definition that judges comes from the base").
        shown = zizmor(tmp_path / ".github" / "workflows", no_ignores=True)
        audits = re.findall(r"(?:error|warning|help|info)\[([a-z-]+)\]", shown.stdout + shown.stderr)
        assert audits == ["dangerous-triggers"] * 4, shown.stdout + shown.stderr
        assert "unpinned-uses" not in shown.stdout + shown.stderr


ORG_CONFIG = ("org_tier:\n  members:\n    api: {repo: acme/api, ref: " + "a" * 40 + "}\n"
              "    web: {repo: acme/web, ref: " + "b" * 40 + "}\n    local: {path: ../local}\n")


def _linted_org_workflow(tmp_path: Path, workflow: str, local_actions: bool) -> dict:
    """``init`` in an org repository; ``workflow`` must pass zizmor and actionlint; its parsed YAML."""
    (tmp_path / ".replaybook.yml").write_text(ORG_CONFIG, encoding="utf-8")
    init_mod.apply(init_mod.plan(tmp_path, local_actions=local_actions, actions_sha="0" * 40))
    path = tmp_path / workflow
    if local_actions:
        shutil.copytree(ACTIONS, tmp_path / "actions")
    _clean(zizmor(path))
    _clean(actionlint(path))
    return _load(path)


@pytest.mark.parametrize("local_actions", [False, True])
def test_the_org_repositorys_gate_workflow_passes_both_linters_and_fans_out_read_only(tmp_path, local_actions):
    doc = _linted_org_workflow(tmp_path, init_mod.ORG_WORKFLOW, local_actions)
    assert doc["permissions"] == {} and set(doc["jobs"]) == {"plan", "member", "org-admit"}
    assert all(job["permissions"] == {"contents": read} for job in doc["jobs"].values()
               for read in ["read"])  # the members' code is read, nothing is written
    member = doc["jobs"]["member"]
    assert member["strategy"]["matrix"]["member"] == ["api", "web"]  # a path member cannot be checked out there
    checkouts = [s["with"] for s in member["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert [(c.get("repository"), c.get("ref"), c.get("path")) for c in checkouts if c.get("repository")] == [
        ("acme/api", "a" * 40, "members/api"), ("acme/web", "b" * 40, "members/web")]
    assert all(c["persist-credentials"] is False for c in checkouts)
    assert doc["jobs"]["org-admit"]["needs"] == ["plan", "member"]
    # The definition that judges comes from the base (issue 47): the PR's head is data, the action the base's.
    assert list(doc["on"]) == ["pull_request_target"]
    for job in doc["jobs"].values():
        steps = job["steps"]
        heads = [s for s in steps if s.get("with", {}).get("ref") == "${{ github.event.pull_request.head.sha }}"]
        # the org repository's PR, checked out as data into a folder of its own, which every gate step reads
        assert len(heads) == 1 and heads[0]["with"]["path"] == "head"
        gates = [s["uses"] for s in steps if "/actions/org" in s.get("uses", "")]
        assert all(s["with"]["working-directory"] == "head" for s in steps if "/actions/org" in s.get("uses", ""))
        assert gates and all(u.startswith("./.replaybook-gate/" if local_actions else "replaybook/") for u in gates), gates
        if local_actions:
            base = [s for s in steps if s.get("with", {}).get("path") == ".replaybook-gate"]
            assert len(base) == 1 and "ref" not in base[0]["with"]  # the event's commit: the base


@pytest.mark.parametrize("local_actions", [False, True])
def test_the_org_promotion_workflow_reads_members_and_opens_its_pr_as_the_app(tmp_path, local_actions):
    doc = _linted_org_workflow(tmp_path, init_mod.ORG_PROMOTE_WORKFLOW, local_actions)
    assert doc["permissions"] == {} and set(doc["jobs"]) == {"propose"}
    job = doc["jobs"]["propose"]
    assert job["permissions"] == {"contents": "read"}  # the PR is the App's write
    checkouts = [s["with"] for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert [(c.get("repository"), c.get("path")) for c in checkouts[1:]] == [("acme/api", "members/api"),
                                                                            ("acme/web", "members/web")]
    assert all(c["persist-credentials"] is False for c in checkouts)
    [propose] = [s for s in job["steps"] if s.get("with", {}).get("mode") == "propose"]
    assert propose["with"]["github-token"] == "${{ steps.app.outputs.token }}"  # never the workflow's own


def test_the_org_action_refuses_to_propose_without_a_token_or_two_members(tmp_path):
    env = {"PATH": os.environ["PATH"], "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(tmp_path / "s"),
           "GITHUB_OUTPUT": str(tmp_path / "o"), "MODE": "propose", "MEMBERS_DIR": str(tmp_path / "members"),
           "GITHUB_TOKEN": "", "RULES": "[]", "GITHUB_ACTION_PATH": str(ACTIONS / "org"), "GITHUB_WORKSPACE": str(tmp_path)}
    done = subprocess.run(["bash", str(ACTIONS / "org" / "org.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "github-token" in done.stdout
    (tmp_path / "members" / "api").mkdir(parents=True)
    done = subprocess.run(["bash", str(ACTIONS / "org" / "org.sh")], env={**env, "GITHUB_TOKEN": "t"},
                          capture_output=True, text=True)
    assert done.returncode == 2 and "two member" in done.stdout


def test_an_ordinary_repository_gets_no_org_workflow(tmp_path):
    init_mod.apply(init_mod.plan(tmp_path, actions_sha="0" * 40))
    assert not (tmp_path / init_mod.ORG_WORKFLOW).exists()
    assert not (tmp_path / init_mod.ORG_PROMOTE_WORKFLOW).exists()


def test_the_org_action_installs_from_its_own_source_and_checks_every_rule_file_name():
    doc = _load(ACTIONS / "org" / "action.yml")
    steps = doc["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@") and "install.sh" in steps[1]["run"]
    assert "sandbox.sh" in steps[2]["run"] and steps[2]["if"] == "inputs.mode == 'share'"
    script = (ACTIONS / "org" / "org.sh").read_text(encoding="utf-8")
    assert "pattern='^playbook/(rules|proposed)/rule-[0-9]{4,}\\.yaml$'" in script


@pytest.mark.parametrize("rules, runs", [
    ('["playbook/proposed/rule-0007.yaml"]', True),
    ('["../../etc/passwd"]', False),
    ('["playbook/rules/rule-0001.yaml; id"]', False),
    ('["playbook/rules/rule-0001.yaml\\n../x"]', False),
    ('{"a": 1}', False),
])
def test_the_org_action_passes_only_rule_file_names_to_replaybook(tmp_path, rules, runs):
    """The PR names the rule files: the action's script checks each before replaybook sees it."""
    fake = tmp_path / "replaybook-venv" / "bin" / "replaybook"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {tmp_path}/called\n", encoding="utf-8")
    fake.chmod(0o755)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "rule-0007.api.json").write_text("{}", encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(tmp_path / "out"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "MODE": "decide", "RULES": rules, "SHARES": "s",
           "GITHUB_ACTION_PATH": str(ACTIONS / "org"), "GITHUB_WORKSPACE": str(tmp_path)}
    done = subprocess.run(["bash", str(ACTIONS / "org" / "org.sh")], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=30)
    called = (tmp_path / "called").read_text() if (tmp_path / "called").exists() else ""
    if runs:
        assert done.returncode == 0, done.stdout + done.stderr
        root = tmp_path.resolve()  # the repository and the shares by absolute path: the step works elsewhere
        assert called == f"--root {root} org gate {root}/playbook/proposed/rule-0007.yaml --combine " \
                         f"{tmp_path}/s/rule-0007.api.json --report {tmp_path}/org-rule-0007.md\n"
    else:
        assert done.returncode != 0 and called == "", (done.stdout, called)


def test_the_linters_are_not_vacuous(tmp_path):
    """A known injection and a known type error are caught, so a clean run means something."""
    workflow = ("name: bad\non: {issues: {types: [opened]}}\npermissions: {}\njobs:\n  x:\n"
                "    runs-on: ubuntu-latest\n    permissions: {}\n    timeout-minutes: TIMEOUT\n    steps:\n"
                "      - run: echo \"${{ github.event.issue.title }}\"\n")
    injected = tmp_path / "injected.yml"
    injected.write_text(workflow.replace("TIMEOUT", "5"), encoding="utf-8")
    found = zizmor(injected)
    assert found.returncode != 0 and "template-injection" in found.stdout + found.stderr
    mistyped = tmp_path / "mistyped.yml"
    mistyped.write_text(workflow.replace("TIMEOUT", "abc"), encoding="utf-8")
    assert "timeout-minutes" in actionlint(mistyped).stdout


# ------------------------------------------------------------------ the rules zizmor does not spell out


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:  # PyYAML reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def _steps(doc: dict) -> list[dict]:
    if "runs" in doc:
        return doc["runs"]["steps"]
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


def _shipped() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml")) + sorted(ACTIONS.glob("*/action.yml"))


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_action_is_pinned_and_no_expression_reaches_a_script(path):
    doc = _load(path)
    for step in _steps(doc):
        uses = step.get("uses")
        if uses and not uses.startswith("./"):
            assert SHA_PIN.match(uses), f"{path.name}: {uses} is not pinned to a commit SHA"
        if uses and uses.startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, f"{path.name}: checkout persists credentials"
        assert "${{" not in step.get("run", ""), f"{path.name}: an expression inside run: (pass it through env:)"


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yml")), ids=lambda p: p.name)
def test_every_workflow_starts_from_no_permissions_and_grants_per_job(path):
    doc = _load(path)
    assert doc["permissions"] == {}, f"{path.name}: start from `permissions: {{}}`"
    for name, job in doc["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} grants no explicit permissions"
        assert "timeout-minutes" in job, f"{path.name}: job {name} has no timeout"
    if path.name.startswith("replaybook"):
        assert doc["name"].startswith("replaybook"), "the bot's own workflows are named replaybook* (never captured)"


def test_capture_never_checks_out_pr_code_and_never_drops_an_event():
    doc = _load(WORKFLOWS / "replaybook-capture.yml")
    assert doc["on"]["pull_request_target"] == {"types": ["closed"]}
    assert doc["on"]["workflow_run"]["types"] == ["completed"] and doc["on"]["workflow_run"]["workflows"]
    assert doc["on"]["issues"]["types"] == ["opened", "edited", "labeled"]
    assert doc["on"]["pull_request_review"]["types"] == ["submitted"]
    checkout = next(s for s in _steps(doc) if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    assert doc["concurrency"]["cancel-in-progress"] is False
    group = doc["concurrency"]["group"]
    for key in ("workflow_run.id", "workflow_run.run_attempt", "review.id", "pull_request.number", "issue.number"):
        assert key in group, f"the capture group is not keyed by {key}"
    perms = doc["jobs"]["capture"]["permissions"]
    assert perms == {"actions": "write", "contents": "read", "issues": "write", "pull-requests": "read"}


def test_admit_is_one_required_job_on_every_pr_and_merge_group():
    doc = _load(WORKFLOWS / "replaybook-admit.yml")
    on = doc["on"]
    # The base's definition judges: never `pull_request`, which runs a same-repository PR's own edited copy.
    assert on["pull_request_target"] == {"types": ["opened", "synchronize", "reopened"]}  # no paths filter
    assert "pull_request" not in on
    assert "merge_group" in on and "paths" not in str(on)
    assert on["workflow_dispatch"]["inputs"]["pr"]["required"] is True
    assert list(doc["jobs"]) == ["admit"]
    job = doc["jobs"]["admit"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write", "statuses": "write"}
    checkouts = [s["with"] for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    pr, gate = checkouts  # the PR's head, as data; the gate's own code, the base's
    assert pr["fetch-depth"] == 0 and "pull_request.head.sha" in pr["ref"]
    assert gate["path"] == init_mod.GATE_CHECKOUT and "ref" not in gate
    assert all(c["persist-credentials"] is False for c in checkouts)
    admit = next(s for s in job["steps"] if "actions/admit" in s.get("uses", ""))
    assert admit["uses"] == f"./{init_mod.GATE_CHECKOUT}/actions/admit"
    assert "head.repo.full_name == github.repository" in admit["with"]["anthropic-api-key"]  # never to a fork


def test_distill_runs_weekly_as_an_app_and_replay_fans_out():
    distill = _load(WORKFLOWS / "replaybook-distill.yml")
    assert distill["on"]["schedule"] and "workflow_dispatch" in distill["on"]
    # Capture dispatches it with `reason: threshold` (bot/github/distill.py): an unknown input would be a 422.
    assert set(distill["on"]["workflow_dispatch"]["inputs"]) == {"reason"}
    assert distill["on"]["push"]["paths"] == ["playbook/**"]
    assert "push" in distill["concurrency"]["group"] and distill["concurrency"]["cancel-in-progress"] is False
    steps = distill["jobs"]["distill"]["steps"]
    app = next(s for s in steps if s.get("uses", "").startswith("actions/create-github-app-token@"))
    assert app["with"]["app-id"] == "${{ vars.REPLAYBOOK_APP_ID }}"
    assert app["with"]["private-key"] == "${{ secrets.REPLAYBOOK_APP_PRIVATE_KEY }}"
    replay = _load(WORKFLOWS / "replaybook-replay.yml")
    assert set(replay["on"]["workflow_dispatch"]["inputs"]) == {"scenario", "rule", "agent", "model", "trials"}
    assert replay["jobs"]["replay"]["strategy"]["matrix"]["scenario"] == "${{ fromJSON(needs.list.outputs.scenarios) }}"
    assert replay["jobs"]["report"]["needs"] == ["list", "replay"]


@pytest.mark.parametrize("name", ["capture", "distill", "admit", "replay"])
def test_each_composite_action_installs_from_its_own_source_and_runs_one_command(name):
    doc = _load(ACTIONS / name / "action.yml")
    assert doc["runs"]["using"] == "composite"
    steps = doc["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    install = steps[1]
    assert install["env"]["ACTION_REF"] == "${{ github.action_ref }}"
    assert install["env"]["ACTION_REPO"] == "${{ github.action_repository }}"
    assert "install.sh" in install["run"]
    replays = name in ("admit", "replay")  # these two prepare the sandbox first (actions/sandbox.sh)
    if name == "admit":  # and the gate's twins by meaning before it, its page after it (issue 56)
        names = [s.get("name") for s in steps]
        assert names[2:5] == ["Restore the embedding model", "Install the embedding model (twins by meaning)",
                              "Prepare the replay sandbox (bubblewrap, socat, user namespaces)"]
        assert names[-3:] == ["Admit gate", "Write the gate's page", "Upload the gate's page"]
        assert all(s["if"].startswith("always()") for s in steps[-2:])
        assert steps[-1]["uses"] == "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02"
        assert steps[2]["uses"] == "actions/cache@5a3ec84eff668545956fd18022155c47e93e2684"
        return
    assert len(steps) == (4 if replays else 3)
    if replays:
        assert "sandbox.sh" in steps[2]["run"]



def test_admit_re_gates_only_on_its_own_replay_button_and_asks_checks_write_of_the_app_alone():
    doc = _load(WORKFLOWS / "replaybook-admit.yml")
    assert doc["on"]["check_run"] == {"types": ["requested_action"]}
    job = doc["jobs"]["admit"]
    assert "replaybook/admit" in job["if"] and "requested_action.identifier == 'replay'" in job["if"]
    assert "checks" not in job["permissions"]  # the workflow's token never makes the check run
    app = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/create-github-app-token@"))
    assert app["if"] == ("vars.REPLAYBOOK_APP_ID != '' && (github.event_name != 'pull_request_target' || "
                         "github.event.pull_request.head.repo.full_name == github.repository)")  # no fork gets it
    assert {k: v for k, v in app["with"].items() if k.startswith("permission-")} == {
        "permission-checks": "write", "permission-statuses": "write", "permission-pull-requests": "write",
        "permission-contents": "read"}
    admit = next(s for s in job["steps"] if "admit" in s.get("uses", "") and "with" in s
                 and "app-token" in s["with"])
    assert admit["with"]["app-token"] == "${{ steps.app.outputs.token }}"
    dispatched = next(s for s in job["steps"] if s.get("id") == "dispatched")
    assert "check_run" in dispatched["if"] and "check_run.pull_requests[0].number" in dispatched["env"]["PR_NUMBER"]


def test_comment_commands_run_with_least_privilege_and_never_read_the_comment_in_an_expression():
    path = WORKFLOWS / "replaybook-distill.yml"
    doc, text = _load(path), path.read_text(encoding="utf-8")
    assert doc["on"]["issue_comment"] == {"types": ["created"]}
    job = doc["jobs"]["commands"]
    assert job["if"] == "github.event_name == 'issue_comment'"
    assert "issue_comment" in doc["jobs"]["distill"]["if"]  # distill itself never runs on a comment
    assert job["permissions"] == {"actions": "write", "contents": "write", "issues": "write", "pull-requests": "write"}
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    handler = job["steps"][-1]
    assert handler["with"]["anthropic-api-key"] == ""  # no command asks the model: the key stays out of reach
    for expression in re.findall(r"\$\{\{(.*?)\}\}", text):
        assert "comment.body" not in expression and "issue.title" not in expression and "issue.body" not in expression
    assert "comment.id" in doc["concurrency"]["group"]  # one group per comment: a pending run is never cancelled

# -- a member pinned to an org repository (issue 31): its admit and distill jobs check the org tier out
# read-only, at the commit the base's committed .replaybook.yml pins, where the config reads it (docs/org.md)

MEMBER_REF = "c" * 40
MEMBER = f"org: {{repo: acme/playbook, ref: {MEMBER_REF}}}\n"


def _member_init(tmp_path, config: str, local_actions: bool = False):
    (tmp_path / ".replaybook.yml").write_text(config, encoding="utf-8")
    init_mod.apply(init_mod.plan(tmp_path, local_actions=local_actions, actions_sha="0" * 40))
    return {name: tmp_path / init_mod.WORKFLOWS[name] for name in ("admit", "distill")}


def _org_steps(path):
    steps = [s for job in _load(path)["jobs"].values() for s in job.get("steps", [])]
    read = [i for i, s in enumerate(steps) if s.get("id") == "org"]
    return steps, read


@pytest.mark.parametrize("local_actions", [False, True])
def test_a_members_admit_and_distill_check_out_the_tier_read_only_and_pass_both_linters(tmp_path, local_actions):
    paths = _member_init(tmp_path, MEMBER, local_actions)
    if local_actions:
        shutil.copytree(ACTIONS, tmp_path / "actions")
    for name, path in paths.items():
        _clean(zizmor(path))
        _clean(actionlint(path))
        steps, (i,) = _org_steps(path)
        checkout = steps[i + 1]
        assert checkout["uses"].startswith("actions/checkout@") and checkout["if"] == "steps.org.outputs.repo != ''"
        assert checkout["with"] == {
            "repository": "${{ steps.org.outputs.repo }}", "ref": "${{ steps.org.outputs.ref }}",
            # the admit job's repository is the PR's head, in head/ (the judge's seat); distill's is the workspace
            "path": ("head/" if name == "admit" else "") + ".replaybook/org/${{ steps.org.outputs.repo }}",
            "token": "${{ secrets.REPLAYBOOK_ORG_TOKEN || github.token }}", "persist-credentials": False}
        assert "${{" not in steps[i]["run"]
        first = next(j for j, s in enumerate(steps) if s.get("uses", "").startswith("actions/checkout@"))
        assert first < i, f"{name}: the repository's own checkout comes first (it would clean the tier away)"
        job = next(j for j in _load(path)["jobs"].values() if steps[i] in j.get("steps", []))
        assert job["permissions"].get("contents") in ("read", "write")
        assert "read" == job["permissions"]["contents"] or name == "distill"


def test_an_ordinary_repository_gets_no_org_checkout(tmp_path):
    for path in _member_init(tmp_path, "cap: 30\n").values():
        assert _org_steps(path)[1] == []


def _read_step(tmp_path, config: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, object]:
    """The step that reads the pin, run by bash in a folder holding ``config`` as its .replaybook.yml."""
    (tmp_path / "init").mkdir(exist_ok=True)
    steps, (i,) = _org_steps(_member_init(tmp_path / "init", MEMBER)["admit"])
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / ".replaybook.yml").write_text(config, encoding="utf-8")
    out = tmp_path / "out"
    out.write_text("")
    temp = tmp_path / "runner-temp"
    temp.mkdir(exist_ok=True)
    # as on the runner: the step works in RUNNER_TEMP and reads the repository (HEAD_DIR) by absolute path
    return subprocess.run(["bash", "-e", "-c", steps[i]["run"]], cwd=temp, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(out), "RUNNER_TEMP": str(temp),
                               "HEAD_DIR": str(work), **(env or {})}), out


def test_the_pin_is_read_from_the_committed_config_and_passed_on(tmp_path):
    done, out = _read_step(tmp_path, MEMBER)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == f"repo=acme/playbook\nref={MEMBER_REF}\n"


def test_on_a_pr_the_pin_is_the_base_commits_never_the_prs(tmp_path):
    from support.github import git

    work = tmp_path / "work"
    work.mkdir()
    (work / ".replaybook.yml").write_text(MEMBER, encoding="utf-8")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    base = git(work, "rev-parse", "HEAD")
    moved = MEMBER.replace("acme/playbook", "mallory/tier").replace(MEMBER_REF, "e" * 40)
    done, out = _read_step(tmp_path, moved, {"BASE_SHA": base})  # the PR's head moves the pin
    assert done.returncode == 0, done.stderr
    assert out.read_text() == f"repo=acme/playbook\nref={MEMBER_REF}\n"
    done, out = _read_step(tmp_path, moved, {"BASE_SHA": "$(touch pwned)"})
    assert done.returncode == 2 and out.read_text() == "" and not (work / "pwned").exists()


@pytest.mark.parametrize("config", [
    f"org: {{repo: '../..', ref: {MEMBER_REF}}}\n",
    f"org: {{repo: 'acme/..', ref: {MEMBER_REF}}}\n",
    f"org: {{repo: 'acme/x$(touch pwned)', ref: {MEMBER_REF}}}\n",
    f"org: {{repo: \"acme/x\\nref={'d' * 40}\", ref: {MEMBER_REF}}}\n",
    "org: {repo: acme/playbook, ref: main}\n",
    "org: {repo: acme/playbook}\n",
], ids=["dotdot", "name-dotdot", "subshell", "newline", "branch", "no-ref"])
def test_a_pin_that_is_not_owner_name_at_a_commit_fails_the_step_and_passes_nothing_on(tmp_path, config):
    done, out = _read_step(tmp_path, config)
    assert done.returncode == 2 and "::error file=.replaybook.yml::" in done.stdout, (done.stdout, done.stderr)
    assert out.read_text() == "" and not (tmp_path / "work" / "pwned").exists()
