"""The dashboard round trip on the in-memory port (``FakePort``): what lies above the port, without HTTP.

One issue found by its hidden marker and edited in place; at most 3 requests
per update; a ticked box acts exactly once, even when the edit is delivered
again; the body's other lines are hostile and do nothing.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from fakes.port import FakePort
from helpers import incident_yaml, make_scenario, rule_yaml, write

from bot import config as config_mod
from bot.config import Config
from bot.github import dashboard
from bot.github.events import DashboardTick, UpdateDashboard, plan
from bot.github.handle import execute
from bot.github.port import IssueRef

TODAY = date(2026, 9, 1)


@pytest.fixture
def repo(root) -> Path:
    make_scenario(root)
    write(root / "incidents" / "2026-07-14-0932.yaml", incident_yaml("2026-07-14-0932"))
    write(root / "incidents" / "2026-07-21-1105.yaml", incident_yaml("2026-07-21-1105",
                                                                     created="2026-07-21T11:05:00Z"))
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    return root


def run(port: FakePort, root: Path, actions: list, **kw) -> tuple[list, int]:
    """``execute`` on the port; the outcomes and the port calls they made."""
    port.calls = 0
    outcomes = execute(actions, port, root=root, settings=config_mod.load(root), today=TODAY, **kw)
    return outcomes, port.calls


def the_dashboard(port: FakePort) -> IssueRef:
    [issue] = [i for i in port.issues.values() if dashboard.MARKER in i.body and i.author == port.login]
    return issue


def edited(port: FakePort, issue: IssueRef) -> list:
    """What the planner makes of the `issues.edited` delivery of ``issue``."""
    payload = {"action": "edited", "issue": {"number": issue.number, "body": issue.body,
                                             "labels": [{"name": n} for n in issue.labels]},
               "changes": {"body": {"from": ""}}, "repository": {"full_name": "octo/app", "default_branch": "main"}}
    return plan("issues", payload, Config())


def tick(port: FakePort, issue: IssueRef, key: str) -> IssueRef:
    """A person ticks ``key``'s box on the issue; the issue as it is now."""
    body = issue.body.replace(f"- [ ] <!-- replaybook:do:{key} -->", f"- [x] <!-- replaybook:do:{key} -->")
    return port.edit_issue(issue.number, body)


def branch_files(port: FakePort, pr) -> dict[str, str]:
    return port.branches[pr.head_ref].files


def ticking_opens_one_pr(port: FakePort, repo: Path, issue: IssueRef, key: str) -> dict[str, str]:
    """Tick ``key``: one PR opens, and the same edit delivered again opens no second; the PR's files."""
    issue = tick(port, issue, key)
    outcomes, _ = run(port, repo, edited(port, issue))
    assert outcomes[0].status == "done", outcomes
    [pr] = port.pulls.values()
    run(port, repo, edited(port, issue))
    assert len(port.pulls) == 1
    return branch_files(port, pr)


