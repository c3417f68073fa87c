"""Efficiency beside success, and the result per task type, in the gate's reports (issue 49 items 3 and 6).

The gate replays scripted scenarios (the simulated model: its turns and tokens come from policy.yaml, so the
report must say SIMULATED); the report's verdicts are also read on trial records built by hand, where the
figures are chosen to be a clear cut or noise.
"""

from __future__ import annotations

import copy
import json
import math
import random

import yaml
from helpers import write
from support.gate import candidate, gate, mini_scenario, setup

from bot.gate import efficiency, intervals, report, stats, task_types
from bot.gate.result import GateResult, Side, SuiteEntry
from bot.replay.engine import TrialResult

OK = {"bash": "echo ok > right.txt"}
BAD = {"bash": "echo no > wrong.txt"}


def _scenario(root, sid: str, *, with_rule: list, without_rule: list, task_type: str | None = None) -> None:
    folder = mini_scenario(root, sid)
    write(folder / "policy.yaml", yaml.safe_dump({"branch_on": "write right.txt", "with_rule": with_rule,
                                                  "without_rule": copy.deepcopy(without_rule)}))
    if task_type:
        data = yaml.safe_load((folder / "scenario.yaml").read_text(encoding="utf-8"))
        write(folder / "scenario.yaml", yaml.safe_dump({**data, "task_type": task_type}))


def _typed(root, sid: str, task_type: str) -> None:
    path = root / "scenarios" / sid / "scenario.yaml"
    write(path, yaml.safe_dump({**yaml.safe_load(path.read_text(encoding="utf-8")), "task_type": task_type}))


def _full_baseline() -> dict:
    return {"suite": stats.SuiteTest(on_demand=False)}  # every suite scenario runs its baseline: both sides seen


# -- the math ------------------------------------------------------------------------


def test_a_clear_cut_has_an_interval_below_one_and_noise_has_one_across_it():
    cut = intervals.ratio([([4, 4, 5, 4, 4], [2, 2, 2, 3, 2])])
    assert cut.down and cut.high < 1 and abs(cut.estimate - 0.5) < 1e-9
    noise = intervals.ratio([([3, 5, 4, 6, 4], [4, 3, 5, 5, 4])])
    assert not noise.down and not noise.up and noise.low < 1 < noise.high


def test_too_few_trials_give_no_interval_rather_than_a_narrow_one():
    # 3 against 3: the smallest two-sided p-value of Mann–Whitney is 0.1, so no 95% interval exists
    r = intervals.ratio([([4, 4, 4], [2, 2, 2])])
    assert r.low is None and r.high is None and not r.down
    assert intervals.ratio([([4, 4, 4], [2, 2, 2, 2, 2])]).down  # 3 against 5: 1/56 per tail, it does


def test_the_order_statistic_is_the_exact_mann_whitney_one():
    assert intervals._order_statistic(((10, 10),), 0.05) == 24  # the tables' critical value 23, plus one
    assert intervals._order_statistic(((3, 5),), 0.05) == 1


def test_the_interval_covers_a_true_ratio_and_ties_with_no_effect_rarely_get_a_verdict():
    """Seeded simulation (the order statistics are exact, so coverage is at least 95% for continuous figures, and
    conservative with ties): a true ratio of 0.8 is inside the interval, and two equal discrete distributions
    (turns of 3 to 6, pooled over scenarios of different scale) give a verdict at most 5% of the time."""
    rng = random.Random(49)

    def covered(n: int, m: int) -> bool:
        a = [math.exp(rng.gauss(1.5, 0.4)) for _ in range(n)]
        b = [0.8 * math.exp(rng.gauss(1.5, 0.4)) for _ in range(m)]
        r = intervals.ratio([(a, b)])
        return r.low is not None and r.low <= 0.8 <= r.high

    def false_verdict() -> bool:
        strata = [([k * rng.choice([3, 4, 5, 6]) for _ in range(6)], [k * rng.choice([3, 4, 5, 6]) for _ in range(9)])
                  for k in (1, 10, 100)]
        pooled = intervals.ratio(strata)
        return pooled.down or pooled.up

    assert sum(covered(5, 8) for _ in range(400)) / 400 >= 0.93
    assert sum(covered(40, 60) for _ in range(100)) / 100 >= 0.9  # the normal approximation's regime
    assert sum(false_verdict() for _ in range(400)) / 400 <= 0.05


