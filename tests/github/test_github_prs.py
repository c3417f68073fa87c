"""Pull requests the bot opens: rule PRs from distill, the rule-hits PR, and the playbook maintenance PR.

The real handlers run as ``replaybook github handle`` runs them, on the
in-memory port (``FakePort``); distill asks a scripted model served over HTTP
(the Gateway and an AnswerBook), found through ANTHROPIC_API_KEY /
ANTHROPIC_BASE_URL as in Actions. Each run starts from a fresh copy of the
checkout, as a scheduled job does. The adapter's side of the same calls is in
tests/github/test_github_adapter.py.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

from fakes.port import FakePort
from helpers import incident_yaml, make_scenario, rule_yaml, snapshot, write
from support.github import A1, A2, HEAD, REPOSITORY, RULE, completed, on_port, port_incidents, rule_answer

from bot.github.maintenance import MAINTENANCE_MARKER
from bot.github.port import marker


def reset(port: FakePort) -> None:
    """Count calls and writes afresh, as for the next run."""
    port.calls = 0
    port.writes.clear()


def distilled(outcomes: list) -> list:
    return [o for o in outcomes if o.kind == "distill"]


def pulls(port: FakePort) -> list:
    return list(port.pulls.values())


def files_on(port: FakePort, branch: str) -> dict[str, str]:
    return port.branches[branch].files


class Checkout:
    """The repository as a job checks it out: each ``fresh()`` throws away what the last run wrote."""

    def __init__(self, root: Path, tmp: Path):
        self.root, self.pristine = root, tmp / "pristine"

    def save(self) -> None:
        shutil.copytree(self.root, self.pristine, dirs_exist_ok=True)

    def fresh(self) -> None:
        shutil.rmtree(self.root)
        shutil.copytree(self.pristine, self.root)


def add_incident(root: Path, incident_id: str, **over) -> None:
    write(root / "incidents" / f"{incident_id}.yaml", incident_yaml(incident_id, **over))


SCHEDULE = ("schedule", {"schedule": "0 3 * * *"})


# ------------------------------------------------------------------ distill


def test_distill_opens_one_pr_per_rule_and_reruns_change_nothing(port, root, model, tmp_path):
    checkout = Checkout(root, tmp_path)
    port_incidents(port, 2)
    checkout.save()
    model.book.add(A1, rule_answer())
    outcomes = on_port(port, root, *SCHEDULE)
    assert completed(outcomes), outcomes
    assert len(port.pulls) == 1, outcomes
    (pr,) = pulls(port)
    assert (pr.head_ref, port.bases[pr.number], pr.state) == ("replaybook/rule-0001", "main", "open")
    assert pr.body.startswith(marker("rule-0001")) and marker(f"cite:{A1}") in pr.body
    assert RULE in pr.body and "Merging this PR admits the rule" in pr.body
    files = files_on(port, "replaybook/rule-0001")
    assert "replay: scenarios/monorepo-cwd-gen" in files["playbook/rules/rule-0001.yaml"]
    assert files["scenarios/monorepo-cwd-gen/scenario.yaml"]
    assert not any(p.startswith("playbook/proposed/") for p in files)
    first = port.calls
    assert [o.status for o in distilled(outcomes)] == ["done", "done"]
    assert "opened PR #3" in distilled(outcomes)[0].summary

    for _ in range(2):  # the next nights, from a fresh checkout: the same proposal updates nothing
        checkout.fresh()
        reset(port)
        outcomes = on_port(port, root, *SCHEDULE)
        assert completed(outcomes), outcomes
        assert "already current in PR #3" in distilled(outcomes)[0].summary
        assert port.writes == [] and len(port.pulls) == 1
        assert port.calls < first


def test_an_open_rule_pr_is_updated_in_place(port, root, model, tmp_path):
    checkout = Checkout(root, tmp_path)
    port_incidents(port, 2)
    checkout.save()
    answer = model.book.add(A1, rule_answer(), times=1).answers[-1]
    on_port(port, root, "schedule", {})
    better = RULE.replace("check for", "look for")
    model.book.add(A1, rule_answer(rule=better))
    assert answer.times == 0
    checkout.fresh()
    outcomes = on_port(port, root, "schedule", {})
    assert completed(outcomes), outcomes
    assert "updated PR #3" in distilled(outcomes)[0].summary
    (pr,) = pulls(port)
    assert better in pr.body
    assert "look for a package-local" in files_on(port, "replaybook/rule-0001")["playbook/rules/rule-0001.yaml"]


def test_a_closed_rule_pr_comes_back_only_when_new_incidents_cite_it(port, root, model, tmp_path):
    checkout = Checkout(root, tmp_path)
    port_incidents(port, 2)
    checkout.save()
    model.book.add(A1, rule_answer(), times=2)  # the first two nights
    dispatch = ("workflow_dispatch", {"inputs": {}})
    on_port(port, root, *dispatch)
    port.close(3)  # a maintainer said no
    checkout.fresh()
    reset(port)
    outcomes = on_port(port, root, *dispatch)
    assert completed(outcomes), outcomes
    assert distilled(outcomes)[0].status == "skipped" and "closed without merging" in distilled(outcomes)[0].summary
    assert port.writes == [] and len(port.pulls) == 1

    (third,) = port_incidents(port, 1)  # a third incident is filed
    model.book.add(third, rule_answer(cites=(A1, A2, third)))
    checkout.fresh()
    outcomes = on_port(port, root, *dispatch)
    assert completed(outcomes), outcomes
    assert [p.state for p in pulls(port)] == ["closed", "open"], outcomes
    reopened = pulls(port)[1]
    assert reopened.head_ref == "replaybook/rule-0002"  # a new id: the refused one is never reused
    assert marker(f"cite:{third}") in reopened.body and "Closes #4" in reopened.body


def test_the_cap_on_open_rule_prs_holds_back_the_rest_and_says_so(port, root, model):
    port_incidents(port, 2)
    port.add_pull("Rule rule-0000", f"{marker('rule-0000')}\nold", "replaybook/rule-0000", author=port.login)
    model.book.add(A1, rule_answer())
    outcomes = on_port(port, root, "schedule", {}, max_open_rule_prs=1)
    assert completed(outcomes), outcomes
    assert len(port.pulls) == 1 and port.writes == []
    assert "held back by the cap of 1 open rule PRs (github.max_open_rule_prs): rule-0001" in \
        distilled(outcomes)[-1].summary


def test_distill_without_a_model_is_an_error_and_writes_nothing(port, root):
    port_incidents(port, 2)
    outcomes = on_port(port, root, "schedule", {})
    assert not completed(outcomes)
    assert [(o.kind, o.status) for o in outcomes] == [("record_hits", "skipped"), ("distill", "failed"),
                                                      ("retest", "skipped")]  # no key: nothing re-tested
    assert distilled(outcomes)[0].summary.startswith("error: distill needs a model")
    assert "no agent account is configured" in outcomes[0].summary
    assert port.calls == 0


def test_without_the_opt_in_nothing_is_opened(port, root):
    outcomes = on_port(port, root, "schedule", {}, open_prs=False)
    assert not completed(outcomes) and distilled(outcomes)[0].status == "not_implemented"
    assert "REPLAYBOOK_OPEN_PRS=1" in distilled(outcomes)[0].summary and port.calls == 0


# ------------------------------------------------------------------ check_playbook_invariants


def push_payload() -> dict:
    return {"ref": "refs/heads/main", "after": HEAD, "repository": REPOSITORY,
            "commits": [{"added": ["playbook/rules/rule-0002.yaml"], "modified": [], "removed": []}]}


def sound_playbook(root: Path, cap: int = 5) -> None:
    write(root / ".replaybook.yml", f"cap: {cap}\n")
    make_scenario(root)
    add_incident(root, "2026-07-14-0932")
    add_incident(root, "2026-07-21-1105")
    write(root / "playbook/rules/rule-0001.yaml", rule_yaml("rule-0001", last_hit="2026-08-20"))
    write(root / "playbook/rules/rule-0002.yaml", rule_yaml("rule-0002", text="When a migration is added, run "
                                                              "the schema check before the tests."))


def mirror(port: FakePort, root: Path) -> None:
    """The default branch on the port holds what the checkout holds, at the pushed commit."""
    port.point("main", HEAD)
    for path in root.rglob("*"):
        if path.is_file() and ".replaybook/" not in path.as_posix():
            port.add_file(path.relative_to(root).as_posix(), path.read_text("utf-8"))


def test_a_sound_playbook_is_ok_without_any_api_call(cli, port, root):
    sound_playbook(root)
    assert cli("playbook", "render").code == 0
    outcomes = on_port(port, root, "push", push_payload())
    assert completed(outcomes), outcomes
    assert outcomes[0].status == "unchanged" and outcomes[0].summary.startswith("ok:")
    assert port.calls == 0


def test_a_broken_playbook_gets_one_maintenance_pr_that_fixes_it(port, root):
    sound_playbook(root, cap=1)  # two admitted rules past a cap of one, and no PLAYBOOK.md
    mirror(port, root)
    before = snapshot(root)
    outcomes = on_port(port, root, "push", push_payload())
    assert completed(outcomes), outcomes
    assert snapshot(root) == before  # fixed in a temp copy, never in the checkout
    (pr,) = pulls(port)
    assert pr.head_ref == "replaybook/maintenance" and pr.body.startswith(MAINTENANCE_MARKER)
    assert "exceed the cap of 1" in pr.body and "out of sync" in pr.body
    assert "retires the coldest past the cap: rule-0002" in pr.body
    files = files_on(port, "replaybook/maintenance")
    assert "playbook/rules/rule-0002.yaml" not in files and "playbook/rules/rule-0001.yaml" in files
    assert "retired_reason: cap" in files["playbook/archive/rule-0002.yaml"]
    assert "rule-0001" in files["playbook/PLAYBOOK.md"] and "rule-0002" not in files["playbook/PLAYBOOK.md"]
    assert "nothing: merging this PR fixes every problem" in pr.body

    reset(port)  # the next push with the same problems: one PR, edited in place, here not at all
    outcomes = on_port(port, root, "push", push_payload())
    assert outcomes[0].status == "unchanged" and "already listed in PR #1" in outcomes[0].summary
    assert port.writes == [] and len(port.pulls) == 1


def test_the_maintenance_pr_renders_every_host_and_keeps_the_users_bytes(cli, port, root):
    sound_playbook(root)
    write(root / ".replaybook.yml", "cap: 5\nrender: [claude, agents, cursor]\n")
    assert cli("playbook", "render").code == 0
    (root / "AGENTS.md").write_bytes(b"# Agents\r\nmine\r\n" + (root / "AGENTS.md").read_bytes())
    write(root / "playbook/rules/rule-0003.yaml", rule_yaml(
        "rule-0003", text="When a fixture is added, register it in conftest.py.") + "paths: [tests/**]\n")
    mirror(port, root)
    before = snapshot(root)
    outcomes = on_port(port, root, "push", push_payload())
    assert completed(outcomes), outcomes
    assert snapshot(root) == before
    (pr,) = pulls(port)
    assert "AGENTS.md: is out of sync" in pr.body and "renders " in pr.body
    files = files_on(port, "replaybook/maintenance")
    assert files["AGENTS.md"].startswith("# Agents\r\nmine\r\n")
    assert "[rule-0003]" in files["tests/AGENTS.md"] and "rule-0003" not in files["AGENTS.md"]  # Codex: its folder
    assert "rule-0003" not in files["CLAUDE.md"]
    assert 'paths:\n  - "tests/**"' in files[".claude/rules/replaybook-rule-0003.md"]
    assert "[rule-0003]" in files[".cursor/rules/replaybook.mdc"]  # Cursor: whole, no dependable scoped form
    assert "nothing: merging this PR fixes every problem" in pr.body


def test_problems_no_machine_can_fix_fail_and_name_themselves(cli, port, root):
    sound_playbook(root)
    assert cli("playbook", "render").code == 0
    write(root / "playbook/rules/rule-0003.yaml", "id: rule-0003\nrule: [not, text]\n")
    outcomes = on_port(port, root, "push", push_payload())
    assert not completed(outcomes)
    assert outcomes[0].status == "failed" and "none fixable mechanically" in outcomes[0].summary
    assert "rule-0003" in outcomes[0].summary and port.writes == []


# ------------------------------------------------------------------ record_hits


def test_rule_hits_from_the_agents_merged_prs_and_commits_land_in_one_pr(port, root, model):
    sound_playbook(root)
    mirror(port, root)
    port.add_pull("Fix the worker tests", "Ran them from the package [rule-0001]", "fix-worker", "agent-bot",
                  merged=True)
    port.add_pull("Docs [rule-0002]", "a person cites a rule: no hit", "docs", "alice", merged=True)
    port.add_commit("Run the schema check first [rule-0002] [rule-0099]", author="agent-bot")
    port.add_commit("Old work [rule-0002]", author="agent-bot", date="2026-01-01T00:00:00Z")  # before the lookback
    outcomes = on_port(port, root, "schedule", {}, agent_logins=("agent-bot",))
    assert completed(outcomes), outcomes
    hits = outcomes[0]
    assert hits.kind == "record_hits" and hits.status == "done", outcomes
    (pr,) = [p for p in pulls(port) if p.head_ref == "replaybook/hits"]
    today = date.today().isoformat()
    files = files_on(port, "replaybook/hits")
    assert f"last_hit: {today}" in files["playbook/rules/rule-0001.yaml"]
    assert f"last_hit: {today}" in files["playbook/rules/rule-0002.yaml"]
    assert "| rule-0001 | 2026-08-20 |" in pr.body and "| rule-0002 | never |" in pr.body
    assert "rule-0099" in pr.body  # cited, but not in the playbook: said, not recorded
    # One batch, one commit: both rule files move in a single commit on the branch.
    assert port.writes.count("commit_files") == 1 and port.branches["replaybook/hits"].commits == 1

    reset(port)  # the same window again: nothing new to write
    outcomes = on_port(port, root, "schedule", {}, agent_logins=("agent-bot",))
    assert "already in PR" in outcomes[0].summary and port.writes == []

    port.merge(pr.number)  # merging records them on the default branch
    assert f"last_hit: {today}" in files_on(port, "main")["playbook/rules/rule-0001.yaml"]


def test_without_agent_accounts_no_hit_is_counted(port, root, model):
    sound_playbook(root)
    outcomes = on_port(port, root, "schedule", {})
    assert outcomes[0].status == "skipped" and "github.agent_logins" in outcomes[0].summary
    assert not [p for p in pulls(port) if p.head_ref == "replaybook/hits"]


# ------------------------------------------------------------------ at the cap


def test_a_rule_pr_at_the_cap_retires_the_coldest_in_the_same_pr(cli, port, root, model):
    sound_playbook(root, cap=2)  # rule-0001 (hit in August) and rule-0002 (never hit): full
    assert cli("playbook", "render").code == 0
    mirror(port, root)
    issues = port_incidents(port, 2)
    model.book.add(issues[0], rule_answer(cites=issues, rule="When a worker job fails to import, install the "
                                                             "worker package in editable mode first.",
                                                        scenario={"existing": "monorepo-test-cwd"}))
    outcomes = on_port(port, root, "schedule", {})
    assert completed(outcomes), outcomes
    assert "opened PR" in distilled(outcomes)[0].summary, outcomes
    (pr,) = [p for p in pulls(port) if p.head_ref.startswith("replaybook/rule-")]
    files = files_on(port, pr.head_ref)
    new_id = pr.head_ref.removeprefix("replaybook/")
    assert f"playbook/rules/{new_id}.yaml" in files
    assert "retired_reason: cap" in files["playbook/archive/rule-0002.yaml"]
    assert "playbook/rules/rule-0002.yaml" not in files and "playbook/rules/rule-0001.yaml" in files
    assert "retires the coldest rule(s) to archive/: rule-0002" in pr.body
    assert "Closes #1" in pr.body and "Closes #2" in pr.body


def test_a_leftover_branch_gets_a_fresh_name_and_a_missing_commit_is_an_error(port, root, model):
    port_incidents(port, 2)
    port.point("replaybook/rule-0001", port.default_branch_sha())  # a branch left behind with no PR
    model.book.add(A1, rule_answer())
    outcomes = on_port(port, root, "schedule", {})
    assert completed(outcomes), outcomes
    assert [p.head_ref for p in pulls(port)] == ["replaybook/rule-0001-2"]
    assert not (root / "playbook").exists()  # distill on GitHub plans its PRs; the checkout is never written

    shutil.rmtree(root / "playbook", ignore_errors=True)  # a fresh checkout of main
    sound_playbook(root, cap=1)  # broken; the pushed commit is unknown to GitHub (a force-push raced us)
    reset(port)
    outcomes = on_port(port, root, "push", push_payload())
    assert not completed(outcomes) and "Object does not exist" in outcomes[0].summary
    assert port.calls < 10  # one failed branch creation, not a hundred
