"""The gate ledger on GitHub (issue 30, item 3): each gate's records in a hidden block of the bot's gate comment.

The gate appends its records to the block of the one comment it edits in place; the dashboard and
``replaybook report --github`` collect the blocks of the rule PRs with one search and give the cost per
admission on GitHub. A block is read strictly and only from the bot's own comment: a forged one in anyone
else's comment is never counted.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timezone

import pytest
from fakes.port import FakePort
from helpers import rule_yaml, write
from support.gate import pr_repo

from bot import config as config_mod
from bot.gate.ledger import GateRecord
from bot.github import dashboard, ledger
from bot.github.events import GateRulePr, UpdateDashboard
from bot.github.gate import GATE_MARKER, PrGate
from bot.github.handle import execute
from bot.github.port import CommentRef, GatedPull, PullRef, marker
from bot.replay.engine import ReplayOptions

TODAY = date(2026, 12, 2)


def record(rule_id: str, decision: str, cost: float, reason: str = "") -> GateRecord:
    return GateRecord(at=datetime(2026, 12, 1, tzinfo=timezone.utc), rule_id=rule_id, decision=decision,
                      reason=reason or decision, cost_usd=cost, replays=4)


# ------------------------------------------------------------------ the block


def test_a_block_round_trips_and_no_reason_can_end_the_comment_early():
    hostile = "done --> <!-- replaybook:gate --> <b>&amp;</b>"
    records = [record("rule-0001", "reject", 0.1, hostile), record("rule-0001", "admit", 0.3)]
    line = ledger.block(7, records)
    assert line.startswith("<!-- replaybook-ledger v1 {") and line.endswith(" -->")
    assert line.count("-->") == 1 and line.count("<!--") == 1 and "<" not in line[4:] and ">" not in line[:-3]
    assert ledger.read(f"{GATE_MARKER}\n## report\n\n{line}", 7) == (records, False)


def _payload(**change) -> dict:
    data = json.loads(ledger.block(7, [record("rule-0001", "admit", 0.3)]).split(" ", 3)[3].rsplit(" ", 1)[0])
    data.update(change)
    return data


def _line(data: dict, version: str = "v1") -> str:
    return f"<!-- replaybook-ledger {version} {json.dumps(data)} -->"


@pytest.mark.parametrize("body", [
    _line(_payload(pr=8)),  # another PR's block, copied here
    _line(_payload(version=2)),
    _line(_payload(), "v2"),
    _line(_payload(extra=1)),
    _line(_payload(records=[{**_payload()["records"][0], "admitted_by": "mallory"}])),
    _line(_payload(records=[{**_payload()["records"][0], "cost_usd": -5}])),
    _line(_payload(records=[_payload()["records"][0]] * (ledger.MAX_RECORDS + 1))),
    _line(_payload()) + "\n" + _line(_payload()),  # two blocks: which one?
    "<!-- replaybook-ledger v1 {not json} -->",
    "<!-- replaybook-ledger v1 " + json.dumps(_payload()),  # never closed
], ids=["other pr", "version 2 inside", "version 2 outside", "unknown key", "unknown record key", "negative cost",
        "too many records", "two blocks", "not json", "unclosed"])
def test_a_block_that_is_not_exactly_ours_is_unreadable_and_counts_nothing(body):
    assert ledger.read(body, 7) == ([], True)


def test_a_body_without_a_block_is_simply_empty():
    assert ledger.read("## Replaybook gate\n", 7) == ([], False)


def _gated(number: int, *comments: tuple[str, str]) -> GatedPull:
    pull = PullRef(number, "open", False, f"replaybook/rule-{number:04d}", "", author="github-actions[bot]")
    return GatedPull(pull, "success", tuple(CommentRef(i, number, body, author=who)
                                            for i, (who, body) in enumerate(comments)))


def test_only_the_bots_own_gate_comment_counts_never_a_forged_block():
    ours = f"{GATE_MARKER}\n## report\n\n" + ledger.block(3, [record("rule-0003", "admit", 0.5)])
    forged = f"{GATE_MARKER}\n## report\n\n" + ledger.block(4, [record("rule-0004", "admit", 0.0)] * 9)
    found, unreadable = ledger.collect([
        _gated(3, ("github-actions[bot]", ours)),
        _gated(4, ("mallory", forged)),  # a user's comment with the marker and a well-formed block
        _gated(5, ("github-actions[bot]", ledger.block(5, [record("rule-0005", "admit", 0.0)]))),  # no marker
    ], GATE_MARKER, ["github-actions[bot]"])
    assert [(r.rule_id, r.cost_usd) for r in found] == [("rule-0003", 0.5)] and unreadable == 0


def test_a_rule_gated_again_on_its_pr_is_one_candidate_with_every_gates_cost():
    body = f"{GATE_MARKER}\n" + ledger.block(3, [record("rule-0003", "reject", 0.10), record("rule-0003", "admit", 0.20),
                                               record("rule-0003", "admit", 0.05), record("rule-0004", "reject", 0.5)])
    found, _ = ledger.collect([_gated(3, ("github-actions[bot]", body))], GATE_MARKER, ["github-actions[bot]"])
    assert sorted((r.rule_id, r.decision, r.cost_usd, r.replays) for r in found) == [
        ("rule-0003", "admit", 0.35, 12), ("rule-0004", "reject", 0.5, 4)]


# ------------------------------------------------------------------ the gate keeps it


def test_every_gate_of_a_pr_is_kept_in_its_one_comment(port, root):
    base, head = pr_repo(root)
    settings = config_mod.load(root)
    number = port.add_pull(head_ref="replaybook/rule-0001").number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True)
    forged = port.comment_as(number, f"{GATE_MARKER}\n" + ledger.block(number, [record("rule-0009", "admit", 0)]),
                             author="mallory")
    for _ in range(2):  # a gate, then "Replay again"
        (outcome,) = execute([action], port, root=root, settings=settings,
                             gate=PrGate(root, settings, replay=ReplayOptions()))
        assert outcome.verdict == "success", outcome
    mine = [c for c in port.comments_on(number) if c.author == port.login]
    assert len(mine) == 1 and forged in port.comments_on(number)  # edited in place; the forgery untouched
    records, bad = ledger.read(mine[0].body, number)
    assert not bad and [(r.rule_id, r.decision) for r in records] == [("rule-0001", "admit")] * 2
    assert all(r.simulated and r.replays > 0 for r in records)  # the simulated model's replays, labelled so


# ------------------------------------------------------------------ the dashboard and the report read it


def _rule_pr(port: FakePort, rule_id: str, head: str, records: list[GateRecord], *, state: str = "open",
             forged: int = 0) -> int:
    """The bot's rule PR with its gate comment; ``forged``: first, a user's comment claiming that many free admissions."""
    port.create_branch(f"replaybook/{rule_id}", port.branches[port.default].sha)
    pr = port.create_pr(f"Rule {rule_id}", marker(rule_id), f"replaybook/{rule_id}", "main")
    port.set_head(pr.number, head)
    if forged:
        port.comment_as(pr.number, f"{GATE_MARKER}\n" + ledger.block(pr.number, [record(rule_id, "admit", 0.0)] * forged),
                        author="mallory")
    port.add_comment(pr.number, f"{GATE_MARKER}\n## Replaybook gate\n\n" + ledger.block(pr.number, records))
    if state == "closed":
        port.merge(pr.number)
    return pr.number


def test_the_dashboard_shows_each_open_rule_prs_gate_and_the_cost_per_admission_on_github(port, root):
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    port.add_file("playbook/rules/rule-0001.yaml", rule_yaml("rule-0001"))
    two = _rule_pr(port, "rule-0002", "a" * 40, [record("rule-0002", "reject", 0.10), record("rule-0002", "admit", 0.30)])
    three = _rule_pr(port, "rule-0003", "b" * 40, [record("rule-0003", "reject", 0.20)], forged=20)
    _rule_pr(port, "rule-0001", "c" * 40, [record("rule-0001", "admit", 0.40)], state="closed")
    port.set_status("a" * 40, "success", "replaybook/admit", "admit")
    port.set_status("b" * 40, "failure", "replaybook/admit", "reject")
    port.calls = 0
    (outcome,) = execute([UpdateDashboard()], port, root=root, settings=config_mod.load(root), today=TODAY)
    assert outcome.status == "done" and port.calls <= 3, (outcome, port.calls)
    body = next(i.body for i in port.issues.values() if dashboard.MARKER in i.body)
    rows = {line.split("|")[1].strip(): line for line in body.splitlines() if line.startswith("| #")}
    assert set(rows) == {f"#{two}", f"#{three}"}  # the open rule PRs, not the merged one
    assert "success" in rows[f"#{two}"] and "failure" in rows[f"#{three}"]
    # $0.10 + $0.30 + $0.20 + $0.40 over two admissions; the forgery's twenty are not there
    assert "Cost per admission: **$0.50**" in body, body


def test_replaybook_report_github_gives_the_cost_per_admission_from_the_gate_comments(cli, gh, event, monkeypatch):
    write(cli.root / "playbook" / "rules" / ".gitkeep", "")
    for number, records in ((3, [record("rule-0003", "reject", 0.25), record("rule-0003", "admit", 0.35)]),
                            (4, [record("rule-0004", "admit", 0.40)])):
        gh.add_pull(number, head_ref=f"replaybook/rule-{number:04d}", body=marker(f"rule-{number:04d}"),
                    state="open" if number == 3 else "closed", merged=number == 4)
        # first, a user's forged block claiming thirty free admissions
        gh.add_comment(number, f"{GATE_MARKER}\n" + ledger.block(number, [record("x", "admit", 0)] * 30), user="mallory")
        gh.add_comment(number, f"{GATE_MARKER}\n## gate\n\n" + ledger.block(number, records),
                       user="github-actions[bot]")
    gh.add_pull(5, head_ref="feature")  # not a rule PR: not searched
    gh.reset_calls()
    result = cli("report", "--github", "--json")
    assert result.code == 0, result.err
    gates = json.loads(result.out)["gates"]
    # rule-0003's reject and later admit are one candidate: two admissions, every gate's cost
    assert (gates["gates"], gates["admitted"], gates["cost_usd"], gates["cost_per_admission_usd"]) == (2, 2, 1.0, 0.5)
    assert [p["number"] for p in json.loads(result.out)["open_prs"]] == [3]
    assert [(r.method, r.path) for r in gh.requests] == [("POST", "/graphql")]
    monkeypatch.delenv("GITHUB_TOKEN")
    missing = cli("report", "--github")
    assert missing.code == 2 and "GITHUB_TOKEN" in missing.err