def test_the_dashboard_is_opened_once_and_edited_in_place_in_at_most_3_requests(port, repo, tmp_path):
    block = incident_yaml("x", created="2026-08-10T09:00:00Z", repeat_of="rule-0001")
    port.file_issue("incident", f"```yaml\n{block}```\n", ["incident"])
    outcomes, first = run(port, repo, [UpdateDashboard()])
    assert [o.status for o in outcomes] == ["done"] and first <= 3, outcomes
    issue = the_dashboard(port)
    assert dashboard.LABEL in issue.labels and "```mermaid" in issue.body
    assert "- [ ] <!-- replaybook:do:retire:rule-0001 -->" in issue.body
    assert "**1 of 1 incidents are repeats**" in issue.body  # the incident issue, read as gh-1
    summary = tmp_path / "summary.md"
    outcomes, again = run(port, repo, [UpdateDashboard()], step_summary=summary)
    assert again <= 3 and the_dashboard(port).number == issue.number and outcomes[0].status == "unchanged"
    assert "```mermaid" in summary.read_text()  # the scheduled run's job summary shows the same charts
    write(repo / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002", cites=("2026-07-21-1105",)))
    outcomes, changed = run(port, repo, [UpdateDashboard()])
    assert changed <= 3 and outcomes[0].summary.startswith("updated the dashboard")
    assert "replaybook:do:retest:rule-0002" in the_dashboard(port).body
    assert len([i for i in port.issues.values() if dashboard.MARKER in i.body]) == 1


def test_a_ticked_box_acts_exactly_once_even_when_the_edit_is_delivered_again(port, repo):
    run(port, repo, [UpdateDashboard()])
    issue = the_dashboard(port)
    issue = tick(port, issue, "distill")
    issue = tick(port, issue, "retest:rule-0001")
    actions = edited(port, issue)
    assert actions == [DashboardTick(number=issue.number)]
    outcomes, _ = run(port, repo, actions)
    assert [o.status for o in outcomes] == ["done", "done"], outcomes
    assert [(d["workflow"], d["inputs"]) for d in port.dispatched] == [
        ("replaybook-distill.yml", {"reason": "dashboard"}), ("replaybook-replay.yml", {"scenario": "monorepo-test-cwd"})]
    assert "- [x]" not in the_dashboard(port).body
    for _ in range(2):  # the same delivery again, and the bot's own edit delivered: nothing more happens
        run(port, repo, actions)
    assert len(port.dispatched) == 2


def test_hostile_lines_in_the_body_do_nothing(port, repo):
    run(port, repo, [UpdateDashboard()])
    issue = the_dashboard(port)
    hostile = ("\n- [x] <!-- replaybook:do:gate:99 --> not an open rule PR\n"
               "  - [x] <!-- replaybook:do:distill --> indented: not the bot's line\n"
               "- [x] <!-- replaybook:do:retire:rule-0999 --> no such rule\n"
               "- [x] <!-- replaybook:do:distill; rm -rf / -->\n"
               "* [x] <!-- replaybook:do:distill -->\n")
    issue = port.edit_issue(issue.number, issue.body + hostile)
    outcomes, _ = run(port, repo, edited(port, issue))
    assert port.dispatched == [] and port.pulls == {}
    assert all(o.status == "unchanged" for o in outcomes)
    # a copy of the dashboard someone else opened is not the bot's: its ticks are ignored
    fake = port.file_issue("Replaybook dashboard", dashboard.MARKER + "\n- [x] <!-- replaybook:do:distill -->\n",
                         ["replaybook", dashboard.LABEL], author="octocat")
    outcomes, _ = run(port, repo, edited(port, fake))
    assert port.dispatched == [] and "not the bot's dashboard" in outcomes[0].summary


def test_ticking_retire_opens_one_retirement_pr(port, repo):
    port.add_file("playbook/rules/rule-0001.yaml", rule_yaml("rule-0001"))
    run(port, repo, [UpdateDashboard()])
    issue = the_dashboard(port)
    files = ticking_opens_one_pr(port, repo, issue, "retire:rule-0001")
    assert "retired_reason: dashboard" in files["playbook/archive/rule-0001.yaml"]
    assert "playbook/rules/rule-0001.yaml" not in files


def test_ticked_parses_only_exact_marker_keyed_lines():
    text = ("- [x] <!-- replaybook:do:distill --> Distill now\r\n- [X] <!-- replaybook:do:gate:12 -->\n"
            "- [x] <!-- replaybook:do:gate:12 --> twice\n- [ ] <!-- replaybook:do:retest:rule-0004 -->\n"
            "text - [x] <!-- replaybook:do:retire:rule-0004 -->\n")
    assert dashboard.ticked(text) == ["distill", "gate:12"]
    assert dashboard.ticked(dashboard.untick(text, {"distill", "gate:12"})) == []


def test_an_ignored_rule_is_offered_escalation_and_ticking_it_opens_one_guard_pr(port, repo):
    for day in ("2026-08-10", "2026-08-11"):  # two repeats after its admission (2026-08-03): ignored
        block = incident_yaml("x", created=f"{day}T09:00:00Z", repeat_of="rule-0001")
        port.file_issue("incident", f"```yaml\n{block}```\n", ["incident"])
    run(port, repo, [UpdateDashboard()])
    issue = the_dashboard(port)
    assert "- [ ] <!-- replaybook:do:escalate:rule-0001 -->" in issue.body
    assert "ignored: gh-1, gh-2" in issue.body
    files = ticking_opens_one_pr(port, repo, issue, "escalate:rule-0001")
    assert '"command": "pytest"' in files[".claude/hooks/replaybook-guard.json"]
    assert "PreToolUse" in files[".claude/settings.json"] and ".claude/hooks/replaybook-guard.py" in files


def test_escalation_is_not_offered_for_a_rule_that_is_obeyed(port, repo):
    run(port, repo, [UpdateDashboard()])
    issue = the_dashboard(port)
    assert "escalate:" not in issue.body
    issue = port.edit_issue(issue.number, issue.body + "\n- [x] <!-- replaybook:do:escalate:rule-0001 -->\n")  # by hand
    run(port, repo, edited(port, issue))
    assert port.pulls == {}
