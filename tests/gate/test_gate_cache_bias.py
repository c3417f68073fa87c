"""The cache never hands an admitted rule's own trials to the next gate as its baseline.

A candidate is admitted *because* its trials looked good (its own scenario passed with it, no suite scenario
seemed to regress). After the admission its playbook text is the next gate's baseline text, so trials keyed by
(scenario, text, index) alone would be reused as that baseline: trials selected by the admission, not the
independent draws the suite test's exact error rates assume. Baseline trials and candidate trials are keyed apart
(``trial_key(..., arm=...)``), so the next baseline is drawn afresh.
"""

from __future__ import annotations

from datetime import date

from support.gate import book, candidate, gate, mini_scenario, setup


def _trials(side) -> list[tuple[int, str, float]]:
    return [(t.trial, t.verdict, t.duration_s) for t in side.scored]


def test_the_next_baseline_is_not_the_admitted_rules_own_trials(root):
    first = setup(root)  # rule-0001 fixes scenario `own`
    mini_scenario(root, "other", branch_on="zzz no rule says this", inverse=True)  # passes whatever it is told
    mini_scenario(root, "own2", branch_on="write right2.txt")
    admitted = gate(root, first)
    assert admitted.decision == "admit", admitted.reason
    with_rule = {e.scenario: _trials(e.candidate) for e in admitted.suite if e.candidate is not None}
    with_rule["own"] = _trials(admitted.after)
    assert with_rule["other"] and with_rule["own"]
    book(root).admit(first, date(2026, 11, 2))

    second = candidate(root, "rule-0002", text="When a task says make it right, write right2.txt as well.",
                       sid="own2")
    result = gate(root, second)
    assert result.before.n == 3 and result.suite, result.reason
    judged = {e.scenario: e for e in result.suite}
    for sid in ("own", "other"):
        reused = set(_trials(judged[sid].baseline)) & set(with_rule[sid])
        assert not reused, f"{sid}: the baseline reused the admitted rule's own trials {sorted(reused)}"
    # Nothing the first gate ran with its candidate was read by the second gate at all.
    assert result.cache_hits == 0
