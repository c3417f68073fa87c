"""The rule's own scenario: which test judges it, and the paired and baseline tests as the gate runs them.

``gate.own_test`` names the test (``bot.gate.stats``): ``sequential`` (before, then after), ``paired`` (both in
pairs), ``baseline`` (the rule's trials against the scenario's cached baseline) or ``auto`` (per scenario, see
``deterministic``). ``bot.gate.decision._decide`` runs the one each scenario gets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.errors import BadInput
from bot.gate import stats
from bot.gate.result import GateOptions, GateResult, Side
from bot.gate.suite_check import _unscored_reasons
from bot.replay.engine import ReplayOptions
from bot.replay.gateway.policy import load_policy
from bot.scenario import spec as sc

if TYPE_CHECKING:
    from bot.gate.decision import Runner


def own_test_for(test: stats.SequentialTest | stats.PairedTest | stats.AutoTest, loaded: sc.LoadedScenario,
                 replay: ReplayOptions) -> stats.SequentialTest | stats.PairedTest:
    """The test the own scenario gets: ``test``, or what ``stats.AutoTest`` picks for this scenario and agent."""
    if not isinstance(test, stats.AutoTest):
        return test
    return test.pick(deterministic=deterministic(loaded, replay))


def deterministic(loaded: sc.LoadedScenario, replay: ReplayOptions) -> bool:
    """Every run of this agent on ``loaded`` is the same run: the simulated model with no chance anywhere.

    Not a real model (its runs differ, and nothing here can show they do not), not ``--noise``, not a
    ``follow`` below 1, not a scenario policy whose SIMULATED ``mistake`` or ``effect`` is a chance
    rather than 0 or 1. A policy that does not load is not known to be deterministic (the replay then
    says why it cannot run)."""
    if not replay.simulated or replay.noise > 0 or replay.follow < 1:
        return False
    try:
        policy = load_policy(loaded.folder / "policy.yaml")
    except (BadInput, OSError):
        return False
    return policy.mistake in (0.0, 1.0) and policy.effect in (0.0, 1.0)


def _paired(result: GateResult, runner: Runner, opts: GateOptions, test: stats.PairedTest, loaded, before_text,
            after_text, progress) -> bool:
    """The own scenario with ``stats.PairedTest``: whether the rule changed the pass rate (else result is set)."""
    progress(f"own scenario `{loaded.scenario.id}` without and with the rule, in pairs")
    result.before, result.after = Side("before", loaded.scenario.id), Side("after", loaded.scenario.id)
    state = runner.paired(result.before, result.after, loaded, before_text, after_text, test, opts.replay)
    result.before.outcome = result.after.outcome = state
    if state == "pass":
        return True
    if state == "error":
        _not_discriminative(result, "before" if result.before.unscored > opts.max_unscored else "after")
        return False
    result.decision = "reject"
    result.reason = (f"replay not discriminative: the rule did not change the pass rate enough "
                     f"({result.before.passes}/{result.before.n} passed without it, "
                     f"{result.after.passes}/{result.after.n} with it, in pairs)")
    return False


def before_then_after(result: GateResult, runner: Runner, opts: GateOptions, test: stats.SequentialTest, loaded,
                      before_text, after_text, progress) -> bool:
    """The own scenario with ``stats.SequentialTest``: without the rule until ``test.before`` decides, then with it
    until ``test.after`` does. Whether both passed (else ``result`` is set)."""
    for side, text, decide, most, rule in (("before", before_text, test.before, test.before_n, "without"),
                                           ("after", after_text, test.after, test.after_n, "with")):
        progress(f"own scenario `{loaded.scenario.id}` {rule} the rule")
        ran = runner.sequential(Side(side, loaded.scenario.id), loaded, text, decide, most, opts.replay)
        setattr(result, side, ran)
        if ran.outcome != "pass":
            _not_discriminative(result, side)
            return False
    return True


def _not_discriminative(result: GateResult, side: str) -> None:
    s = result.before if side == "before" else result.after
    if s.outcome == "error" and s.never_delivered:  # not the agent ignoring the rule: it never had it
        result.decision = "error"
        result.reason = (f"the rule never reached the agent in any of {s.undelivered} {side}-run(s), so replay "
                         f"cannot tell whether it works: {s.never_delivered}")
        return
    if s.outcome == "error":
        result.decision = "error"
        result.reason = f"the {side}-runs could not be scored ({s.unscored} unscored: {_unscored_reasons(s)})"
        return
    result.decision = "reject"
    if side == "before":
        result.reason = (f"replay not discriminative: the scenario passed without the rule "
                         f"({s.passes}/{s.n}), so the rule teaches nothing")
    else:
        result.reason = (f"replay not discriminative: the scenario still failed with the rule "
                         f"({s.passes}/{s.n} passed; {_failed_checks(s)})")


def _failed_checks(side: Side) -> str:
    names = sorted({c.check for t in side.scored for c in t.failed_checks})
    return "failing: " + ", ".join(names) if names else "no check failed"


def against_baseline(result: GateResult, runner, opts, test: stats.BaselineTest, loaded, before_text, after_text,
                     progress) -> bool:
    """The own scenario with ``stats.BaselineTest``: its baseline (cached, shared with every gate's suite check of
    this scenario), then the rule's trials until the test decides. Whether the rule cut the mistake rate enough
    (else ``result`` is set)."""
    sid = loaded.scenario.id
    progress(f"own scenario `{sid}` without the rule (its baseline, {test.baseline_n} trials, cached and shared)")
    result.before = runner.fixed(Side("before", sid), loaded, before_text, test.baseline_n, opts.replay)
    if result.before.outcome == "error":
        _not_discriminative(result, "before")
        return False
    bp, bn = result.before.passes, result.before.n
    progress(f"own scenario `{sid}` with the rule")
    result.after = runner.sequential(Side("after", sid), loaded, after_text,
                                     lambda p, f: test.decide(bp, bn, p, f), test.max_n, opts.replay)
    if result.after.outcome == "pass":
        return True
    if result.after.outcome == "error":
        _not_discriminative(result, "after")
        return False
    result.decision = "reject"
    result.reason = (f"replay not discriminative: the rule did not cut the mistake rate enough ({bp}/{bn} passed "
                     f"without it, its baseline; {result.after.passes}/{result.after.n} with it)")
    return False
