"""`gate.own_test: baseline`: the rule's trials against its scenario's cached baseline (``stats.BaselineTest``).

The before side is the first 20 trials of the scenario's baseline (issue 54: was 40), the same trials (text, arm, indices) every other gate's suite
check of that scenario reads, so it is paid once per playbook and shared; per candidate only the rule's trials run.
"""

from __future__ import annotations

import json

from helpers import write
from support.gate import candidate, gate, mini_scenario, setup

from bot.gate import stats

N = stats.BaselineTest().baseline_n  # 20


def test_a_rule_that_fixes_its_scenario_is_admitted_on_a_few_trials_against_the_baseline(root):
    path = setup(root)
    result = gate(root, path, test=stats.BaselineTest(), jobs=1)
    assert result.decision == "admit", result.reason
    assert (result.before.passes, result.before.n) == (0, N)
    assert result.after.passes == result.after.n <= 4  # a rule that always works: a few trials decide
    assert f"cached {N}-trial baseline" in result.own_test


def test_a_rule_that_changes_nothing_is_refused_naming_the_baseline(root):
    path = setup(root)
    mini_scenario(root, "own", branch_on="a phrase no rule has")
    result = gate(root, path, test=stats.BaselineTest(), jobs=1)
    assert result.decision == "reject"
    assert result.reason.startswith(f"replay not discriminative: the rule did not cut the mistake rate enough (0/{N}")


def test_the_baseline_is_the_one_every_suite_check_of_the_scenario_reads(root):
    first = setup(root)
    mini_scenario(root, "own2", branch_on="write right2.txt")
    assert gate(root, first, test=stats.BaselineTest(), jobs=1, suite_trials=40).decision == "admit"
    second = candidate(root, "rule-0002", text="When a task says make it right, write right2.txt as well.",
                       sid="own2")
    result = gate(root, second, jobs=1, suite_trials=40)
    (own,) = [e for e in result.suite if e.scenario == "own"]
    assert own.baseline.n == 40 and result.cache_hits >= N  # its first N: the first gate's before side, not replayed


def test_the_config_names_it_and_the_json_says_so(cli, root):
    path = setup(root)
    write(root / ".replaybook.yml", "gate:\n  own_test: baseline\n")
    data = json.loads(cli("gate", str(path), "--json", "--trials", "3", "--jobs", "1").out)
    assert data["decision"] == "admit" and data["before"]["scored"] == N
    assert data["own_test"] == stats.BaselineTest().describe()
