"""An out-of-range date or time in any YAML file is bad input, never a crash.

PyYAML turns a timestamp-shaped value into a datetime while it parses, and
``2026-02-30`` or ``T25:00:00Z`` made it raise a bare ValueError out of every
loader: exit 3 on an incident, a rule, a scenario, ``.replaybook.yml``, and
the yaml block of an incident issue.
"""

from __future__ import annotations

import pytest
from helpers import incident_yaml, make_scenario, rule_yaml, write

from bot.github.issue_form import parse_incident_issue

BAD = {"no such day": "2026-02-30", "no such hour": "2026-02-01T25:00:00Z"}


@pytest.mark.parametrize("value", BAD.values(), ids=list(BAD))
def test_an_incident_with_an_impossible_created_names_the_file_the_field_and_the_fix(cli, root, value):
    path = root / "incidents" / "a-1.yaml"
    write(path, incident_yaml("a-1", created=value))
    result = cli("incident", "validate", str(path))
    assert result.code == 2, result
    assert str(path) in result.err and "field `created`" in result.err and "2026-07-14" in result.err
    assert "Traceback" not in result.err
    listing = cli("incident", "list")
    assert listing.code == 2 and "field `created`" in listing.err


@pytest.mark.parametrize("value", BAD.values(), ids=list(BAD))
def test_a_rule_with_an_impossible_date_is_bad_input(cli, seeded, value):
    path = seeded / "playbook" / "proposed" / "rule-0002.yaml"
    write(path, rule_yaml("rule-0002", last_hit=value))
    result = cli("rule", "validate", str(path))
    assert result.code == 2, result
    assert "field `last_hit`" in result.err and "Traceback" not in result.err


def test_a_date_shaped_value_in_the_config_is_bad_input(cli, root):
    write(root / ".replaybook.yml", "cap: 2026-02-30\n")
    result = cli("playbook", "check")
    assert result.code == 2, result
    assert ".replaybook.yml" in result.err and "cap" in result.err and "Traceback" not in result.err


def test_a_date_shaped_scenario_value_is_read_as_text_not_a_crash(cli, root):
    folder = make_scenario(root)
    text = (folder / "scenario.yaml").read_text().replace('task: "Fix the failing', "task: 2026-02-30 Fix the failing")
    (folder / "scenario.yaml").write_text(text.replace('test_limits.py"', "test_limits.py"))
    result = cli("replay", "list")
    assert result.code in (0, 2), result
    assert "Traceback" not in result.err


def test_an_incident_issue_block_with_an_impossible_date_lists_the_problem():
    body = ("<!-- replaybook:incident-yaml -->\n```yaml\nid: gh-4\ntask: t\nfailure_class: env\ntrigger: CI\n"
            "believed: a\nactual: b\ncreated: 2026-02-30T10:00:00Z\n```\n")
    data, problems = parse_incident_issue(body, number=4, created_at="2026-12-01T00:00:00Z")
    assert any("`created`" in p and "2026-07-14" in p for p in problems), problems
