"""The noisy preset's gates, decided by the product's own gate code on trials drawn from the noise model.

``SimRunner`` is ``bot.gate.decision.Runner`` with one thing swapped: where a
trial comes from. The product's runner replays a scenario in a sandbox; this
one draws the outcome from ``loopbench.noise`` (SIMULATED). Everything that
decides is the product's: ``Runner.sequential`` and ``Runner.paired`` (the
order trials are read in and when to stop), ``decision._paired`` and
``decision.own_test_for`` (the own scenario), ``suite_check._judge`` (each
suite scenario against its baseline, on demand) and the ``bot.gate.stats``
tests they ask. The trials are cached as the product's replay cache keys them
(scenario, playbook text, arm, index), across gates, so a baseline the product
would find in its cache is found here too and costs nothing.

What the product decides in ``decision._decide`` around those calls (the
do-nothing control, own scenario, then every other suite scenario, then the
verdict) is sequenced here in ``decide``, line for line; the suite's
scenario folders are not on disk, so ``suite_check._suite`` (which loads
them) is the one part not called.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields, replace
from types import SimpleNamespace
from typing import Callable

from bot import config
from bot.gate import decision, stats, suite_check
from bot.gate import result as result_mod
from bot.gate.result import BudgetSpent, GateOptions, GateResult, Side, SuiteEntry

try:
    from bot.gate.result import UNREACHED_ACCEPT
except ImportError:  # before `gate.unreached`
    UNREACHED_ACCEPT = 0.0
from bot.replay.engine import ReplayOptions, TrialResult

# A real model's runs differ, so the product's `gate.own_test: auto` picks the paired test for it; the noisy
# agent is such an agent. The model id only names it: nothing is called.
NOISY_AGENT = ReplayOptions(model="claude-sonnet-4-6")
# (scenario, playbook text, arm, index, salt) -> (passed?, the areas the run touched)
Draw = Callable[[str, str, str, int, str], tuple[bool, frozenset]]
Texts = Callable[[str], tuple[str, "str | None"]]  # scenario -> (its prompt, its prompt with the rule; None: unreached)
# What a fresh replay was for (``SimRunner.by_purpose``): the do-nothing control, the own scenario without and
# with the rule, each other suite scenario's baseline and its trials with the rule, both sides of a scenario
# the rule cannot reach (``gate.unreached: once``), and the baseline trials the reach test reads first.
PURPOSES = ("control", "own_baseline", "own_rule", "suite_baseline", "suite_rule", "unreached", "reach")


@dataclass(frozen=True)
class MemoSuiteTest(stats.SuiteTest):
    """The product's ``SuiteTest``, its answers memoised: each is a pure function of its arguments, so the
    decisions are the product's, trial for trial; only the time changes (a 60-seed run spends most of its time
    in them otherwise)."""

    def _answer(self, ask: Callable, *args):
        """``ask(*args)`` (the product's method), memoised under its name and arguments (each hashable: a list of
        trials is passed as a tuple, which the product's methods only iterate)."""
        memo = self.__dict__.get("_answers")
        if memo is None:
            memo = self.__dict__["_answers"] = {}  # per instance (frozen: no attribute, a dict entry)
        elif len(memo) > 2_000_000:
            memo.clear()
        key = (ask.__name__, *args)
        got = memo.get(key)
        if got is None:
            got = memo[key] = ask(*args)
        return got

    def decide(self, baseline_passes: int, baseline_n: int, passes: int, fails: int, k: int = 3):
        return self._answer(super().decide, baseline_passes, baseline_n, passes, fails, k)

    def settle(self, baseline_passes: int, baseline_n: int, trials: list[bool], k: int = 3):
        return self._answer(super().settle, baseline_passes, baseline_n, tuple(trials), k)

    def settled(self, lo: int, hi: int, trials: list[bool], k: int = 3):
        return self._answer(super().settled, lo, hi, tuple(trials), k)


def memoised(opts: GateOptions) -> GateOptions:
    """``opts`` with its suite test memoised (``MemoSuiteTest``); the same decisions."""
    suite = opts.suite
    if type(suite) is stats.SuiteTest:
        suite = MemoSuiteTest(**{f.name: getattr(suite, f.name) for f in fields(suite)})
    return replace(opts, suite=suite)


def product_options() -> GateOptions:
    """The gate options the product runs with at its defaults (``replaybook gate``, ``bot/cli/gate.py``)."""
    gate = config.Gate()
    extra = gate.options() if hasattr(gate, "options") else gate.budget_options()  # budget, reach: at defaults
    return GateOptions(replay=NOISY_AGENT, test=stats.own_test(gate.own_test), jobs=1, **extra)


def single_run_options(suite_size: int) -> GateOptions:
    """The seed's gate: 1 run without (must fail), 1 with (must pass), 1 run of each suite scenario against a
    1-trial baseline (a regression: it passed without and failed with)."""
    return GateOptions(replay=NOISY_AGENT, jobs=1, test=stats.SequentialTest(1, 0, 1, 1),
                       suite=stats.SuiteTest(baseline_n=1, max_n=1, reject_at=0.5, accept_at=-0.5,
                                             suite_size=max(1, suite_size), on_demand=False))


def single_run_fair_options() -> GateOptions:
    """One run without (must fail), one with (must pass), then the product's own suite check at its defaults."""
    return replace(product_options(), test=stats.SequentialTest(1, 0, 1, 1))


def issue54_options(base: GateOptions, trigger: str = "read") -> GateOptions:
    """``base`` with issue 54's policies, all the product's (``bot.gate``): where the host delivers by scope, each
    suite scenario keyed and judged by the instructions it gets (``scope_reach``), the reach test from the
    baselines' footprints (``reach_trigger``, ``suite_check.by_trace``; the simulated host loads a path-scoped rule
    when the agent reads a file it matches, as Claude Code does), and the own test against the first 20 trials of
    the cached baseline, curtailed (``gate.own_test: baseline``; ``stats.BaselineTest``). ``NoisyRun`` turns
    ``scope_reach`` off for a project whose host reads the whole file."""
    return replace(base, scope_reach=True, reach_trigger=trigger, test=stats.own_test("baseline"))


class _Sync:
    """``bot.gate.pool.Stream`` without threads: the next trial is drawn when it is read."""

    def __init__(self, run: Callable[[int], tuple[TrialResult, bool]], start: int):
        self.run, self.index = run, start

    def next(self, ahead: int) -> tuple[TrialResult, bool]:
        self.index += 1
        return self.run(self.index - 1)

    def close(self) -> list:
        return []


class SimRunner(decision.Runner):
    """The product's runner; its trials are drawn (``draw``) and kept in ``store``, shared across gates as the
    product's replay cache keeps them. ``fresh``: scenario (``*``: every one) -> a salt for this gate, whose
    trials there are its own (a gate with no cache: the seed's)."""

    def __init__(self, opts: GateOptions, draw: Draw, store: dict, fresh: dict[str, str] | None = None):
        super().__init__(opts)
        self.draw, self.store, self.fresh = draw, store, fresh or {}
        self.phase, self.before_text = "own", None  # set by ``_decide``: what the next fresh replays are for
        self.by_purpose: Counter = Counter()  # PURPOSES -> fresh replays

    def _purpose(self, text: str) -> str:
        if self.phase in ("unreached", "reach"):
            return self.phase
        return f"{self.phase}_{'baseline' if text == self.before_text else 'rule'}"

    def _attempt(self, loaded, text: str, index: int, replay: ReplayOptions, arm: str = "baseline"):
        sid = loaded.scenario.id
        salt = self.fresh.get(sid, self.fresh.get("*", ""))
        kept = self.store.setdefault((sid, text, arm, salt), [])
        if index < len(kept):
            return kept[index], True
        while len(kept) <= index:  # trials are drawn in index order (a stream never skips one)
            self.reserve(0.0)  # the product's budget rule (``gate.budget``): BudgetSpent once it is used up
            ok, touched = self.draw(sid, text, arm, len(kept), salt)
            self.by_purpose[self._purpose(text)] += 1
            # what its trace shows of the areas it touched (the reach test reads it)
            kept.append(TrialResult(sid, len(kept), "passed" if ok else "failed", "",
                                    footprint={"reads": [f"{a}/{sid}.txt" for a in sorted(touched)]}))
            self._ran += 1
        return kept[index], False

    def _stream(self, loaded, text: str, replay: ReplayOptions, start: int = 0, arm: str = "baseline"):
        return _Sync(lambda index: self._attempt(loaded, text, index, replay, arm), start)

    def peek(self, loaded, text: str, replay: ReplayOptions, most: int = 64) -> list:
        """``Runner.peek``: the with-rule trials the store holds for this text (nothing run)."""
        sid = loaded.scenario.id
        return list(self.store.get((sid, text, "candidate", self.fresh.get(sid, self.fresh.get("*", ""))), ()))[:most]

    def cached(self, loaded, text: str, n: int, replay: ReplayOptions) -> bool:
        sid = loaded.scenario.id
        return len(self.store.get((sid, text, "baseline", self.fresh.get(sid, self.fresh.get("*", ""))), ())) >= n

    def control_once(self, sid: str) -> None:
        """The do-nothing control of ``sid`` (always sound here): one replay the first time, cached after."""
        key = (sid, "", "control")
        if key in self.store:
            self.hits += 1
            return
        self.reserve(0.0)
        self.store[key] = []
        self.by_purpose["control"] += 1
        self.replays += 1
        self._ran += 1


def scenario(sid: str):
    """What the gate code reads of a loaded scenario here: its id (no folder, no fixture)."""
    return SimpleNamespace(scenario=SimpleNamespace(id=sid, task_type=""), folder=sid)


@dataclass
class Verdict:
    decision: str  # admit | reject | error
    reason: str  # the rejection's reason class (as the default preset's ``reason_class``)
    replays: int  # trials drawn (not read from the store)
    result: GateResult
    by_purpose: Counter  # those replays by what they were for (PURPOSES); they sum to ``replays``

    @property
    def outcome(self) -> str:
        """admitted | rejected_own | rejected_suite | inconclusive | error: where the gate ended."""
        if self.decision == "reject":
            return "rejected_suite" if self.reason == "regression" else "rejected_own"
        return {"admit": "admitted"}.get(self.decision, self.decision)


def decide(opts: GateOptions, runner: SimRunner, own: str, suite: list[str], before_text: str, after_text: str,
           rule_id: str, reaches: Callable[[str], bool] = lambda _sid: True, texts: Texts | None = None,
           paths: tuple[str, ...] = ()) -> Verdict:
    """``decision.run_gate`` and ``decision._decide``'s sequence: control, the own test, every other suite
    scenario (``suite_check._suite``: one the budget stopped is undecided), the verdict; ``BudgetSpent``
    anywhere else makes it inconclusive, as ``run_gate`` does. ``texts``: each suite scenario's own prompts
    (``suite_check.scoped_prompts``; None for the candidate: its scope cannot reach it, not judged); ``paths``: the
    candidate's path globs, for the reach test (``suite_check.by_trace``)."""
    replays0 = runner.replays
    result = GateResult(rule_id, "", "error", "")
    try:
        _decide(opts, runner, result, own, suite, before_text, after_text, reaches, texts, paths)
    except BudgetSpent as exc:
        result.decision, result.reason = "inconclusive", str(exc)
    return _verdict(result, runner, replays0)


def _own(opts, runner, result, own, before_text, after_text) -> bool:
    """The own scenario's test (``decision.own_test_for``); whether the gate goes on to the suite."""
    loaded = scenario(own)
    runner.phase, runner.before_text = "own", before_text
    runner.control_once(own)
    test = decision.own_test_for(opts.test, loaded, opts.replay)
    result.own_test = test.describe()
    quiet = lambda _msg: None  # noqa: E731
    if isinstance(test, stats.PairedTest):
        return decision._paired(result, runner, opts, test, loaded, before_text, after_text, quiet)
    if isinstance(test, getattr(stats, "BaselineTest", ())):
        return decision.against_baseline(result, runner, opts, test, loaded, before_text, after_text, quiet)
    result.before = runner.sequential(Side("before", own), loaded, before_text, test.before, test.before_n,
                                      opts.replay)
    if result.before.outcome != "pass":
        decision._not_discriminative(result, "before")
        return False
    result.after = runner.sequential(Side("after", own), loaded, after_text, test.after, test.after_n, opts.replay)
    if result.after.outcome != "pass":
        decision._not_discriminative(result, "after")
        return False
    return True


def _decide(opts, runner, result, own, suite, before_text, after_text, reaches, texts, paths) -> None:
    if not _own(opts, runner, result, own, before_text, after_text):
        return
    others = [s for s in suite if s != own]
    test_suite = suite_check.suite_test(opts)
    # suite_check._suite: the reach test where the prompts are scoped, the candidate has paths and the trigger is known
    trigger = getattr(result_mod, "trigger_of", lambda _o: None)(opts)
    how = trigger if texts is not None and paths else None
    candidate = SimpleNamespace(paths=tuple(paths))

    def one(sid: str) -> SuiteEntry:
        base, cand = texts(sid) if texts else (before_text, after_text)
        if cand is None:  # suite_check._suite: the rule's scope cannot reach it, so its prompt is unchanged
            return SuiteEntry(sid, Side("baseline", sid, outcome="not needed"),
                              note="not judged: the rule's scope (task_types, paths) cannot reach it")
        runner.before_text = base
        # `gate.unreached: once` (suite_check._suite): a scenario the rule's scope cannot reach is screened
        screened = how is None and getattr(opts, "unreached_once", False) and not reaches(sid)
        test = replace(test_suite, accept_at=UNREACHED_ACCEPT) if screened else test_suite
        try:
            if how is not None:
                runner.phase = "reach"
                skipped, _note = suite_check.by_trace(runner, opts, test, scenario(sid), base, cand, candidate, how)
                if skipped is not None:
                    return skipped
            runner.phase = "unreached" if screened else "suite"
            return suite_check._judge(runner, opts, test, len(others), scenario(sid), base, cand)
        except BudgetSpent as exc:  # as suite_check._suite: the rest may still show a regression
            return SuiteEntry(sid, Side("baseline", sid, outcome="not run"), undecided=True,
                              note=f"not decided: {exc}")

    result.suite = [one(s) for s in others]
    if result.undecided and not result.regressions:
        raise BudgetSpent(result.undecided[0].note.removeprefix("not decided: "))
    if result.regressions:
        result.decision, result.reason = "reject", "regressed " + ", ".join(e.scenario for e in result.regressions)
    else:
        result.decision, result.reason = "admit", "replay is discriminative and the suite does not regress"


def carry_over(store: dict, result: GateResult, after_text: str | Callable[[str], str]) -> int:
    """``bot.gate.reuse.carry_over`` on the store: after an admission, each trial the gate ran with the rule (its
    own scenario's and each suite scenario's) becomes a baseline trial of the new playbook, whose text is the
    one they ran with (``after_text``, or each scenario's: a function of its id), where no baseline trial is kept
    there yet (no retirement here)."""
    text_of = after_text if callable(after_text) else (lambda _sid: after_text)
    sides = [e.candidate for e in result.suite if e.candidate is not None] + ([result.after] if result.after else [])
    carried = 0
    for side in sides:
        kept = store.setdefault((side.scenario, text_of(side.scenario), "baseline", ""), [])
        for trial in side.scored:
            if trial.trial == len(kept):  # the cache holds trials by index: only a gap-free run is a baseline
                kept.append(trial)
                carried += 1
    return carried


def _verdict(result: GateResult, runner: SimRunner, replays0: int) -> Verdict:
    why = result.reason
    if result.decision == "admit":
        cls = ""
    elif result.decision in ("error", "inconclusive"):
        cls = result.decision
    elif "passed without the rule" in why:
        cls = "passes without the rule"
    elif "did not change the pass rate" in why or "did not cut the mistake rate" in why:
        cls = "no difference with the rule"
    elif "still failed with the rule" in why:
        cls = "fails with the rule"
    elif why.startswith("regressed"):
        cls = "regression"
    else:
        cls = "other"
    return Verdict(result.decision, cls, runner.replays - replays0, result, Counter(runner.by_purpose))
