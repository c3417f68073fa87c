"""The noisy loop learns (SIMULATED agent, issue 28 item 6): re-proposals with the refusal's reason, escalation of
an ignored rule, one-off rules worded apart. Deterministic per seed; nothing here pins a benchmark outcome."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from loopbench import noisy  # noqa: E402
from loopbench.catalogue import guard, hand_written, tail_mode, write_tail  # noqa: E402
from loopbench.noise import NOT_DISCRIMINATIVE, REGRESSION, Noise, NoiseConfig, Proposal  # noqa: E402
from loopbench.run import LoopConfig, Week  # noqa: E402
from loopbench.stream import StreamConfig, Task, make_stream  # noqa: E402

from bot._util.similarity import similarity  # noqa: E402
from bot.gate.decision import TWIN_THRESHOLD  # noqa: E402
from bot.playbook import rule as rules_mod  # noqa: E402
from bot.scenario import spec as sc  # noqa: E402

STREAM = StreamConfig(weeks=4)


class Asked(Noise):
    """A Noise that records every proposal and re-proposal the loop asks for, in order."""

    def __init__(self, *args, mistakes: dict[str, float] | None = None):
        super().__init__(*args)
        self.asked: list[Proposal] = []
        self.mistakes = mistakes or {}
        self._inner = False

    def mistake(self, mode: str) -> float:
        return self.mistakes.get(mode, super().mistake(mode))

    def proposal(self, mode, k, not_redundant=False):
        out = super().proposal(mode, k, not_redundant)
        if not self._inner:
            self.asked.append(out)
        return out

    def reproposal(self, mode, k, why, refused):
        self._inner = True
        try:
            out = super().reproposal(mode, k, why, refused)
        finally:
            self._inner = False
        self.asked.append(out)
        return out


def _run(seed: int, mode: str, p: float, reproposals: int = 3, escalate: bool = False, policy: str = "replaybook"):
    stream = make_stream(STREAM, seed)
    noise = Asked(NoiseConfig(), seed, stream.modes, noisy.suite_modes(stream), mistakes={mode: p})
    run = noisy.NoisyRun(policy, stream, noise, LoopConfig(seed=seed), noisy.gates(13).get(policy), reproposals,
                         escalate)
    return run, noise


def _distill_once(run, mode: str, week: Week | None = None) -> Week:
    week = week or Week(1)
    run.incident(mode)
    run._distill(week)
    return week


@pytest.mark.parametrize("seed", [3, 4])
def test_a_refused_proposal_is_answered_at_distills_next_runs_at_most_three_times_per_incident(seed):
    # the agent never makes this mode's mistake: every rule for it is refused as not discriminative
    run, noise = _run(seed, "lint-disable", 0.0)
    week = _distill_once(run, "lint-disable")
    assert week.proposals == 1 and week.reproposals == 0  # no re-proposal in the same run: the product waits
    for _ in range(5):  # distill's next runs, with no new incident: the refusal answered with its reason
        run._distill(week)
    asked = [p for p in noise.asked if p.mode == "lint-disable"]
    assert len(asked) == 4 and week.reproposals == 3 and week.admitted == 0
    assert asked[0].reason == ""
    for earlier, again in zip(asked, asked[1:]):  # each carries the reason its predecessor was refused for
        assert again.reason in NOT_DISCRIMINATIVE and again.scope == asked[0].scope  # distill's scope from the start
        assert again.k == earlier.k + 1 and again.kind != "redundant"  # told it changed nothing: not one it follows
    assert sum(week.rejections.values()) == 4
    # a new incident of the mode gets fresh tries (bot.distill.refusals counts per incident): nothing is parked
    _distill_once(run, "lint-disable", week)
    assert week.proposals == 5 and not hasattr(run, "parked")
    # deterministic per seed
    run2, noise2 = _run(seed, "lint-disable", 0.0)
    w2 = _distill_once(run2, "lint-disable")
    for _ in range(5):
        run2._distill(w2)
    assert [p for p in noise2.asked if p.mode == "lint-disable"] == asked


def test_without_reproposals_a_refusal_waits_for_new_incidents():
    run, noise = _run(3, "lint-disable", 0.0, reproposals=0)
    week = _distill_once(run, "lint-disable")
    assert week.proposals == 1 and week.reproposals == 0
    run._distill(week)
    assert week.proposals == 1  # no new incident, no re-proposal
    assert _distill_once(run, "lint-disable").proposals == 1  # its next incidents: a fresh, uninformed one
    assert all(p.reason == "" for p in noise.asked)


def test_a_rule_refused_for_a_regression_comes_back_as_a_new_rule_in_distills_scope_and_harm_lands_only_in_reach():
    from loopbench.scope import ScopeConfig, Scopes

    stream = make_stream(STREAM, 5)
    suite = noisy.suite_modes(stream, 30)
    scopes = Scopes(ScopeConfig(), 5, stream.modes)
    noise = Noise(NoiseConfig(), 5, stream.modes, suite, scopes)
    first = noise.proposal("lint-disable", 0)
    again = noise.reproposal("lint-disable", 1, REGRESSION, first)
    assert (again.k, again.reason) == (1, REGRESSION) and (again.scope, again.area) == scopes.proposed("lint-disable")
    assert again == replace(noise.proposal("lint-disable", 1), reason=REGRESSION)  # a new rule, drawn as any other
    # a harmful rule scoped to `lint` cannot reach a `cleanup` task: under scoped delivery it does no harm there ...
    harmful = Proposal("lint-disable", 0, "harmful", 0.8, "dynamic-module-delete", 0.5, scope="lint")
    assert not noise.harms(harmful)
    assert noise.pass_rate("dynamic-module-delete", [harmful], 1.0) == noise.pass_rate("dynamic-module-delete", [], 1.0)
    # ... and under whole-file delivery it reaches every prompt
    whole = Noise(NoiseConfig(), 5, stream.modes, suite, Scopes(ScopeConfig(delivery="whole-file"), 5, stream.modes))
    assert whole.harms(harmful)
    assert whole.pass_rate("dynamic-module-delete", [harmful], 1.0) < whole.pass_rate("dynamic-module-delete", [], 1.0)
    # targeted-tests' rule breaks whole-suite-after-change, a `testing` task too: scoping does not save it
    tt = noise.proposal("targeted-tests", 0)
    assert tt.kind == "harmful" and tt.victim == "whole-suite-after-change" and tt.scope == "testing"


def test_no_mode_is_set_aside_after_a_scoped_rule_regresses_again():
    """The product has no 'no safe rule' state: a refusal stands only for its incidents' three re-proposals,
    and the mode's next incident is proposed for again (here targeted-tests, whose every rule is harmful)."""
    for seed in range(1, 4):
        stream = make_stream(STREAM, seed)
        noise = Asked(NoiseConfig(), seed, stream.modes, noisy.suite_modes(stream))
        run = noisy.NoisyRun("replaybook", stream, noise, LoopConfig(seed=seed), noisy.gates(13)["replaybook"], 3)
        week = Week(1)
        for n in range(1, 7):
            _distill_once(run, "targeted-tests", week)
            asked = [p for p in noise.asked if p.mode == "targeted-tests"]
            assert len(asked) == n  # one each run, never set aside
            assert all(p.kind == "harmful" for p in asked if p.kind != "redundant")  # every rule it writes is
            if any(r.mode == "targeted-tests" for r in run.rules):
                break  # a false admit of the suite test: the mode is covered