def test_a_figure_of_zero_is_not_a_ratio():
    assert intervals.ratio([([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])]) is None  # a $0 local model's cost


def test_the_pass_rate_holds_only_when_its_interval_includes_zero():
    assert intervals.rate_difference([(10, 10, 10, 10)]).holds
    assert not intervals.rate_difference([(10, 10, 0, 10)]).holds


# -- the report, on trial records ------------------------------------------------------


def _trials(sid: str, turns: list[int], *, passed=True, tokens_per_turn=1000) -> list[TrialResult]:
    return [TrialResult(sid, i, "passed" if passed else "failed", "", model_calls=t, input_tokens=t * tokens_per_turn,
                        output_tokens=t * 50, cost_usd=t * 0.003) for i, t in enumerate(turns)]


def _result(without: list[int], with_rule: list[int], *, simulated=False) -> GateResult:
    entry = SuiteEntry("api-limits", Side("baseline", "api-limits", _trials("api-limits", without)),
                       Side("with rule", "api-limits", _trials("api-limits", with_rule)), judged=True,
                       note="no regression", task_type="api")
    return GateResult("rule-0001", "When X, do Y.", "admit", "replay is discriminative", suite=[entry],
                      simulated=simulated)


def test_a_rule_that_keeps_the_pass_rate_and_cuts_turns_is_reported_efficient():
    result = _result([6, 6, 7, 6, 6, 6], [4, 4, 4, 5, 4, 4])
    eff = efficiency.of(result)
    assert eff.verdict == "efficient" and eff.rate.holds
    text = report.markdown(result, stats.SequentialTest())
    assert "⚡ **Efficient**" in text and "Reported, not decided on" in text
    assert "| `api-limits` ⚡ **Efficient** | 6 / 6 | 6 → 4 (×0.67, 95% " in text  # median → median, ratio, interval
    assert "SIMULATED" not in text
    data = report.as_json(result)["efficiency"]
    assert data["verdict"] == "efficient" and data["decided_on"] is False
    low, high = data["pooled"]["turns"]["interval95"]
    assert low <= data["pooled"]["turns"]["ratio"] <= high < 1


def test_noise_gets_no_verdict_line():
    result = _result([5, 6, 4, 6, 5, 5], [6, 5, 5, 4, 6, 5])
    assert efficiency.of(result).verdict is None
    text = report.markdown(result, stats.SequentialTest())
    assert "**Efficiency**" in text and "95% " in text  # the figures are still there, with their intervals
    assert "Efficient" not in text and "Costlier" not in text and "Mixed" not in text


def test_fewer_turns_that_lose_passes_are_not_efficient():
    result = _result([6] * 8, [4] * 8)
    result.suite[0].candidate.trials = _trials("api-limits", [4] * 8, passed=False)
    assert efficiency.of(result).verdict is None


def test_the_simulated_models_figures_are_labelled_simulated():
    text = report.markdown(_result([6] * 6, [4] * 6, simulated=True), stats.SequentialTest())
    assert "**Efficiency**, with the rule against without it" in text
    assert "SIMULATED figures (the scripted model's turns and tokens" in text
    assert "⚡ **Efficient** (SIMULATED)" in text


# -- per task type ------------------------------------------------------------------------


