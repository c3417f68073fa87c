"""No input crashes the loop: bounded fuzzing of every entry point that reads outside text.

Each property runs a fixed, small number of examples (CI time is bounded)
and fails on anything but the documented answers: a loader raises only
``BadInput``; the issue-form parser returns problems, never raises; the CLI
exits 0, 1 or 2 and never 3 (a bug) on mutated real webhook payloads.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot import config as config_mod
from bot._util import records, yamlfile
from bot.errors import BadInput
from bot.github.issue_form import FIELDS, MARKER, parse_incident_issue
from bot.incident.store import Incident
from bot.playbook.rule import Rule

BOUNDED = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Values that broke, or nearly broke, a loader: impossible dates and times, YAML's odd scalars, flow
# syntax, anchors, huge numbers, markers and fences.
TRICKY = st.sampled_from([
    "2026-02-30", "2026-02-01T25:00:00Z", "2026-13-01", "0000-00-00", "2026-07-14T09:32:00", "2026-07-14",
    "1e999", "-5", "0x1F", "~", "null", "yes", "no", ".nan", "[a, b", "{a: 1}", "&a x", "*a", "!!python/object x",
    "'quoted'", '"line\\nline"', "<!-- replaybook:incident-yaml -->", "```", "@alice", "#77", "", " ",
    "x" * 5000,
])
VALUE = st.one_of(TRICKY, st.text(max_size=40), st.integers(), st.booleans())
KEYS = ["id", "task", "task_type", "failure_class", "trigger", "believed", "actual", "cost_minutes", "created",
        "resolved_by", "source", "triage", "evidence", "rule", "cites", "replay", "last_hit", "cap", "paths",
        "github", "models"]


def _yaml_text(pairs: list[tuple[str, object]]) -> str:
    return "".join(f"{key}: {value}\n" for key, value in pairs)


@BOUNDED
@given(st.lists(st.tuples(st.sampled_from(KEYS), VALUE), max_size=12) | st.text(max_size=300))
def test_the_yaml_loaders_raise_only_bad_input(doc):
    text = doc if isinstance(doc, str) else _yaml_text(doc)
    for model, what in ((Incident, "incident"), (Rule, "rule"), (config_mod.Config, "config")):
        try:
            records.from_document(model, yamlfile.parse(Path(f"fuzz.{what}.yaml"), text, what=what), what=what)
        except BadInput as exc:
            assert exc.render().strip()


SECTION = st.tuples(st.sampled_from([label for label, _ in FIELDS] + ["Other", "Task"]), VALUE)


@BOUNDED
@given(st.lists(SECTION, max_size=10), st.booleans(), st.lists(st.tuples(st.sampled_from(KEYS), VALUE), max_size=8),
       st.sampled_from(["\n", "\r\n"]))
def test_the_issue_form_parser_never_raises(sections, with_block, block, newline):
    body = "".join(f"### {label}\n\n{value}\n\n" for label, value in sections)
    if with_block:
        body += f"{MARKER}\n```yaml\n{_yaml_text(block)}```\n"
    data, problems = parse_incident_issue(body.replace("\n", newline), number=1, created_at="2026-12-01T00:00:00Z")
    assert isinstance(data, dict) and all(isinstance(p, str) for p in problems)


EVENTS = ["workflow_run", "pull_request", "pull_request_review", "issues", "merge_group", "push",
          "workflow_dispatch"]
JUNK = st.one_of(st.none(), st.integers(), st.booleans(), st.text(max_size=20), st.just([]), st.just({}),
                 st.just([{"name": 7}]), TRICKY)


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node[:3]):
            yield prefix + (index,)
            yield from _paths(value, prefix + (index,))


def _mutate(payload, path, value, delete):
    node = payload
    for part in path[:-1]:
        node = node[part]
    if delete and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = value


@BOUNDED
@given(st.sampled_from(EVENTS), st.data())
def test_github_handle_dry_run_on_mutated_real_payloads_never_crashes(cli, tmp_path, monkeypatch, examples,
                                                                      event, data):
    payloads = examples.get(event) or [{}]
    payload = copy.deepcopy(data.draw(st.sampled_from(payloads[:8])))
    paths = list(_paths(payload))
    for _ in range(data.draw(st.integers(0, 3))):
        if paths:
            _mutate(payload, data.draw(st.sampled_from(paths)), data.draw(JUNK), data.draw(st.booleans()))
            paths = list(_paths(payload))
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    result = cli("github", "handle", "--dry-run", "--event-name", event, "--event-path", str(path))
    assert result.code in (0, 2), (result, payload)
