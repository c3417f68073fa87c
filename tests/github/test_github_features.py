"""The GitHub features above the port, against the in-memory ``FakePort``: what each writes, and that again writes nothing.

The same features run end to end through PyGithub and the HTTP fake in
``test_github_prs.py`` and ``test_github_handle.py``; here each one's plan and
execution is checked on plain data, fast, with the request count the port saw.
"""

from __future__ import annotations

from datetime import date

from fakes.port import FakePort
from helpers import incident_yaml, make_scenario, rule_yaml, write

from bot import config as config_mod
from bot.github.events import CaptureRun, CheckPlaybookInvariants, RecordHits
from bot.github.handle import execute
from bot.github.port import CommitRef, Job, Step

TODAY = date(2026, 12, 1)


def _playbook(root, cap: int = 5) -> None:
    write(root / ".replaybook.yml", f"cap: {cap}\ngithub: {{agent_logins: [agent-bot]}}\n")
    make_scenario(root)
    for incident_id in ("2026-07-14-0932", "2026-07-21-1105"):
        write(root / "incidents" / f"{incident_id}.yaml", incident_yaml(incident_id))
    write(root / "playbook/rules/rule-0001.yaml", rule_yaml("rule-0001", last_hit="2026-08-20"))
    write(root / "playbook/rules/rule-0002.yaml", rule_yaml("rule-0002", text="When a migration is added, run the "
                                                              "schema check before the tests."))
    from bot.playbook.store import Playbook

    Playbook(root / "playbook", root=root, cap=cap).render()


def _port_of(root) -> FakePort:
    port = FakePort()
    port.branches["main"].files = {p.relative_to(root).as_posix(): p.read_text("utf-8") for p in root.rglob("*")
                                   if p.is_file() and ".replaybook/" not in p.as_posix()}
    return port


def test_hits_land_in_one_pr_and_a_second_scan_writes_nothing(root):
    _playbook(root)
    port = _port_of(root)
    port.commits.append(CommitRef("a" * 40, "Fix the tests [rule-0002] [rule-0099]", "2026-11-30T10:00:00Z",
                                  "agent-bot"))
    settings = config_mod.load(root)
    (first,) = execute([RecordHits(lookback_days=35)], port, root=root, settings=settings, today=TODAY)
    assert first.status == "done", first
    (pr,) = port.pulls.values()
    files = port.branches[pr.head_ref].files
    assert "last_hit: 2026-11-30" in files["playbook/rules/rule-0002.yaml"]
    assert files["playbook/rules/rule-0001.yaml"] == port.branches["main"].files["playbook/rules/rule-0001.yaml"]
    assert "rule-0099" in pr.body  # cited but not in the playbook: listed, never written
    commits = port.branches[pr.head_ref].commits
    (again,) = execute([RecordHits(lookback_days=35)], port, root=root, settings=settings, today=TODAY)
    assert again.status == "unchanged" and port.branches[pr.head_ref].commits == commits
    assert len(port.pulls) == 1


def test_maintenance_retires_past_the_cap_and_renders_in_one_pr_once(root):
    _playbook(root, cap=1)
    port = _port_of(root)
    settings = config_mod.load(root)
    action = CheckPlaybookInvariants(after_sha=port.branches["main"].sha)
    (first,) = execute([action], port, root=root, settings=settings, today=TODAY)
    assert first.status == "done", first
    (pr,) = port.pulls.values()
    files = port.branches[pr.head_ref].files
    assert "playbook/rules/rule-0002.yaml" not in files  # the coldest (never hit) retires
    assert "retired: 2026-12-01" in files["playbook/archive/rule-0002.yaml"]
    assert "rule-0002" not in files["playbook/PLAYBOOK.md"] and "rule-0001" in files["playbook/PLAYBOOK.md"]
    assert not (root / "playbook/archive").exists()  # the checkout is never written
    (again,) = execute([action], port, root=root, settings=settings, today=TODAY)
    assert again.status == "unchanged" and port.branches[pr.head_ref].commits == 1


def test_a_failed_run_files_one_issue_and_a_redelivery_changes_nothing(root):
    port = FakePort()
    port.jobs[7] = [Job(70, "test (3.11)", "failure", (Step(1, "Run pytest", "failure"),))]
    port.logs[70] = "E   ModuleNotFoundError: No module named 'api'\n=== 1 failed in 0.1s ===\n"
    action = CaptureRun(run_id=7, run_attempt=1, workflow="CI", conclusion="failure", head_sha="b" * 40,
                        html_url="https://github.test/runs/7", key="run-7-attempt-1")
    settings = config_mod.load(root)
    (first,) = execute([action], port, root=root, settings=settings)
    assert first.status == "done", first
    (issue,) = port.issues.values()
    assert "incident" in issue.labels and "ModuleNotFoundError" in issue.body
    (again,) = execute([action], port, root=root, settings=settings)
    assert again.status == "unchanged" and len(port.issues) == 1 and not port.comments
    assert port.claims == set()  # every claim was released
