"""The incident issue form: its labels are the ones the parser reads, and what GitHub renders from it parses."""

from __future__ import annotations

import pytest
import yaml
from helpers import REPO

from bot.github import init as init_mod
from bot.github.issue_form import (
    FIELDS,
    NO_RESPONSE,
    incident_from_issue,
    parse_incident_issue,
)
from bot.incident.store import FAILURE_CLASSES, Incident

FORM = REPO / ".github" / "ISSUE_TEMPLATE" / "incident.yml"


def _form() -> dict:
    return yaml.safe_load(FORM.read_text(encoding="utf-8"))


def _fields() -> list[dict]:
    return [item for item in _form()["body"] if item["type"] != "markdown"]


def render(values: dict[str, str | None]) -> str:
    """An issue body the way GitHub renders a submitted form: `### Label`, a blank line, the value.

    An empty field reads `_No response_`; a textarea with `render:` comes fenced.
    """
    parts = []
    for item in _fields():
        label = item["attributes"]["label"]
        value = values.get(label)
        if not value:
            text = NO_RESPONSE
        elif item["attributes"].get("render"):
            text = f"```{item['attributes']['render']}\n{value}\n```"
        else:
            text = value
        parts.append(f"### {label}\n\n{text}")
    return "\n\n".join(parts)


FILLED = {
    "Task": "Add rate limiting to /v1/upload",
    "Task type": "api",
    "Failure class": "wrong_assumption",
    "Trigger": "CI failed: 14 import errors after the agent moved tests",
    "What the agent believed": "Tests are run from the repo root with `pytest`",
    "What was actually true": "Each package has its own pytest.ini; run it from packages/api",
    "Cost (minutes)": "22",
    "Evidence": "E   ModuleNotFoundError: No module named 'api'\n### not a heading: inside the fence",
}


def test_the_form_labels_are_the_parsers_fields_in_order():
    assert [item["attributes"]["label"] for item in _fields()] == [label for label, _ in FIELDS]


def test_the_form_applies_the_incident_label():
    assert _form()["labels"] == ["incident"]


def test_the_fields_an_incident_requires_are_required_in_the_form():
    required = {item["attributes"]["label"] for item in _fields() if item.get("validations", {}).get("required")}
    assert required == {"Task", "Failure class", "Trigger", "What the agent believed", "What was actually true"}


def test_a_filled_in_form_parses_into_the_incident():
    incident = incident_from_issue(render(FILLED), number=42, created_at="2026-07-14T09:32:00Z",
                                   html_url="https://github.com/o/r/issues/42")
    assert incident.id == "gh-42"
    assert incident.task == FILLED["Task"] and incident.task_type == "api"
    assert incident.failure_class == "wrong_assumption" and incident.cost_minutes == 22
    assert incident.believed == FILLED["What the agent believed"] and incident.actual == FILLED["What was actually true"]
    assert incident.evidence == FILLED["Evidence"]  # unfenced, the heading inside kept as content
    assert incident.source.kind == "issue_form" and incident.source.key == "issue-42"


def test_optional_fields_left_empty_read_no_response_and_still_parse():
    values = {k: v for k, v in FILLED.items() if k not in ("Task type", "Cost (minutes)", "Evidence")}
    body = render(values)
    assert body.count(NO_RESPONSE) == 4  # FILLED leaves "Repeat of" out too
    data, problems = parse_incident_issue(body, number=7, created_at="2026-07-14T09:32:00Z")
    assert problems == []
    assert data["cost_minutes"] == 0 and "task_type" not in data and "evidence" not in data
    assert "repeat_of" not in data


@pytest.mark.parametrize(("written", "expected"), [
    ("rule-0004", "rule-0004"), ("[rule-0012]", "rule-0012"), ("#12, #15", ["gh-12", "gh-15"]),
    ("2026-07-14-0932", ["2026-07-14-0932"]), ("none", []),
])
def test_a_person_sets_or_clears_repeat_of_in_the_form(written, expected):
    data, problems = parse_incident_issue(render({**FILLED, "Repeat of": written}), number=7,
                                          created_at="2026-07-14T09:32:00Z")
    assert problems == [] and data["repeat_of"] == expected


def test_a_bad_repeat_of_names_the_form_field():
    _, problems = parse_incident_issue(render({**FILLED, "Repeat of": "rm -rf /"}), number=7,
                                       created_at="2026-07-14T09:32:00Z")
    assert problems and "`Repeat of` (repeat_of)" in problems[0]


def test_a_blank_repeat_of_keeps_what_the_bot_recorded_and_none_clears_it():
    from bot.github.issue_form import replace_block

    first, _ = parse_incident_issue(render(FILLED), number=7, created_at="2026-07-14T09:32:00Z")
    recorded = Incident.model_validate({**first, "repeat_of": "rule-0004"})
    body = replace_block(render(FILLED), recorded)
    kept, problems = parse_incident_issue(body, number=7, created_at="2026-07-14T09:32:00Z")
    assert problems == [] and kept["repeat_of"] == "rule-0004"
    cleared_body = replace_block(render({**FILLED, "Repeat of": "none"}), recorded)
    cleared, _ = parse_incident_issue(cleared_body, number=7, created_at="2026-07-14T09:32:00Z")
    assert cleared["repeat_of"] == []


@pytest.mark.parametrize("option", next(i for i in _fields() if i["type"] == "dropdown")["attributes"]["options"])
def test_every_failure_class_option_parses(option):
    data, problems = parse_incident_issue(render({**FILLED, "Failure class": option}), number=1,
                                          created_at="2026-07-14T09:32:00Z")
    assert problems == [] and data["failure_class"] == option and option in FAILURE_CLASSES


def test_an_empty_required_field_is_reported_by_its_label():
    _, problems = parse_incident_issue(render({**FILLED, "What the agent believed": None}), number=3,
                                       created_at="2026-07-14T09:32:00Z")
    assert any("What the agent believed" in p for p in problems)


def test_the_shipped_form_is_the_one_init_writes():
    rendered = {path: text for path, text, _ in init_mod.render(REPO, local_actions=True)}
    assert FORM.read_text(encoding="utf-8") == rendered[init_mod.ISSUE_FORM]
