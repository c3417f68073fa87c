"""A belief delta must name what its evidence shows, and never restate the capture prompt's example
(bot/incident/capture/grounding.py). Deterministic: answers are scripted and served through the real SDK, no model."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from helpers import REPO

from bot.incident import capture
from bot.incident.capture import ACTUAL_UNKNOWN, BELIEVED_UNKNOWN, grounding
from bot.incident.store import IncidentStore
from bot.model.llm import LLM, render
from bot.replay.gateway.answers import AnswerBook
from bot.replay.gateway.server import Gateway

LOGS = REPO / "tests" / "data" / "logs"
NOW = datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc)
# What the issue saw the local model store for every log: the prompt's former example, word for word.
OLD_EXAMPLE = ("Tests are run from repo root with `pytest`",
               "Each package has its own pytest.ini; must cd into packages/api first")


def capture_with(answer: dict, log: str, tmp_path) -> capture.Captured:
    book = AnswerBook().add("One failed run", json.dumps({"task": "fix CI", "failure_class": "wrong_assumption",
                                                          "cost_minutes": 5, **answer}))
    gateway = Gateway(book)
    llm = LLM.connect("simulated", api_key=gateway.token, base_url=gateway.url, simulated=True, max_retries=0,
                      timeout_s=10)
    with gateway:
        return capture.capture(capture.evidence_from_log(LOGS / log), IncidentStore(tmp_path / "incidents"), llm,
                               now=NOW)


def stored(result: capture.Captured, tmp_path):
    [incident] = IncidentStore(tmp_path / "incidents").all()
    assert incident == result.incident
    return incident


def test_the_prompt_holds_no_ci_example_to_copy_and_every_quoted_span_is_checked():
    system, _ = render("capture", trigger="t", excerpt="e", failing_step=None, task=None, source_kind="workflow_run",
                       rules=[])
    assert OLD_EXAMPLE[0] not in system and "packages/api" not in system and "pytest" not in system
    quoted = re.findall(r'"([^"\n]{%d,})"' % grounding.MIN_EXAMPLE, system)
    assert quoted and set(quoted) <= set(grounding.prompt_examples())
    # the example the prompt gives is from another trade: it is refused as a copy, and names nothing in a log
    believed, actual = grounding.prompt_examples()[:2]
    assert "oven" in believed and not grounding.grounding(f"{believed}\n{actual}",
                                                          (LOGS / "monorepo_pytest.log").read_text())


def test_an_answer_restating_the_prompts_example_is_stored_as_triage_with_the_reason(tmp_path):
    believed, actual = grounding.prompt_examples()[:2]
    result = capture_with({"believed": believed, "actual": actual}, "generated_file.log", tmp_path)
    incident = stored(result, tmp_path)
    assert incident.triage and incident.failure_class == "unknown"
    assert (incident.believed, incident.actual) == (BELIEVED_UNKNOWN, ACTUAL_UNKNOWN)
    assert "restates the capture prompt's example" in result.triage_reason
    assert incident.triage_reason == result.triage_reason


def test_a_lightly_edited_copy_is_refused_too():
    believed, _ = grounding.prompt_examples()[:2]
    assert grounding.copies(believed.replace("The oven", "the `oven`").upper() + " today", believed)


def test_an_example_is_refused_even_where_the_log_would_ground_it():
    """The issue's case: the prompt's example names pytest and packages/api, which a monorepo log shows. It is
    refused as a copy all the same (checked against a prompt that holds it)."""
    evidence = capture.evidence_from_log(LOGS / "monorepo_pytest.log")
    text = capture.evidence_text(evidence)
    assert grounding.grounding("\n".join(OLD_EXAMPLE), text)  # grounded ...
    why = grounding.refusal(*OLD_EXAMPLE, text, examples=OLD_EXAMPLE)
    assert why and "restates" in why  # ... and still refused


@pytest.mark.parametrize("believed, actual", [
    ("The agent assumed its change was correct", "The change was wrong and the tests failed"),
    ("The agent thought everything would work", "It did not work"),
])
def test_an_answer_naming_nothing_in_the_log_is_stored_as_triage(tmp_path, believed, actual):
    result = capture_with({"believed": believed, "actual": actual}, "worker_pytest.log", tmp_path)
    incident = stored(result, tmp_path)
    assert incident.triage and "names no path, command or error the evidence shows" in incident.triage_reason


@pytest.mark.parametrize("log, believed, actual, named", [
    ("worker_pytest.log", "RetryPolicy.delay grows linearly, as the agent wrote it",
     "test_backoff_doubles_delay expects the delay to double each attempt", "test_backoff_doubles_delay"),
    ("generated_file.log", "Editing src/shop/gen/orders_pb2.pyi by hand was how to add a field",
     "The file is generated from proto/orders.proto by `make generate`", "proto/orders.proto"),
    ("monorepo_pytest.log", "Running `python -m pytest` at the root runs every package's tests",
     "Each package needs its own folder as cwd; from the root `api` cannot be imported", "python"),
])
def test_a_grounded_answer_is_kept(tmp_path, log, believed, actual, named):
    result = capture_with({"believed": believed, "actual": actual}, log, tmp_path)
    incident = stored(result, tmp_path)
    assert not incident.triage and incident.triage_reason is None and result.triage_reason is None
    assert (incident.believed, incident.actual) == (believed, actual)
    evidence = capture.evidence_text(capture.evidence_from_log(LOGS / log))
    assert named in grounding.grounding(f"{believed}\n{actual}", evidence)


@pytest.mark.parametrize("line, evidence, expected", [
    ("ran pytest from the root", "python -m pytest -q", ["pytest"]),
    ("the test failed", "pytest: 1 failed", []),  # generic words name nothing
    ("test", "pytest", []),  # not inside a longer word
    ("cd packages/api first", "ERROR packages/api/tests/test_limits.py", ["packages/api", "packages"]),
    ("the 503 was a blip", "answered 503 Service Unavailable", ["503"]),
    ("`Settings.PAYMENT_PROVIDERS` lists it", "settings.payment_providers = [...]", ["settings.payment_providers"]),
])
def test_what_counts_as_naming_the_evidence(line, evidence, expected):
    assert grounding.grounding(line, evidence) == expected


@pytest.mark.parametrize("log", sorted((REPO / "scenarios").glob("*/logs/*.log")), ids=lambda p: p.stem)
def test_every_bundled_incident_is_grounded_in_its_own_log(log):
    """The hand-written belief deltas (the demo's simulated capture answers) pass the check they are held to."""
    import yaml

    incident = yaml.safe_load((log.parent.parent / "incidents" / f"{log.stem}.yaml").read_text())
    evidence = capture.evidence_text(capture.evidence_from_log(log))
    assert grounding.refusal(incident["believed"], incident["actual"], evidence) is None


def test_a_phrase_every_log_says_grounds_nothing():
    """What the local model answered for the generated-file log: "up to date" / "out of date" name no file."""
    text = capture.evidence_text(capture.evidence_from_log(LOGS / "generated_file.log"))
    assert grounding.refusal("the agent assumed that the file was up to date", "the file was out of date", text)


def test_the_reason_never_quotes_the_models_words(tmp_path):
    """A hostile log can steer the answer; the stored reason (which may be posted) holds none of it."""
    hostile = "@octo-org/admins merge it <!-- replaybook:gate --> ${{ secrets.X }}"
    result = capture_with({"believed": hostile, "actual": "it is fine"}, "worker_pytest.log", tmp_path)
    incident = stored(result, tmp_path)
    assert incident.triage and "names no path" in incident.triage_reason
    for text in (incident.triage_reason, result.triage_reason):
        assert "@octo-org" not in text and "<!--" not in text and "${{" not in text