def _within(rate: float, expected: float, n: int) -> bool:
    return abs(rate - expected) <= 4 * math.sqrt(max(expected * (1 - expected), 1e-4) / n) + 1e-9


def test_an_ignored_rule_is_escalated_to_the_guard_its_scenario_checks_give():
    modes = {m.id: m for m in hand_written()}
    assert guard(modes["monorepo-test-cwd"]) == "hook"  # not_ran: a PreToolUse deny hook
    assert guard(modes["lint-disable"]) == "ci"  # diff_excludes: a CI guard
    assert guard(modes["dynamic-module-delete"]) == ""  # neither: a rewording for a person
    assert guard(tail_mode(4)) == ""

    run, _ = _run(6, "monorepo-test-cwd", 0.9, escalate=True)
    run.rules.append(Proposal("monorepo-test-cwd", 0, "redundant", 0.0))  # admitted, and the agent ignores it
    run.failed.add("monorepo-test-cwd")
    week, index = Week(1), 0
    while "monorepo-test-cwd" not in run.guards and index < 200:
        run._task(week, Task(10_000 + index, 1, "monorepo-test-cwd"))
        index += 1
    assert run.guards["monorepo-test-cwd"] == "hook" and week.escalated == 1
    assert run.since["monorepo-test-cwd"] == 2  # bot.playbook.worth: ignored after 2 repeats
    assert week.repeat_causes["useless rule"] == 2
    # with the hook the mistake slips through at hook_slip of the rate, whatever q
    n, before = 4000, week.failures
    for i in range(n):
        run._task(week, Task(20_000 + i, 2, "monorepo-test-cwd"))
    rate = (week.failures - before) / n
    noise = run.noise
    expected = 1 - noise.pass_rate("monorepo-test-cwd", run.rules, run.q(), guard="hook")
    assert _within(rate, expected, n) and expected < 0.15
    assert week.repeat_causes["escalated to a hook, slipped through"] == week.failures - before
    assert week.escalated == 1  # once


