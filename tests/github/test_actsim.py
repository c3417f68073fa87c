"""The local GitHub Actions simulator (tests/actsim/), on small sample workflows in tests/data/actsim."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from actsim import (
    Evaluator,
    ExpressionError,
    check_expressions,
    evaluate,
    load_yaml,
    run_workflow,
    stub_python,
)
from fakes.github import FakeGitHub
from helpers import REPO, write

DATA = Path(__file__).parents[1] / "data" / "actsim"
ISSUE_OPENED = json.loads((Path(__file__).parents[1] / "data" / "webhooks" / "issues-opened-incident-form.json").read_text())


@pytest.fixture
def ws(tmp_path) -> Path:
    """A scratch checkout: the sample workflows and local actions."""
    return shutil.copytree(DATA, tmp_path / "ws")


def run(ws: Path, name: str, event: str = "workflow_dispatch", payload: dict | None = None, **kw):
    return run_workflow(ws / "workflows" / f"{name}.yml", event, payload or {}, workspace=ws, **kw)


def job_yaml(ws: Path, steps: str, *, head: str = "on: workflow_dispatch\n", job_extra: str = "") -> Path:
    """A one-job workflow around ``steps`` (YAML text indented for the steps list)."""
    return write(ws / "workflows" / "inline.yml", head + "jobs:\n  only:\n    runs-on: ubuntu-latest\n"
                 + job_extra + "    steps:\n" + steps)


# Triggers


@pytest.mark.parametrize("event, payload, triggered, why", [
    ("issues", {"action": "opened"}, True, "issues/opened matched"),
    ("issues", {"action": "closed"}, False, "'closed' is not in types ['opened', 'edited']"),
    ("pull_request", {"action": "opened", "pull_request": {"number": 1, "base": {"ref": "main"}}}, True, "matched"),
    ("pull_request", {"action": "labeled", "pull_request": {"number": 1, "base": {"ref": "main"}}}, False,
     "not in types ['opened', 'synchronize', 'reopened']"),
    ("pull_request", {"action": "opened", "pull_request": {"number": 1, "base": {"ref": "release/2.0"}}}, True, ""),
    ("pull_request", {"action": "opened", "pull_request": {"number": 1, "base": {"ref": "release/old/1"}}}, False,
     "does not match"),
    ("pull_request", {"action": "opened", "pull_request": {"number": 1, "base": {"ref": "feature"}}}, False, ""),
    ("push", {"ref": "refs/heads/main", "after": "d" * 40}, True, "push matched"),
    ("push", {"ref": "refs/heads/tmp/scratch"}, False, "branches-ignore"),
    ("push", {"ref": "refs/tags/v1.0"}, False, "only ['branches'] filters"),
    ("workflow_run", {"action": "completed", "workflow_run": {"name": "ci", "head_branch": "main"}}, True, ""),
    ("workflow_run", {"action": "completed", "workflow_run": {"name": "docs", "head_branch": "main"}}, False,
     "not in workflows ['ci']"),
    ("workflow_run", {"action": "requested", "workflow_run": {"name": "ci", "head_branch": "main"}}, False, "types"),
    ("schedule", {}, False, "event 'schedule' is not in on:"),
])
def test_trigger_matching(ws, event, payload, triggered, why):
    result = run(ws, "triggers", event, payload)
    assert (result.triggered, why in result.why) == (triggered, True), result.why
    if triggered:
        assert result.jobs["show"].result == "success", result.log()
        assert result.jobs["show"].steps[0].outputs["action"] == str(payload.get("action"))
    else:
        assert result.jobs == {}


def test_yaml_is_read_as_github_reads_it(tmp_path):
    doc = load_yaml(write(tmp_path / "w.yml", "on: push\nmatrix: [yes, no, on, off]\nflag: true\n"))
    assert doc == {"on": "push", "matrix": ["yes", "no", "on", "off"], "flag": True}


def test_dispatch_inputs_have_defaults_types_and_reach_the_payload(ws):
    result = run(ws, "triggers", payload={"inputs": {"level": "high"}})
    assert result.jobs["show"].steps[0].stdout.splitlines()[0] == "dry=true level=high event=high"
    with pytest.raises(ValueError, match="'extreme' is not one of"):
        run(ws, "triggers", inputs={"level": "extreme"})


# needs and if:


def test_needs_run_in_order_and_everything_succeeds(ws):
    result = run(ws, "needs")
    assert list(result.jobs) == ["build", "test", "deploy", "report", "on-failure", "after-report"]
    assert {k: j.result for k, j in result.jobs.items()} == {
        "build": "success", "test": "success", "deploy": "success", "report": "success",
        "on-failure": "skipped", "after-report": "success"}


def test_a_failed_need_skips_dependents_unless_their_if_says_otherwise(ws):
    result = run(ws, "needs", vars={"TEST_RC": "1"})
    assert {k: j.result for k, j in result.jobs.items()} == {
        "build": "success", "test": "failure", "deploy": "skipped", "report": "success",
        "on-failure": "success", "after-report": "skipped"}  # an ancestor (deploy) was skipped
    assert result.jobs["report"].steps[0].stdout == "test=failure deploy=skipped\n"
    assert result.conclusion == "failure"


# Expressions

CONTEXTS = {
    "github": {"event_name": "issues", "event": {"issue": {"number": 7, "title": "Crash on start",
                                                           "labels": [{"name": "Bug"}, {"name": "incident"}]}}},
    "env": {"EMPTY": "", "N": "3"},
    "steps": {"a": {"outputs": {"json": '{"x": [1, 2], "ok": true}'}, "outcome": "success"}},
}


@pytest.mark.parametrize("expression, value", [
    ("github.event_name == 'ISSUES'", True),  # strings compare case-insensitively
    ("'abc' != 'ABC'", False),
    ("contains(github.event.issue.labels.*.name, 'BUG')", True),  # an array: element equality
    ("contains(github.event.issue.labels.*.name, 'inc')", False),
    ("contains('Hello world', 'WORLD')", True),  # a string: substring
    ("startsWith(github.event.issue.title, 'crash')", True),
    ("endsWith('file.yml', '.YML')", True),
    ("fromJSON(steps.a.outputs.json).x[1]", 2),
    ("fromJSON(steps.a.outputs.json).ok == true", True),
    ("env.N == 3", True),  # mixed types compare as numbers
    ("env.N > 10", False),
    ("'' == 0", True),
    ("null == 0", True),
    ("env.MISSING == null", True),
    ("env.EMPTY || 'fallback'", "fallback"),  # && and || return an operand
    ("env.N && 'yes'", "yes"),
    ("!env.EMPTY", True),
    ("(1 < 2) && !(2 < 1)", True),
    ("1.5 == '1.5'", True),
    ("0x10 == 16", True),
    ("github.event['issue']['number'] >= 7", True),
    ("github.event.issue.missing.deeper", None),
    ("'it''s'", "it's"),
    ("format('{0}/{1} {{x}}', github.event.issue.number, 'b')", "7/b {x}"),
    ("join(github.event.issue.labels.*.name, ', ')", "Bug, incident"),
    ("toJSON(fromJSON('[1]'))", "[\n  1\n]"),
    ("steps.a.outcome == 'success'", True),
    ("#${{ github.event.issue.number }}: ${{ 1 == 1 }}", "#7: true"),  # a template
])
def test_expressions(expression, value):
    assert evaluate(expression, CONTEXTS) == value


@pytest.mark.parametrize("expression, error", [
    ("nosuch.thing", "unknown context 'nosuch'"),
    ("fromJson2('x')", "unknown function fromJson2()"),
    ("contains('a')", "takes 2..2 arguments"),
    ("1 ==", "unexpected"),
    ("success()", "only allowed in if"),
    ("fromJSON('{nope')", "not JSON"),
    ("matrix.os", "context 'matrix' is not available"),
])
def test_bad_expressions_fail_loudly(expression, error):
    with pytest.raises(ExpressionError, match=error.replace("(", r"\(").replace(")", r"\)")):
        evaluate(expression, CONTEXTS)


def test_if_conditions():
    ok = Evaluator(CONTEXTS, {"success": True, "failure": False, "always": True, "cancelled": False})
    failed = Evaluator(CONTEXTS, {"success": False, "failure": True, "always": True, "cancelled": False})
    assert ok.condition("github.event_name == 'issues'") and ok.condition("${{ env.N == 3 }}") and ok.condition(None)
    assert not failed.condition("github.event_name == 'issues'")  # an implicit success() &&
    assert failed.condition("failure() && env.N") and failed.condition("always()") and not failed.condition(None)
    with pytest.raises(ExpressionError, match="always true"):
        ok.condition("${{ env.N }} && ${{ env.EMPTY }}")


def test_hash_files(tmp_path):
    ev = Evaluator({}, None, tmp_path)
    assert ev.template("${{ hashFiles('**/*.lock') }}") == ""
    write(tmp_path / "a" / "x.lock", "1")
    first = ev.template("${{ hashFiles('**/*.lock') }}")
    write(tmp_path / "b.lock", "2")
    assert len(first) == 64 and ev.template("${{ hashFiles('**/*.lock') }}") not in ("", first)


def test_typos_in_strict_contexts_fail_the_run(ws):
    job_yaml(ws, "      - run: echo ${{ github.event_nmae }}\n")
    with pytest.raises(ExpressionError, match="github has no 'event_nmae'"):
        run(ws, "inline")
    job_yaml(ws, "      - run: echo ${{ inputs.levle }}\n", head="on:\n  workflow_dispatch:\n    inputs:\n      level: {}\n")
    with pytest.raises(ExpressionError, match="inputs has no 'levle'"):
        run(ws, "inline")


# Outputs, GITHUB_ENV, GITHUB_PATH, summaries


def test_outputs_env_path_and_summary(ws):
    result = run(ws, "outputs", "push", {"ref": "refs/heads/main", "after": "d" * 40})
    produce, consume = result.jobs["produce"], result.jobs["consume"]
    assert produce.result == consume.result == "success", result.log()
    assert produce.outputs == {"word": "hello-world", "notes": "line one\nline = two"}
    assert produce.step("two").stdout == "first\nsecond|a=b|hello-world|a=b|from-tool|"
    assert produce.summary == "### Produced\n- and more\n"
    assert consume.steps[0].stdout.split() == ["word=hello-world", "2"]


def test_steps_are_hermetic(ws, monkeypatch):
    monkeypatch.setenv("LEAKY", "from-the-test-process")
    job_yaml(ws, "      - run: env | sort\n      - run: cat \"$GITHUB_EVENT_PATH\"\n")
    payload = {"sender": {"login": "mona"}}
    job = run(ws, "inline", payload=payload, env={"GIVEN": "yes"}).jobs["only"]
    env = dict(line.split("=", 1) for line in job.steps[0].stdout.splitlines() if "=" in line)
    assert "LEAKY" not in env and env["GIVEN"] == "yes" and env["CI"] == env["GITHUB_ACTIONS"] == "true"
    assert json.loads(job.steps[1].stdout) == {**payload, "inputs": {}}  # dispatch inputs land in the payload
    assert env["HOME"].startswith(env["RUNNER_TEMP"].split("/jobs/")[0]) and env["GITHUB_ACTOR"] == "mona"
    assert env["GITHUB_API_URL"] == "http://127.0.0.1:9" and env["GITHUB_WORKSPACE"] == str(ws)


# Matrices


def test_static_matrix_with_include_and_exclude(ws):
    result = run(ws, "matrix")
    static = {k: j.steps[0].stdout.strip() for k, j in result.jobs.items() if k.startswith("static")}
    assert static == {
        "static (linux, 3.11, yes-please)": "leg=linux-3.11-yes-please index=0",
        "static (linux, 3.12, yes-please)": "leg=linux-3.12-yes-please index=1",
        "static (mac, 3.12)": "leg=mac-3.12- index=2",
        "static (windows, 3.13)": "leg=windows-3.13- index=3",
    }


def test_a_failing_leg_cancels_the_rest_unless_fail_fast_is_off(ws):
    path = ws / "workflows" / "matrix.yml"
    path.write_text(path.read_text().replace('echo "leg=', 'test "${{ matrix.os }}" != "${{ vars.FAIL_OS }}" && echo "leg='))
    result = run(ws, "matrix", vars={"FAIL_OS": "linux"})
    assert [j.result for j in result.legs("static")] == ["failure", "cancelled", "cancelled", "cancelled"]


def test_dynamic_matrix_and_a_fan_in_job(ws):
    result = run(ws, "matrix")
    assert [(j.name, j.result) for j in result.legs("build")] == [
        ("build alpha", "success"), ("build beta", "success"), ("build gamma", "success")]
    assert result.jobs["collect"].steps[0].stdout == "build=success last=gamma\n"

    result = run(ws, "matrix", vars={"BROKEN": "beta"})
    assert [j.result for j in result.legs("build")] == ["success", "failure", "success"]  # fail-fast: false
    assert result.jobs["collect"].steps[0].stdout == "build=failure last=gamma\n"


# Composite actions


def test_local_composite_action_with_inputs_outputs_and_a_nested_action(ws, tmp_path):
    log = tmp_path / "pip.log"
    result = run(ws, "composite", "issues", ISSUE_OPENED, shims={"pip": f'echo "$@" >> {log}'})
    job = result.jobs["greet"]
    assert job.result == "success", result.log()
    assert job.steps[0].inputs == {"persist-credentials": False}  # checkout: recorded, nothing done
    title = ISSUE_OPENED["issue"]["title"]
    greet = job.step("greet")
    assert greet.outputs == {"message": f"Hello, {title}", "loud": f"HELLO, {title.upper()}"}
    assert [s.id for s in greet.steps] == [None, "make", "shout"] and greet.steps[2].steps[0].id == "up"
    assert job.steps[2].stdout == f"got [Hello, {title}] [HELLO, {title.upper()}]\n"
    assert log.read_text() == "install replaybook @ git+https://github.com/octo/replaybook@main\n"


def test_composite_action_misuse_is_an_error(ws):
    job_yaml(ws, "      - uses: ./actions/greet\n        with:\n          whom: x\n")
    with pytest.raises(ValueError, match=r"unexpected inputs \['whom'\]"):
        run(ws, "inline")
    job_yaml(ws, "      - uses: ./actions/greet\n")
    with pytest.raises(ValueError, match="required input 'who' is missing"):
        run(ws, "inline")


def test_an_action_that_installs_us_into_a_venv_runs_the_code_under_test(ws, tmp_path):
    write(ws / "actions" / "install" / "action.yml", """
        name: install
        description: Installs Replaybook the way actions/install.sh does.
        runs:
          using: composite
          steps:
            - id: python
              uses: actions/setup-python@v5
              with:
                python-version: "3.11"
                update-environment: false
            - shell: bash
              env:
                PYTHON: ${{ steps.python.outputs.python-path }}
              run: |
                "$PYTHON" -m venv --clear "$RUNNER_TEMP/venv"
                "$RUNNER_TEMP/venv/bin/python" -m pip install --quiet "$GITHUB_WORKSPACE"
                test -x "$RUNNER_TEMP/venv/bin/replaybook"
                "$RUNNER_TEMP/venv/bin/python" -c 'import bot; print(bot.__file__)'
        """)
    job_yaml(ws, "      - uses: ./actions/install\n")
    python = stub_python(tmp_path / "py", tmp_path / "pip.log")
    job = run(ws, "inline", uses={"actions/setup-python": lambda w, ctx: {"python-path": str(python)}}).jobs["only"]
    assert job.result == "success", job.steps[0].stderr
    assert job.steps[0].stdout.strip().endswith("bot/__init__.py")  # the code under test
    assert (tmp_path / "pip.log").read_text() == f"pip install --quiet {ws}\n"


# Artifacts


def test_artifacts_go_from_one_job_to_the_next(ws):
    result = run(ws, "artifacts")
    assert {k: j.result for k, j in result.jobs.items()} == {"make": "success", "use": "success"}, result.log()
    assert result.artifacts == {"part-1": {"one.txt": b"one\n"},
                                "report": {"report.txt": b"report\n", "sub/deep.txt": b"deep\n"}}
    use = result.jobs["use"]
    assert use.steps[2].stdout == "report\ndeep\none\n"
    assert (use.step("missing").outcome, use.step("missing").conclusion) == ("failure", "success")
    assert use.errors == ["download-artifact: Artifact not found for name: nope"]


# Failures


def test_failing_steps_continue_on_error_and_timeouts(ws):
    started = time.monotonic()
    job = run(ws, "failing").jobs["fails"]
    assert job.result == "failure"
    outcomes = {s.id: (s.kind, s.outcome, s.conclusion) for s in job.steps}
    assert outcomes == {
        "soft": ("run", "failure", "success"), "after-soft": ("run", "success", "success"),
        "hard": ("run", "failure", "failure"), "not-run": ("skipped", "skipped", "skipped"),
        "on-failure": ("run", "success", "success"), "slow": ("run", "failure", "failure")}
    assert job.step("soft").rc == 3 and job.step("after-soft").stdout == "soft was failure/success\n"
    assert job.errors == ["soft failure", "hard failure"]
    assert "timed out" in job.step("slow").stderr and time.monotonic() - started < 200  # killed, not waited for: the step sleeps 300 s


@pytest.mark.parametrize("steps, job_extra, feature", [
    ("      - run: echo\n", "    container: node:20\n", "container"),
    ("      - uses: someone/thing@v1\n", "", "remote action 'someone/thing'"),
    ("      - uses: docker://alpine\n", "", "docker actions"),
    ("      - run: echo\n        shell: pwsh\n", "", "shell: pwsh"),
    ("      - run: echo '::set-output name=x::1'\n", "", "::set-output::"),
    ("      - run: echo\n", "    continue-on-error: true\n", "job-level continue-on-error"),
])
def test_unsupported_features_raise(ws, steps, job_extra, feature):
    job_yaml(ws, steps, job_extra=job_extra)
    with pytest.raises(NotImplementedError, match=feature.replace("(", r"\(")):
        run(ws, "inline")


def test_a_remote_action_can_be_simulated_by_a_callable(ws):
    seen = []

    def script(with_inputs, ctx):
        seen.append((with_inputs, ctx.github["event_name"], ctx.env["GITHUB_REPOSITORY"]))
        return {"result": 42}

    job_yaml(ws, "      - id: s\n        uses: actions/github-script@v7\n        with:\n          script: return 42\n"
                 "      - run: echo ${{ steps.s.outputs.result }}\n")
    job = run(ws, "inline", uses={"actions/github-script": script}).jobs["only"]
    assert seen == [({"script": "return 42"}, "workflow_dispatch", "octo/app")] and job.steps[1].stdout == "42\n"


def test_a_remote_reference_can_run_a_composite_action_from_a_folder(ws, tmp_path):
    log = tmp_path / "pip.log"
    job_yaml(ws, "      - uses: octo/replaybook/actions/greet@v1.2\n        with:\n          who: you\n")
    job = run(ws, "inline", uses={"octo/replaybook/actions/greet": ws / "actions" / "greet"},
              shims={"pip": f'echo "$@" >> {log}'}).jobs["only"]
    assert job.steps[0].outputs == {"message": "Hello, you", "loud": "HELLO, YOU"}
    assert log.read_text().endswith("@v1.2\n")  # github.action_ref


# Against the fake GitHub


def test_a_step_talks_to_the_fake_github(ws):
    payload = {**ISSUE_OPENED, "action": "labeled", "label": {"name": "incident"}}
    with FakeGitHub("octo", "app") as gh:
        result = run(ws, "api", "issues", payload, api_url=gh.url, secrets={"GITHUB_TOKEN": "ghs_test"})
        job = result.jobs["file"]
        assert job.result == "success", result.log()
        [issue] = gh.issues
        assert issue["title"] == "Follow-up: " + ISSUE_OPENED["issue"]["title"]
        assert issue["body"] == "From #123" and issue["labels"] == ["follow-up"]
        assert [c["body"] for c in gh.comments_on(issue["number"])] == ["filed a follow-up"]
        assert job.summary == f"Opened #{issue['number']}\n"

        gh.reset_calls()
        other = run(ws, "api", "issues", {**payload, "label": {"name": "question"}}, api_url=gh.url)
        assert other.jobs["file"].result == "skipped" and gh.calls == 0


# Our own workflows and actions: every expression in them parses and names known contexts


OURS = sorted([*REPO.glob(".github/workflows/*.yml"), *REPO.glob("actions/*/action.yml"),
               *DATA.glob("workflows/*.yml"), *DATA.glob("actions/*/action.yml")])


@pytest.mark.parametrize("path", OURS, ids=[str(p.relative_to(REPO)) for p in OURS])
def test_expressions_in_our_workflows_parse(path):
    check_expressions(path)
