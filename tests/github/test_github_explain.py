"""`/replaybook explain` per trial (issue 30, item 2): what the gate kept of each failing trial, read back.

The gate keeps, in its comment's hidden ledger block, a small bounded summary of each failing trial with the
rule: the check that failed and why, at most five commands around it, and the rule text the agent saw with its
hash. ``explain`` reads it back from the bot's own gate comment. Every piece of it is hostile text (a scenario's
agent ran those commands): it reaches the reply only neutralised, and the block only as escaped JSON.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path

from fakes.github import BOT_LOGIN
from fakes.port import FakePort
from support.gate import RULE, pr_repo
from support.github import REPOSITORY, handle

from bot import config as config_mod
from bot._util.text_safety import neutralise
from bot.gate import ledger as gate_ledger
from bot.gate.ledger import MAX_SCOPE, GateRecord
from bot.gate.result import GateResult, Side, SuiteEntry
from bot.github import ledger
from bot.github.command_run import reply_key
from bot.github.events import GateRulePr
from bot.github.gate import GATE_MARKER, PrGate
from bot.github.handle import execute
from bot.github.port import marker
from bot.replay.checks import CheckResult
from bot.replay.engine import ReplayOptions, TrialResult

HOSTILE = "echo '--> @mallory ${{ secrets.TOKEN }} [win](https://evil.example) <!-- x' > wrong.txt"
RULE_TEXT = "When the task says right, write right.txt. @boss [see](https://evil.example) -->"


def failing(trial: int, argv: list[str], *, scenario: str = "own", check: str = "succeeds test -f right.txt",
            detail: str = "exit 1") -> TrialResult:
    evidence = [{"seq": 3 + i, "argv": argv, "cwd": ".", "exit_code": 0} for i in range(7)]
    return TrialResult(scenario=scenario, trial=trial, verdict="failed", reason=f"{check}: {detail}",
                       checks=[CheckResult("exists README.md", True, "all present"),
                               CheckResult(check, False, detail, evidence)])


def passing(trial: int, scenario: str = "own") -> TrialResult:
    return TrialResult(scenario=scenario, trial=trial, verdict="passed", reason="",
                       checks=[CheckResult("succeeds test -f right.txt", True, "exit 0")])


def result(after: list[TrialResult], suite: list[SuiteEntry] = ()) -> GateResult:
    return GateResult("rule-0001", RULE_TEXT, "reject", "replay not discriminative: the scenario still failed",
                      before=Side("without the rule", "own", [failing(i, ["python", "-m", "pytest"]) for i in range(3)]),
                      after=Side("with the rule", "own", after), suite=list(suite), replays=9)


# ------------------------------------------------------------------ what is kept


def test_each_failing_trial_with_the_rule_is_kept_small():
    gate = result([failing(0, ["bash", "-c", HOSTILE]), passing(1), failing(2, ["bash", "-c", "x" * 5000])],
                  suite=[SuiteEntry("victim", Side("baseline", "victim", [passing(0, "victim")]),
                                    Side("with the rule", "victim", [failing(0, ["rm", "-rf", "."], scenario="victim",
                                                                             check="unchanged src/")]),
                                    judged=True, regressed=True)])
    detail = gate_ledger.detail_of(gate)
    assert detail.rule_text == neutralise(RULE_TEXT) and len(detail.rule_hash) == 16  # kept neutralised
    assert [(n.scenario, n.trial, n.check) for n in detail.trials] == [
        ("own", 0, "succeeds test -f right.txt"), ("own", 2, "succeeds test -f right.txt"),
        ("victim", 0, "unchanged src/")]  # the with-the-rule side, then the regressed suite scenario
    assert all(len(n.commands) <= 5 and all(len(c) <= 160 for c in n.commands) for n in detail.trials)
    assert detail.trials[0].commands[0] == neutralise("bash -c " + "'" + HOSTILE.replace("'", "'\"'\"'") + "'")
    assert "@mallory" not in json.dumps(detail.model_dump()) and "@boss" not in detail.rule_text


def test_the_detail_is_bounded_however_many_trials_fail_and_the_block_stays_small():
    many = [failing(i, ["bash", "-c", f"{HOSTILE} {'y' * 900}"], check="c" * 900, detail="d" * 900) for i in range(40)]
    widest = dataclasses.replace(result(many), task_types=tuple(f"{i}" + "t" * 79 for i in range(MAX_SCOPE)),
                                 paths=tuple(f"{i}" + "p" * 119 for i in range(MAX_SCOPE)))
    detail = gate_ledger.detail_of(widest)
    assert len(detail.task_types) == len(detail.paths) == MAX_SCOPE
    assert len(detail.trials) == gate_ledger.MAX_NOTES and detail.more == 40 - gate_ledger.MAX_NOTES
    record = GateRecord(at=datetime(2026, 12, 1, tzinfo=timezone.utc), rule_id="rule-0001", decision="reject",
                        reason="r", detail=detail)
    line = ledger.block(7, [record] * ledger.MAX_RECORDS)
    assert len(line) < 45_000  # the comment's limit is 65,536: the report gets what is left
    assert line.count("-->") == 1 and line.count("<!--") == 1  # no command can end the hidden block early
    records, bad = ledger.read(f"{GATE_MARKER}\n{line}", 7)
    assert not bad and len(records) == ledger.MAX_RECORDS
    kept = [r for r in records if r.detail is not None]
    assert 1 <= len(kept) <= ledger.DETAILED and kept == records[-len(kept):]  # the newest gates keep theirs


def test_the_rules_scope_is_kept_as_the_gate_saw_it_or_as_unknown():
    def scope(task_types, paths):
        detail = gate_ledger.detail_of(dataclasses.replace(result([failing(0, ["ls"])]), task_types=task_types, paths=paths))
        return detail.task_types, detail.paths

    assert scope(("testing",), ("packages/worker/**",)) == (["testing"], ["packages/worker/**"])
    assert scope((), ()) == ([], [])  # every task, every file: known
    assert scope(None, None) == (None, None)  # the gate read no rule file
    assert scope(tuple(f"t{i}" for i in range(MAX_SCOPE + 1)), ()) == (None, [])  # too wide: unknown, never cut
    assert scope(("testing",), ("p" * 121,)) == (["testing"], None)
    assert scope(("${{ secrets.TOKEN }}",), ("a -->",)) == (None, None)  # not a rule's own slug or glob


def test_a_block_with_a_detail_that_is_not_exactly_ours_is_unreadable():
    record = GateRecord(at=datetime(2026, 12, 1, tzinfo=timezone.utc), rule_id="rule-0001", decision="reject",
                        reason="r", detail=gate_ledger.detail_of(result([failing(0, ["ls"])])))
    line = ledger.block(7, [record])
    data = json.loads(line.split(" ", 3)[3].rsplit(" ", 1)[0])
    data["records"][0]["detail"]["trials"][0]["admitted_by"] = "mallory"
    assert ledger.read(f"<!-- replaybook-ledger v1 {json.dumps(data)} -->", 7) == ([], True)


# ------------------------------------------------------------------ the real gate keeps it


def test_the_gate_keeps_the_failing_trials_of_a_rule_that_does_not_help(port: FakePort, root: Path, tmp_path):
    base, head = pr_repo(root, own={"branch_on": "a phrase the rule never says"})  # the rule changes nothing
    settings = config_mod.load(root)
    number = port.add_pull(head_ref="replaybook/rule-0001").number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True)
    (outcome,) = execute([action], port, root=root, settings=settings,
                         gate=PrGate(root, settings, replay=ReplayOptions(runs_dir=tmp_path / "runs")))
    assert outcome.verdict == "failure", outcome
    [comment] = [c for c in port.comments_on(number) if c.author == port.login]
    [record] = ledger.read(comment.body, number)[0]
    assert record.detail is not None and record.detail.trials, record
    note = record.detail.trials[0]
    assert note.side == "with the rule" and note.scenario == "own" and note.check.startswith("succeeds")
    assert any("wrong.txt" in c for c in note.commands), note  # read from the trial's trace
    assert record.detail.rule_text == RULE  # the text the agent saw, whole
    assert (record.detail.task_types, record.detail.paths) == ([], [])  # its scope, as the gate read it


# ------------------------------------------------------------------ explain reads it, neutralised


def test_explain_shows_each_failing_trial_neutralised(cli, gh, event):
    gh.set_role("maint", "admin")
    gh.add_pull(3)
    record = GateRecord(at=datetime(2026, 12, 1, tzinfo=timezone.utc), rule_id="rule-0001", decision="reject",
                        reason="replay not discriminative", replays=9,
                        detail=gate_ledger.detail_of(result([failing(0, ["bash", "-c", HOSTILE]), passing(1)])))
    gh.state.comments[999] = {"id": 999, "issue_number": 3, "body": f"{GATE_MARKER}\nreport\n{ledger.block(3, [record])}",
                              "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z",
                              "user": BOT_LOGIN}
    comment = gh.add_comment(3, "/replaybook explain", user="maint")
    event("issue_comment", {"action": "created", "repository": REPOSITORY, "sender": {"login": "maint"},
                            "issue": {"number": 3, "state": "open", "title": "t", "labels": [],
                                      "pull_request": {"url": "https://api.github.com/repos/octo/app/pulls/3"}},
                            "comment": {"id": comment["id"], "body": comment["body"], "user": {"login": "maint"}}})
    assert handle(cli)["code"] == 0
    [reply] = [c["body"] for c in gh.comments_on(3) if marker(reply_key(comment["id"])) in c["body"]]
    assert "succeeds test -f right.txt" in reply and "trial 0" in reply and "trial 1" not in reply
    assert "wrong.txt" in reply and "write right.txt" in reply and record.detail.rule_hash in reply
    for raw in ("@mallory", "@boss", "${{", "](https://evil", "<!-- x", "<!--x"):
        assert raw not in reply, raw
    assert reply.count("-->") == 1 and reply.startswith(marker(reply_key(comment["id"])))  # only the reply's marker
    assert len(reply) < 20_000


def test_a_gate_that_also_reports_unproven_instructions_keeps_its_records(port: FakePort, root: Path):
    from helpers import write
    from support.github import git

    base, _ = pr_repo(root)
    write(root / "pkg" / "AGENTS.md", "- Always run the linter first.\n")  # instructions no replay proves
    git(root, "add", "-A")
    git(root, "commit", "-qm", "and a nested AGENTS.md")
    head = git(root, "rev-parse", "HEAD")
    settings = config_mod.load(root)
    number = port.add_pull(head_ref="replaybook/rule-0001").number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True)
    (outcome,) = execute([action], port, root=root, settings=settings,
                         gate=PrGate(root, settings, replay=ReplayOptions()))
    assert outcome.verdict == "success", outcome
    [comment] = [c for c in port.comments_on(number) if c.author == port.login]
    assert "pkg/AGENTS.md" in comment.body  # reported, not failed (the default)
    [record] = ledger.read(comment.body, number)[0]  # and the gate's record is still kept
    assert record.rule_id == "rule-0001" and record.decision == "admit" and record.detail is not None