def test_a_type_that_drops_is_flagged_even_when_no_scenario_regressed():
    entries = [SuiteEntry(f"api-{i}", Side("baseline", f"api-{i}", _trials(f"api-{i}", [3] * 10)),
                          Side("with rule", f"api-{i}", _trials(f"api-{i}", [3] * 4, passed=False)
                               + _trials(f"api-{i}", [3] * 6)), judged=True, note="no regression", task_type="api")
               for i in range(4)]
    entries.append(SuiteEntry("docs", Side("baseline", "docs", _trials("docs", [3] * 10)),
                              Side("with rule", "docs", _trials("docs", [3] * 10)), judged=True, task_type=None))
    result = GateResult("rule-0001", "When X, do Y.", "admit", "the suite does not regress", suite=entries)
    rows = {r.task_type: r for r in task_types.breakdown(result)}
    assert rows["api"].trend == "drops" and rows["api"].scenarios == ["api-0", "api-1", "api-2", "api-3"]
    assert rows[task_types.UNTYPED].trend == ""
    text = report.markdown(result, stats.SequentialTest())
    assert "| `api` | 4 | 40/40 (100%) | 24/40 (60%) | ▼ -40 points, 95% -54 to -22 |" in text  # docs/gate.md
    assert "🚩 **task type `api`**: its pass rate drops with the rule" in text
    assert "although the suite as a whole did not regress" in text
    assert "| `untyped` | 1 | 10/10 (100%) | 10/10 (100%) |" in text


# -- the gate, end to end ---------------------------------------------------------------------


def test_the_gate_shows_a_rule_that_helps_one_task_type_and_hurts_another(root):
    path = setup(root)
    _typed(root, "own", "testing")
    mini_scenario(root, "victim", inverse=True)  # the rule's text makes the agent fail here
    _typed(root, "victim", "api")
    result = gate(root, path, **_full_baseline())
    assert result.decision == "reject" and [e.scenario for e in result.regressions] == ["victim"]
    rows = {r.task_type: r for r in task_types.breakdown(result)}
    assert rows["testing"].trend == "rises" and rows["api"].trend == "drops"
    text = report.markdown(result, stats.SequentialTest())
    assert "| `testing` | 1 | 0/3 (0%) | 4/4 (100%) | ▲ +100 points" in text
    assert "| `api` | 1 | 3/3 (100%) | 0/" in text and "▼ -100 points" in text
    assert "although the suite" not in text  # it did regress: the rejection says so already
    data = report.as_json(result)
    assert data["own_task_type"] == "testing" and data["suite"][0]["task_type"] == "api"
    assert [(t["task_type"], t["trend"]) for t in data["by_task_type"]] == [("testing", "rises"), ("api", "drops")]


def test_the_gate_reports_a_rule_that_saves_turns_at_the_same_pass_rate(root):
    path = setup(root)
    _scenario(root, "lean", with_rule=[OK, {"say": "done"}],
              without_rule=[OK, {"bash": "ls"}, {"bash": "ls -a"}, {"bash": "ls -l"}, {"say": "done"}])
    result = gate(root, path, **_full_baseline())
    assert result.decision == "admit"
    eff = efficiency.of(result)
    lean = next(r for r in eff.rows if r.scenario == "lean")
    assert lean.ratios["turns"].without == 5 and lean.ratios["turns"].with_rule == 2 and lean.ratios["turns"].down
    assert eff.verdict == "efficient", eff.pooled
    text = report.markdown(result, stats.SequentialTest())
    assert "⚡ **Efficient** (SIMULATED): at the same pass rate" in text and "turns ×0.40" in text
    assert "| `own` (own: its outcome is meant to change) |" in text
    trial = report.as_json(result)["suite"][0]["with_rule"]["trials"][0]
    assert trial["turns"] == 2 and trial["tokens"] > 0


def test_a_suite_scenario_that_costs_the_same_gets_no_verdict(root):
    path = setup(root)
    _scenario(root, "same", with_rule=[OK, {"say": "done"}], without_rule=[OK, {"say": "done"}])
    result = gate(root, path, **_full_baseline())
    eff = efficiency.of(result)
    same = next(r for r in eff.rows if r.scenario == "same")
    assert same.ratios["turns"].estimate == 1 and not same.ratios["turns"].down
    assert eff.verdict != "efficient"


