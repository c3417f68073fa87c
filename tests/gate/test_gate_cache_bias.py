"""Baseline reuse: after an admission, no suite replay is repeated that the admitted gate already ran.

A candidate's trials are keyed apart from baseline trials (``trial_key(..., arm=...)``), so nothing a gate runs
with a rule under test is ever read as a baseline by accident. At admission, and only then, the admitted gate's
trials with its rule are carried over as the new playbook's baseline (``bot.gate.reuse.carry_over``), where the new
playbook renders to the very text they ran with. docs/gate.md ("Baseline reuse") says why that keeps the next
gate's guarantees: the carried trials can only make it stricter.
"""

from __future__ import annotations

from datetime import date

from support.gate import book, candidate, gate, mini_scenario, setup

from bot.gate import reuse
from bot.gate.decision import GateOptions
from bot.replay.engine import ReplayOptions


def _trials(side) -> list[tuple[int, str, float]]:
    return [(t.trial, t.verdict, t.duration_s) for t in side.scored]


def _opts(root) -> GateOptions:
    return GateOptions(replay=ReplayOptions(), cache_dir=root / ".cache", suite_trials=3)


def _admit_first(root):
    first = setup(root)  # rule-0001 fixes scenario `own`
    for i in range(3):
        mini_scenario(root, f"other{i}", branch_on="zzz no rule says this", inverse=True)  # passes whatever it is told
    mini_scenario(root, "own2", branch_on="write right2.txt")
    admitted = gate(root, first, jobs=1)
    assert admitted.decision == "admit", admitted.reason
    with_rule = {e.scenario: _trials(e.candidate) for e in admitted.suite if e.candidate is not None}
    with_rule["own"] = _trials(admitted.after)
    assert len(with_rule) == 5 and all(with_rule.values())
    playbook = book(root)
    playbook.admit(first, date(2026, 11, 2))
    return admitted, with_rule, playbook


def test_after_an_admission_no_suite_replay_the_admitted_gate_ran_is_repeated(root):
    admitted, with_rule, playbook = _admit_first(root)
    carried = reuse.carry_over(playbook, admitted, root / "scenarios", _opts(root))
    assert carried == sum(len(t) for t in with_rule.values())

    second = candidate(root, "rule-0002", text="When a task says make it right, write right2.txt as well.",
                       sid="own2")
    result = gate(root, second, jobs=1)
    assert result.decision == "admit", result.reason
    judged = {e.scenario: e for e in result.suite}
    for sid, trials in with_rule.items():
        if sid == "own2":
            continue  # the second gate's own scenario: its before side is replayed with the new playbook below
        base = _trials(judged[sid].baseline)
        # Every baseline trial the second gate read at an index the first gate ran with its rule is that very trial.
        overlap = [t for t in base if t[0] in {i for i, _, _ in trials}]
        assert overlap and set(overlap) <= set(trials), (sid, base, trials)
    # own2's trials with rule-0001 are the before side of rule-0002: read, not replayed.
    assert set(_trials(result.before)) <= set(with_rule["own2"]) and result.before.n
    # Baselines of 3 trials: each suite scenario's whole baseline was carried, so none was replayed.
    assert all(len(_trials(judged[sid].baseline)) == 3 for sid in with_rule if sid not in ("own2",))


def test_without_the_carry_the_next_baseline_is_drawn_afresh(root):
    _admit_first(root)  # admitted, but nothing carried: the arms stay apart
    second = candidate(root, "rule-0002", text="When a task says make it right, write right2.txt as well.",
                       sid="own2")
    result = gate(root, second, jobs=1)
    assert result.cache_hits == 0


def test_nothing_is_carried_where_the_new_playbook_renders_another_text(root):
    admitted, _, playbook = _admit_first(root)
    # Another rule admitted after the gate: the playbook is no longer the text the trials ran with.
    other = candidate(root, "rule-0003", text="When a task says make it right, write right3.txt as well.",
                      sid="own2")
    playbook.admit(other, date(2026, 11, 3))
    assert reuse.carry_over(book(root), admitted, root / "scenarios", _opts(root)) == 0


def test_the_cli_carries_the_admitted_gate_s_trials(cli, root):
    first = setup(root)
    mini_scenario(root, "other0", branch_on="zzz no rule says this", inverse=True)
    assert cli("gate", str(first), "--admit", "--trials", "3", "--jobs", "1").code == 0
    second = candidate(root, "rule-0002", text="When a task says make it right, write right2.txt as well.",
                       sid="other0")
    import json

    data = json.loads(cli("gate", str(second), "--json", "--trials", "3", "--jobs", "1").out)
    assert data["before"]["scored"] >= 1
    assert data["cache_hits"] >= data["before"]["scored"], data  # other0's trials with rule-0001, read as its before
