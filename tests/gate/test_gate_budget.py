"""`gate.budget` and the third verdict, inconclusive.

A gate whose budget ends before its tests decide neither admits nor rejects: it answers inconclusive (exit 1 with its
own reason), leaves the rule in `playbook/proposed/`, keeps its trials in the cache (the same gate goes on from
there) and says how many more replays would decide. The budget counts fresh replays (cache hits are free; the
do-nothing control and trials run ahead count) and is never exceeded.
"""

from __future__ import annotations

import json

from helpers import snapshot, write
from support.gate import book, gate, mini_scenario, setup

from bot.gate import ledger


def _suite(root, n: int = 3) -> None:
    for i in range(n):
        mini_scenario(root, f"other{i}", branch_on="zzz no rule says this", inverse=True)  # passes whatever it is told


def test_a_budget_is_never_exceeded_and_the_gate_answers_inconclusive(root):
    path = setup(root)
    _suite(root)
    full = gate(root, path, cache_dir=None, jobs=1)  # what the whole gate takes, with no cache and no budget
    assert full.decision == "admit", full.reason
    assert full.fresh_replays == full.replays > 6 and full.speculative == 0
    for budget in (1, 4, full.fresh_replays - 1):
        for jobs in (1, 3):
            result = gate(root, path, cache_dir=None, budget_replays=budget, jobs=jobs)
            assert result.fresh_replays <= budget, (budget, jobs, result.fresh_replays)
            assert result.replays + result.speculative == result.fresh_replays
            if jobs == 3 and result.decision == "admit":
                continue  # trials run ahead may take the place of ones a one-job gate ran
            assert result.decision == "inconclusive", (budget, jobs, result.reason)
            assert result.more_replays is not None and result.more_replays > 0 and result.most_replays >= 1
            assert f"budget of {budget} replays" in result.reason and "more replays would decide" in result.reason
    # A budget the whole gate fits in changes nothing.
    fits = gate(root, path, cache_dir=None, budget_replays=full.fresh_replays, jobs=1)
    assert fits.decision == "admit" and fits.fresh_replays == full.fresh_replays


def test_cache_hits_are_free_so_a_rerun_goes_on_where_the_budget_stopped(root):
    path = setup(root)
    _suite(root)
    first = gate(root, path, budget_replays=5, jobs=1)
    assert first.decision == "inconclusive" and first.fresh_replays == 5
    assert "its trials are cached" in first.reason
    second = gate(root, path, budget_replays=5, jobs=1)  # the same 5 read from the cache, 5 fresh ones more
    assert second.cache_hits >= 5 and second.fresh_replays <= 5
    # Planned from the cache, the replays still to run shrink as the cache fills.
    assert second.decision == "admit" or second.more_replays < first.more_replays
    while second.decision == "inconclusive":
        second = gate(root, path, budget_replays=5, jobs=1)
    assert second.decision == "admit"
    assert gate(root, path, budget_replays=1, jobs=1).fresh_replays == 0  # all of it cached now: nothing is spent


def test_a_dollar_budget_starts_a_replay_only_if_its_cap_still_fits(root):
    path = setup(root)  # each scenario caps a replay at $1.00
    _suite(root)
    result = gate(root, path, cache_dir=None, budget_usd=2.5, jobs=3)
    assert result.decision == "inconclusive" and "$2.50" in result.reason
    # The control costs nothing; two replays could cost up to $2, a third would not fit.
    assert result.fresh_replays == 3 and result.cost_usd + result.speculative_cost_usd <= 2.5


def test_a_regression_found_within_the_budget_still_rejects(root):
    path = setup(root)
    mini_scenario(root, "victim", branch_on="write right.txt", inverse=True)  # the rule's words make it fail
    _suite(root, 2)
    full = gate(root, path, cache_dir=None, jobs=1)
    assert full.decision == "reject", full.reason
    # Enough for the own scenario and the victim's test, not for every suite scenario's.
    result = gate(root, path, cache_dir=None, budget_replays=full.fresh_replays - 1, jobs=1)
    assert result.decision in ("reject", "inconclusive")
    if result.decision == "inconclusive":
        assert not result.regressions


def test_inconclusive_end_to_end_exit_1_its_reason_the_rule_stays_proposed(cli, root):
    path = setup(root)
    _suite(root)
    write(root / ".replaybook.yml", "gate:\n  budget: {replays: 4}\n")
    cli("playbook", "render")
    before = snapshot(root / "playbook") | snapshot(root / "incidents")
    result = cli("gate", str(path), "--admit", "--trials", "3")
    assert result.code == 1, result.err
    assert "⏳ Replaybook gate: inconclusive `rule-0001`" in result.out
    assert "more replays would decide" in result.out and "stays proposed" in result.out
    assert "rule-0001: inconclusive:" in result.err
    assert snapshot(root / "playbook") | snapshot(root / "incidents") == before
    assert path.exists() and not (root / "playbook" / "rules" / "rule-0001.yaml").exists()
    assert any((root / ".replaybook" / "cache").rglob("*.json")), "its trials are cached"
    records, _ = ledger.read(root)
    assert [(r.decision, r.reason_kind) for r in records] == [("inconclusive", "inconclusive")]
    data = json.loads(cli("gate", str(path), "--json", "--trials", "3").out)
    assert data["decision"] == "inconclusive" and data["more_replays"] > 0 and data["fresh_replays"] <= 4


def test_an_inconclusive_gate_is_not_a_refusal(root):
    from bot.distill import refusals

    path = setup(root)
    _suite(root)
    result = gate(root, path, budget_replays=3)
    ledger.append(root, ledger.record_of(result))
    assert result.decision == "inconclusive"
    assert refusals.local(book(root), root).open == []  # not offered to distill as refused, not archived
    assert not refusals.retryable(ledger.record_of(result))


def test_a_bad_budget_is_a_clear_error_and_changes_nothing(cli, root):
    path = setup(root)
    for text, words in (("gate:\n  budget: {}\n", "replays"), ("gate:\n  budget: {replays: 0}\n", "replays"),
                        ("gate:\n  budget: {usd: -1}\n", "usd"), ("gate:\n  budget: {runs: 4}\n", "runs"),
                        ("gate:\n  unreached: twice\n", "unreached")):
        write(root / ".replaybook.yml", text)
        before = snapshot(root)
        bad = cli("gate", str(path), "--trials", "3")
        assert bad.code == 2, (text, bad.err)
        assert ".replaybook.yml" in bad.err and words in bad.err, bad.err
        assert "Traceback" not in bad.err
        assert snapshot(root) == before