def test_without_a_baseline_there_is_no_comparison_at_equal_completion(root):
    path = setup(root)
    _scenario(root, "lean", with_rule=[OK, {"say": "done"}], without_rule=[OK, {"bash": "ls"}, {"say": "done"}])
    result = gate(root, path)  # on demand: the rule's trials clear a baseline that never failed; none runs
    assert result.decision == "admit" and not result.suite[0].baseline.trials
    text = report.markdown(result, stats.SequentialTest())
    assert "No suite scenario ran both with and without the rule" in text
    assert efficiency.of(result).verdict is None


def test_a_candidate_rejected_before_any_replay_has_no_efficiency_section(root):
    setup(root)
    path = candidate(root, text="One. Two. Three sentences are too many for a rule.")
    result = gate(root, path)
    assert result.decision == "reject" and result.reason.startswith("cheap checks failed")
    text = report.markdown(result, stats.SequentialTest())
    assert "**Efficiency**" not in text and report.as_json(result)["efficiency"]["scenarios"] == []


LEAN = "Before finishing any cleanup chore, stop after the first successful command."


def test_the_cli_report_shows_the_saving_once_the_baseline_is_kept(cli, root):
    """The first gate admits rule-0001 and keeps its suite trials as the next baseline (``reuse.carry_over``);
    the second gate's suite scenario then has trials both ways, so the saving has an interval."""
    first = setup(root)
    phrase = "stop after the first successful command"
    _scenario(root, "lean", with_rule=[OK, {"say": "done"}],
              without_rule=[OK, {"bash": "ls"}, {"bash": "ls -a"}, {"bash": "ls -l"}, {"say": "done"}])
    _scenario(root, "chore", with_rule=[OK, {"say": "done"}], without_rule=[BAD, {"say": "done"}], task_type="chores")
    for sid in ("lean", "chore"):
        policy = root / "scenarios" / sid / "policy.yaml"
        write(policy, policy.read_text(encoding="utf-8").replace("write right.txt", phrase))
    cli("playbook", "render")
    assert cli("gate", str(first), "--admit", "--trials", "3").code == 0
    second = candidate(root, rule_id="rule-0002", text=LEAN, sid="chore", cites=())
    result = cli("gate", str(second), "--trials", "3", "--report", str(root / "out" / "report.md"))
    assert result.code == 0, result.out + result.err
    assert "| `lean` ⚡ **Efficient** | 3 / 8 | 5 → 2 (×0.40, 95% 0.40–0.40) |" in result.out
    # the suite's other scenario costs the same turns (and the rule's words in every prompt): pooled, the
    # saving is not beyond noise, so there is no verdict line; the scenario's own mark shows where it saves
    assert "| **suite, pooled** | 6 / 16 | 3.5 → 2 (×0.63, 95% 0.40–1.00) |" in result.out
    assert "(SIMULATED): at the same pass rate" not in result.out
    assert "| `chores` | 1 | 0/3 (0%) |" in result.out
    assert (root / "out" / "report.md").read_text(encoding="utf-8") == result.out
    data = json.loads(cli("gate", str(second), "--trials", "3", "--json").out)
    assert data["efficiency"]["verdict"] is None and data["efficiency"]["simulated"] is True
    lean = next(s for s in data["efficiency"]["scenarios"] if s["scenario"] == "lean")
    assert lean["verdict"] == "efficient"
    assert lean["turns"]["median_without"] == 5 and lean["turns"]["median_with"] == 2


def test_costlier_and_mixed_are_told_apart_from_efficient():
    same = intervals.rate_difference([(10, 10, 10, 10)])
    down, up = intervals.ratio([([4] * 5, [2] * 5)]), intervals.ratio([([2] * 5, [3] * 5)])
    noise = intervals.ratio([([3, 5, 4, 6, 4], [4, 3, 5, 5, 4])])
    assert efficiency.verdict(same, {"turns": down, "tokens": noise}) == "efficient"
    assert efficiency.verdict(same, {"turns": noise, "tokens": up}) == "costlier"
    assert efficiency.verdict(same, {"turns": down, "tokens": up}) == "mixed"
    assert efficiency.verdict(same, {"turns": noise, "tokens": None}) is None
    assert efficiency.verdict(intervals.rate_difference([(10, 10, 0, 10)]), {"turns": down}) is None