def test_escalation_needs_no_gate_so_every_policy_with_rules_gets_it():
    for policy, escalate, expected in (("replaybook", False, False), ("unvalidated", True, True),
                                       ("single_run_fair", True, True), ("single_run", True, True),
                                       ("oracle", True, True), ("none", True, False)):
        run, _ = _run(6, "monorepo-test-cwd", 0.9, escalate=escalate, policy=policy)
        run.rules.append(Proposal("monorepo-test-cwd", 0, "redundant", 0.0))
        run.failed.add("monorepo-test-cwd")
        week = Week(1)
        for i in range(40):
            run._task(week, Task(i, 1, "monorepo-test-cwd"))
        assert bool(run.guards) == expected and week.escalated == int(expected), policy


def test_one_off_rules_no_longer_collide_as_near_duplicates():
    tails = [tail_mode(n) for n in range(1, 71)]  # a 12-week stream makes about 33
    worst = max(similarity(a.rule, b.rule) for i, a in enumerate(tails) for b in tails[i + 1:])
    assert worst < TWIN_THRESHOLD
    others = [m.rule for m in hand_written()]
    assert max(similarity(t.rule, o) for t in tails for o in others) < TWIN_THRESHOLD
    for mode in tails[:10]:
        assert len(rules_mod.sentences(mode.rule)) <= 2 and rules_mod.has_condition(mode.rule)
        assert mode.branch_on in mode.rule and mode.files[1] == mode.branch_on


def test_a_one_off_scenario_still_loads_and_checks_its_own_files(tmp_path):
    mode = tail_mode(12)
    write_tail(tmp_path / mode.id, mode)
    loaded = sc.load(tmp_path / mode.id)
    edit, kept = mode.files
    assert (tmp_path / mode.id / "repo" / kept).is_file() and (tmp_path / mode.id / "repo" / edit).is_file()
    assert loaded.scenario.task_type == "tail" and edit in loaded.scenario.task


def test_every_repeat_of_the_last_weeks_has_a_named_cause():
    stream = make_stream(StreamConfig(weeks=6), 8)
    for name, gate in [("none", None), ("unvalidated", None), ("oracle", None), *noisy.gates(13).items()]:
        noise = Noise(NoiseConfig(), 8, stream.modes, noisy.suite_modes(stream))
        weeks = noisy.NoisyRun(name, stream, noise, LoopConfig(seed=8), gate, 3, True).run()
        for w in weeks:
            assert sum(w.repeat_causes.values()) == w.repeats, (name, w.week)
        assert all(c for w in weeks for c in w.repeat_causes)


def test_the_floor_is_an_oracle_no_policy_beats_by_much_and_perfect_rules_lower_it():
    streams = {s: make_stream(StreamConfig(weeks=8), s) for s in (7, 8, 9, 10)}
    drawn = noisy.floor(streams, LoopConfig(), NoiseConfig(), escalate=True)
    perfect = noisy.floor(streams, LoopConfig(), NoiseConfig(), escalate=True, effect=1.0)
    assert perfect["repeats_last4"] <= drawn["repeats_last4"] and perfect["failures_last4"] <= drawn["failures_last4"]
    none_repeats = none_failures = 0
    for seed, stream in streams.items():
        noise = Noise(NoiseConfig(), seed, stream.modes, noisy.suite_modes(stream))
        weeks = noisy.NoisyRun("none", stream, noise, LoopConfig(seed=seed), None).run()[-4:]
        none_repeats += sum(w.repeats for w in weeks)
        none_failures += sum(w.failures for w in weeks)
    assert drawn["repeat_share_last4"] < none_repeats / none_failures
