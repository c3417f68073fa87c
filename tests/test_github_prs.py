"""Pull requests the bot opens: rule PRs from distill, and the playbook maintenance PR.

The real CLI and PyGithub run against the fake GitHub; distill asks a scripted
model served over HTTP (the Gateway and an AnswerBook), found through
ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL as in Actions. Each run starts from a
fresh copy of the checkout, as a scheduled job does.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest
from fakes.github import MAIN_SHA, FakeGitHub
from helpers import incident_yaml, make_scenario, rule_yaml, snapshot, write
from support.github import (
    A1,
    A2,
    HEAD,
    REPOSITORY,
    RULE,
    distilled,
    handle,
    incidents,
    rule_answer,
)

from bot.github import PyGithubAdapter
from bot.github.maintenance import MAINTENANCE_MARKER
from bot.github.port import GitHubError, marker



@pytest.fixture
def adapter(gh):
    a = PyGithubAdapter("octo/app", "t", gh.url, sleep=lambda s: None, seconds_between_requests=0,
                        seconds_between_writes=0)
    yield a
    a.close()


@pytest.fixture
def event(pr_event):
    """Events as Actions delivers them, with PRs opted in."""
    return pr_event


# ------------------------------------------------------------------ the port over PyGithub


def test_branches_files_and_pull_requests_through_the_adapter(gh, adapter):
    assert adapter.default_branch_sha() == MAIN_SHA
    adapter.create_branch("replaybook/rule-0001", MAIN_SHA)
    with pytest.raises(GitHubError) as taken:
        adapter.create_branch("replaybook/rule-0001", MAIN_SHA)
    assert taken.value.status == 422
    rule, branch = "playbook/rules/rule-0001.yaml", "replaybook/rule-0001"
    assert adapter.commit_files(branch, {rule: "a\n", "notes.md": "n\n"}, "add") is True
    assert adapter.commit_files(branch, {rule: "a\n"}, "same") is False  # nothing changes: no commit
    assert adapter.commit_files(branch, {rule: "b\n"}, "edit") is True
    assert gh.branch_files(branch) == {rule: "b\n", "notes.md": "n\n"}
    assert adapter.commit_files(branch, {"notes.md": None, "never-there.md": None}, "rm") is True
    assert gh.branch_files("replaybook/rule-0001") == {"playbook/rules/rule-0001.yaml": "b\n"}
    assert adapter.commit_files(branch, {"notes.md": None}, "rm") is False  # already gone
    assert sum(r.path.endswith("/git/commits") and r.method == "POST" for r in gh.requests) == 3
    pr = adapter.create_pr("Rule", f"{marker('rule-0001')}\nbody", "replaybook/rule-0001", "main")
    assert (pr.state, pr.merged, pr.head_ref) == ("open", False, "replaybook/rule-0001")
    assert adapter.find_pr_by_marker(marker("rule-0001")) == pr
    assert adapter.find_pr_by_marker(marker("rule-0002")) is None
    edited = adapter.update_pr(pr.number, body=f"{marker('rule-0001')}\nnew")
    assert edited.body.endswith("new") and gh.pulls[-1]["body"] == edited.body
    gh.close_pull(pr.number, merged=True)
    assert adapter.find_pr_by_marker(marker("rule-0001"), state="open") is None
    assert adapter.find_pr_by_marker(marker("rule-0001")).merged is True


def test_a_write_waits_out_a_secondary_rate_limit(gh):
    waits: list[float] = []
    a = PyGithubAdapter("octo/app", "t", gh.url, sleep=waits.append, seconds_between_requests=0,
                        seconds_between_writes=0)
    gh.fail_next(gh.repo_path + "/git/commits", 403, headers={"retry-after": "7"}, method="POST")
    assert a.commit_files("main", {"x.txt": "x"}, "add") is True
    a.close()
    assert waits == [7.0] and gh.branch_files("main") == {"x.txt": "x"}


# ------------------------------------------------------------------ the CLI, as Actions runs it


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


# ------------------------------------------------------------------ distill


def test_distill_opens_one_pr_per_rule_and_reruns_change_nothing(cli, gh, event, model, tmp_path):
    checkout = Checkout(cli.root, tmp_path)
    incidents(gh, 2)
    checkout.save()
    model.book.add(A1, rule_answer())
    event("schedule", {"schedule": "0 3 * * *"})
    out = handle(cli)
    assert out["code"] == 0, out
    assert len(gh.pulls) == 1, out
    (pr,) = gh.pulls
    assert (pr["head_ref"], pr["base_ref"], pr["state"]) == ("replaybook/rule-0001", "main", "open")
    assert pr["body"].startswith(marker("rule-0001")) and marker(f"cite:{A1}") in pr["body"]
    assert RULE in pr["body"] and "Merging this PR admits the rule" in pr["body"]
    files = gh.branch_files("replaybook/rule-0001")
    assert "replay: scenarios/monorepo-cwd-gen" in files["playbook/rules/rule-0001.yaml"]
    assert files["scenarios/monorepo-cwd-gen/scenario.yaml"]
    assert not any(p.startswith("playbook/proposed/") for p in files)
    first = out["api_calls"]
    assert first == gh.calls
    assert [o["status"] for o in distilled(out)] == ["done", "done"]
    assert "opened PR #3" in distilled(out)[0]["summary"]

    for _ in range(2):  # the next nights, from a fresh checkout: the same proposal updates nothing
        checkout.fresh()
        gh.reset_calls()
        out = handle(cli)
        assert out["code"] == 0, out
        assert "already current in PR #3" in distilled(out)[0]["summary"]
        assert gh.writes() == [] and len(gh.pulls) == 1
        assert out["api_calls"] < first


def test_an_open_rule_pr_is_updated_in_place(cli, gh, event, model, tmp_path):
    checkout = Checkout(cli.root, tmp_path)
    incidents(gh, 2)
    checkout.save()
    answer = model.book.add(A1, rule_answer(), times=1).answers[-1]
    event("schedule", {})
    handle(cli)
    better = RULE.replace("check for", "look for")
    model.book.add(A1, rule_answer(rule=better))
    assert answer.times == 0
    checkout.fresh()
    out = handle(cli)
    assert out["code"] == 0, out
    assert "updated PR #3" in distilled(out)[0]["summary"]
    (pr,) = gh.pulls
    assert better in pr["body"]
    assert "look for a package-local" in gh.branch_files("replaybook/rule-0001")["playbook/rules/rule-0001.yaml"]


def test_a_closed_rule_pr_comes_back_only_when_new_incidents_cite_it(cli, gh, event, model, tmp_path):
    checkout = Checkout(cli.root, tmp_path)
    incidents(gh, 2)
    checkout.save()
    model.book.add(A1, rule_answer(), times=2)  # the first two nights
    event("workflow_dispatch", {"inputs": {}})
    handle(cli)
    gh.close_pull(3)  # a maintainer said no
    checkout.fresh()
    gh.reset_calls()
    out = handle(cli)
    assert out["code"] == 0, out
    assert distilled(out)[0]["status"] == "skipped" and "closed without merging" in distilled(out)[0]["summary"]
    assert gh.writes() == [] and len(gh.pulls) == 1

    (third,) = incidents(gh, 1)  # a third incident is filed
    model.book.add(third, rule_answer(cites=(A1, A2, third)))
    checkout.fresh()
    out = handle(cli)
    assert out["code"] == 0, out
    assert [p["state"] for p in gh.pulls] == ["closed", "open"], out
    reopened = gh.pulls[1]
    assert reopened["head_ref"] == "replaybook/rule-0002"  # a new id: the refused one is never reused
    assert marker(f"cite:{third}") in reopened["body"] and "Closes #4" in reopened["body"]


def test_the_cap_on_open_rule_prs_holds_back_the_rest_and_says_so(cli, gh, event, model, monkeypatch):
    incidents(gh, 2)
    gh.add_pull(10, title="Rule rule-0000", body=f"{marker('rule-0000')}\nold", head_ref="replaybook/rule-0000")
    monkeypatch.setenv("REPLAYBOOK_MAX_OPEN_RULE_PRS", "1")
    model.book.add(A1, rule_answer())
    event("schedule", {})
    out = handle(cli)
    assert out["code"] == 0, out
    assert len(gh.pulls) == 1 and gh.writes() == []
    assert "held back by the cap of 1 open rule PRs (github.max_open_rule_prs): rule-0001" in \
        distilled(out)[-1]["summary"]


def test_distill_without_a_model_is_an_error_and_writes_nothing(cli, gh, event):
    incidents(gh, 2)
    event("schedule", {})
    out = handle(cli)
    assert out["code"] == 1
    assert [(o["kind"], o["status"]) for o in out["outcomes"]] == [("record_hits", "skipped"), ("distill", "failed"),
                                                                   ("retest", "skipped")]  # no key: nothing re-tested
    assert distilled(out)[0]["summary"].startswith("error: distill needs a model")
    assert "no agent account is configured" in out["outcomes"][0]["summary"]
    assert gh.calls == 0


def test_without_the_opt_in_nothing_is_opened(cli, gh, event, monkeypatch):
    monkeypatch.delenv("REPLAYBOOK_OPEN_PRS")
    event("schedule", {})
    out = handle(cli)
    assert out["code"] == 1 and distilled(out)[0]["status"] == "not_implemented"
    assert "REPLAYBOOK_OPEN_PRS=1" in distilled(out)[0]["summary"] and gh.calls == 0


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


def mirror(gh: FakeGitHub, root: Path) -> None:
    """The default branch on the fake holds what the checkout holds, at the pushed commit."""
    gh.state.refs["main"] = HEAD
    for path in root.rglob("*"):
        if path.is_file() and ".replaybook/" not in path.as_posix():
            gh.add_file(path.relative_to(root).as_posix(), path.read_text("utf-8"))


def test_a_sound_playbook_is_ok_without_any_api_call(cli, gh, event):
    sound_playbook(cli.root)
    assert cli("playbook", "render").code == 0
    event("push", push_payload())
    out = handle(cli)
    assert out["code"] == 0, out
    assert out["outcomes"][0]["status"] == "unchanged" and out["outcomes"][0]["summary"].startswith("ok:")
    assert out["api_calls"] == gh.calls == 0


def test_a_broken_playbook_gets_one_maintenance_pr_that_fixes_it(cli, gh, event):
    sound_playbook(cli.root, cap=1)  # two admitted rules past a cap of one, and no PLAYBOOK.md
    mirror(gh, cli.root)
    before = snapshot(cli.root)
    event("push", push_payload())
    out = handle(cli)
    assert out["code"] == 0, out
    assert snapshot(cli.root) == before  # fixed in a temp copy, never in the checkout
    (pr,) = gh.pulls
    assert pr["head_ref"] == "replaybook/maintenance" and pr["body"].startswith(MAINTENANCE_MARKER)
    assert "exceed the cap of 1" in pr["body"] and "out of sync" in pr["body"]
    assert "retires the coldest past the cap: rule-0002" in pr["body"]
    files = gh.branch_files("replaybook/maintenance")
    assert "playbook/rules/rule-0002.yaml" not in files and "playbook/rules/rule-0001.yaml" in files
    assert "retired_reason: cap" in files["playbook/archive/rule-0002.yaml"]
    assert "rule-0001" in files["playbook/PLAYBOOK.md"] and "rule-0002" not in files["playbook/PLAYBOOK.md"]
    assert "nothing: merging this PR fixes every problem" in pr["body"]
    assert out["api_calls"] == gh.calls

    gh.reset_calls()  # the next push with the same problems: one PR, edited in place, here not at all
    out = handle(cli)
    assert out["outcomes"][0]["status"] == "unchanged" and "already listed in PR #1" in out["outcomes"][0]["summary"]
    assert gh.writes() == [] and len(gh.pulls) == 1


def test_the_maintenance_pr_renders_every_host_and_keeps_the_users_bytes(cli, gh, event):
    sound_playbook(cli.root)
    write(cli.root / ".replaybook.yml", "cap: 5\nrender: [claude, agents, cursor]\n")
    assert cli("playbook", "render").code == 0
    (cli.root / "AGENTS.md").write_bytes(b"# Agents\r\nmine\r\n" + (cli.root / "AGENTS.md").read_bytes())
    write(cli.root / "playbook/rules/rule-0003.yaml", rule_yaml(
        "rule-0003", text="When a fixture is added, register it in conftest.py.") + "paths: [tests/**]\n")
    mirror(gh, cli.root)
    before = snapshot(cli.root)
    event("push", push_payload())
    out = handle(cli)
    assert out["code"] == 0, out
    assert snapshot(cli.root) == before
    (pr,) = gh.pulls
    assert "AGENTS.md: is out of sync" in pr["body"] and "renders " in pr["body"]
    files = gh.branch_files("replaybook/maintenance")
    assert files["AGENTS.md"].startswith("# Agents\r\nmine\r\n") and "[rule-0003]" in files["AGENTS.md"]
    assert "rule-0003" not in files["CLAUDE.md"]
    assert 'paths:\n  - "tests/**"' in files[".claude/rules/replaybook-rule-0003.md"]
    assert "globs: tests/**" in files[".cursor/rules/replaybook-rule-0003.mdc"]
    assert "nothing: merging this PR fixes every problem" in pr["body"]


def test_problems_no_machine_can_fix_fail_and_name_themselves(cli, gh, event):
    sound_playbook(cli.root)
    assert cli("playbook", "render").code == 0
    write(cli.root / "playbook/rules/rule-0003.yaml", "id: rule-0003\nrule: [not, text]\n")
    event("push", push_payload())
    out = handle(cli)
    assert out["code"] == 1
    assert out["outcomes"][0]["status"] == "failed" and "none fixable mechanically" in out["outcomes"][0]["summary"]
    assert "rule-0003" in out["outcomes"][0]["summary"] and gh.writes() == []


# ------------------------------------------------------------------ record_hits


def test_rule_hits_from_the_agents_merged_prs_and_commits_land_in_one_pr(cli, gh, event, model, monkeypatch):
    sound_playbook(cli.root)
    mirror(gh, cli.root)
    monkeypatch.setenv("REPLAYBOOK_AGENT_LOGINS", "agent-bot")
    gh.add_pull(20, title="Fix the worker tests", body="Ran them from the package [rule-0001]", user="agent-bot",
                head_ref="fix-worker", state="closed", merged=True)
    gh.add_pull(21, title="Docs [rule-0002]", body="a person cites a rule: no hit", user="alice",
                head_ref="docs", state="closed", merged=True)
    gh.add_commit("Run the schema check first [rule-0002] [rule-0099]", author="agent-bot")
    gh.add_commit("Old work [rule-0002]", author="agent-bot", date="2026-01-01T00:00:00Z")  # before the lookback
    event("schedule", {})
    out = handle(cli)
    assert out["code"] == 0, out
    hits = out["outcomes"][0]
    assert hits["kind"] == "record_hits" and hits["status"] == "done", out
    (pr,) = [p for p in gh.pulls if p["head_ref"] == "replaybook/hits"]
    today = date.today().isoformat()
    files = gh.branch_files("replaybook/hits")
    assert f"last_hit: {today}" in files["playbook/rules/rule-0001.yaml"]
    assert f"last_hit: {today}" in files["playbook/rules/rule-0002.yaml"]
    assert "| rule-0001 | 2026-08-20 |" in pr["body"] and "| rule-0002 | never |" in pr["body"]
    assert "rule-0099" in pr["body"]  # cited, but not in the playbook: said, not recorded
    # One batch, one commit: both rule files move in a single commit on the branch.
    assert sum(r.method == "POST" and r.path.endswith("/git/commits") for r in gh.writes()) == 1
    assert not [r for r in gh.writes() if "/contents/" in r.path]

    gh.reset_calls()  # the same window again: nothing new to write
    out = handle(cli)
    assert "already in PR" in out["outcomes"][0]["summary"] and not [r for r in gh.writes()]

    gh.close_pull(pr["number"], merged=True)  # merging records them on the default branch
    assert f"last_hit: {today}" in gh.branch_files("main")["playbook/rules/rule-0001.yaml"]


def test_without_agent_accounts_no_hit_is_counted(cli, gh, event, model):
    sound_playbook(cli.root)
    event("schedule", {})
    out = handle(cli)
    assert out["outcomes"][0]["status"] == "skipped" and "github.agent_logins" in out["outcomes"][0]["summary"]
    assert not [p for p in gh.pulls if p["head_ref"] == "replaybook/hits"]


# ------------------------------------------------------------------ at the cap


def test_a_rule_pr_at_the_cap_retires_the_coldest_in_the_same_pr(cli, gh, event, model):
    sound_playbook(cli.root, cap=2)  # rule-0001 (hit in August) and rule-0002 (never hit): full
    assert cli("playbook", "render").code == 0
    mirror(gh, cli.root)
    issues = incidents(gh, 2)
    model.book.add(issues[0], rule_answer(cites=issues, rule="When a worker job fails to import, install the "
                                                             "worker package in editable mode first.",
                                                        scenario={"existing": "monorepo-test-cwd"}))
    event("schedule", {})
    out = handle(cli)
    assert out["code"] == 0, out
    assert "opened PR" in distilled(out)[0]["summary"], out
    (pr,) = [p for p in gh.pulls if p["head_ref"].startswith("replaybook/rule-")]
    files = gh.branch_files(pr["head_ref"])
    new_id = pr["head_ref"].removeprefix("replaybook/")
    assert f"playbook/rules/{new_id}.yaml" in files
    assert "retired_reason: cap" in files["playbook/archive/rule-0002.yaml"]
    assert "playbook/rules/rule-0002.yaml" not in files and "playbook/rules/rule-0001.yaml" in files
    assert "retires the coldest rule(s) to archive/: rule-0002" in pr["body"]
    assert "Closes #1" in pr["body"] and "Closes #2" in pr["body"]


def test_a_leftover_branch_gets_a_fresh_name_and_a_missing_commit_is_an_error(cli, gh, event, model):
    incidents(gh, 2)
    gh.state.refs["replaybook/rule-0001"] = MAIN_SHA  # a branch left behind with no PR
    model.book.add(A1, rule_answer())
    event("schedule", {})
    out = handle(cli)
    assert out["code"] == 0, out
    assert [p["head_ref"] for p in gh.pulls] == ["replaybook/rule-0001-2"]
    assert not (cli.root / "playbook").exists()  # distill on GitHub plans its PRs; the checkout is never written

    shutil.rmtree(cli.root / "playbook", ignore_errors=True)  # a fresh checkout of main
    sound_playbook(cli.root, cap=1)  # broken; the pushed commit is unknown to GitHub (a force-push raced us)
    event("push", push_payload())
    gh.reset_calls()
    out = handle(cli)
    assert out["code"] == 1 and "Object does not exist" in out["outcomes"][0]["summary"]
    assert gh.calls < 10  # one failed branch creation, not a hundred
