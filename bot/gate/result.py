"""What the gate is asked and what it answers: its options, each side's trials, the suite's entries, the result."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from bot.gate import stats
from bot.gate.pool import cores
from bot.replay.engine import ReplayOptions, TrialResult

UNREACHED_ACCEPT = -0.4  # the suite test's accept boundary for a scenario the rule's scope cannot reach: one pass
Decision = Literal["admit", "reject", "error", "inconclusive"]  # inconclusive: the budget ended before a decision


class BudgetSpent(Exception):
    """The gate's budget (``--max-cost-usd``, ``gate.budget``) ended before its tests decided: inconclusive."""


CANDIDATE_SIDES = ("after", "with rule", "screen after")  # sides replayed with the rule under test


@dataclass
class GateOptions:
    replay: ReplayOptions = field(default_factory=ReplayOptions)
    # the own-scenario test: before then after (the default here), both in pairs (``stats.PairedTest``), or
    # ``stats.AutoTest`` (``gate.own_test: auto``, the config's default), which picks one per scenario
    test: stats.SequentialTest | stats.PairedTest | stats.AutoTest = field(default_factory=stats.SequentialTest)
    suite: stats.SuiteTest = field(default_factory=stats.SuiteTest)
    suite_trials: int | None = None  # baseline trials per suite scenario; None: suite.baseline_n
    jobs: int = field(default_factory=cores)  # trials at once, across every scenario
    max_cost_usd: float | None = None  # `--max-cost-usd`: stops before a trial once this much is spent
    # `gate.budget` (docs/gate.md, "The budget"): fresh replays (cache hits are free; the do-nothing control and
    # trials run ahead count) and dollars, each never exceeded: a trial starts only if it fits. None: no limit.
    budget_replays: int | None = None
    budget_usd: float | None = None
    screen_model: str | None = None
    max_unscored: int = 3  # extra attempts per side before the gate gives up
    cache_dir: Path | None = None
    # Suite scenarios replayed with only the rules whose scope (task_types, paths) can reach them
    # (``suite_check.reaches``): sound only where the host loads a scoped rule for its files alone. None (the
    # default): where the replayed agent's host delivers by scope (``reach.host_scopes``); a whole-file host
    # (AGENTS.md read whole) gets every rule everywhere, so nothing is skipped there.
    scope_reach: bool | None = None
    # What makes the host load a path-scoped rule (``reach.trigger``: read, cwd, touch); None: the host's own.
    # With scope on and a trigger known, a suite scenario whose baseline trials never did it is not replayed with
    # a path-scoped candidate, and its bound on harm is reported (``bot.gate.reach``).
    reach_trigger: str | None = None
    # `gate.unreached: once`: a suite scenario the candidate's scope cannot reach (``suite_check.reaches``) is still
    # replayed with it (agents may read the whole file), but screened: its test accepts on the first pass
    # (``UNREACHED_ACCEPT``), and a failure goes on to the full test. Off: every scenario gets the full test.
    unreached_once: bool = False


def scoped(opts: GateOptions) -> bool:
    """Whether suite scenarios get only the rules whose scope reaches them (``GateOptions.scope_reach``)."""
    from bot.gate.reach import host_scopes

    return host_scopes(opts.replay.agent) if opts.scope_reach is None else bool(opts.scope_reach)


def trigger_of(opts: GateOptions) -> str | None:
    """The trigger path-scoped reach is judged by, or None (scope off, or a host whose trigger is not known)."""
    from bot.gate.reach import trigger

    if not scoped(opts):
        return None
    return opts.reach_trigger or trigger(opts.replay.agent)


def watching(replay: ReplayOptions, candidate, scope: bool = True) -> ReplayOptions:
    """``replay`` looking for the delivery of ``candidate`` (a rule) in each trial with it (``bot.replay.delivery``).
    ``scope`` False (a whole-file host, ``scoped``): its ``paths`` are not passed on, so the agent gets the rule
    whole, in its instructions, everywhere; else the replay gives it by its host's trigger."""
    return replace(replay, rule=candidate.rule, rule_paths=tuple(candidate.paths) if scope else ())


def by_task_type(opts: GateOptions) -> bool:
    """Whether a rule's ``task_types`` narrow where it reaches: only where ``scope_reach`` is set True (the
    operator says every host honours the scope), or the agent's host knows a task's type. No host in the table
    does (``bot.replay.host_scope``): a task-typed rule is in the host's file, under its heading, for every task."""
    from bot.replay.host_scope import for_agent

    if opts.scope_reach is not None:
        return bool(opts.scope_reach)
    host = for_agent(opts.replay.agent)
    return bool(host and host.knows_task_type)


@dataclass
class Side:
    """One batch of trials of one scenario with one playbook text."""

    label: str
    scenario: str
    trials: list[TrialResult] = field(default_factory=list)
    outcome: str = "not run"  # pass | fail | error | not run

    @property
    def arm(self) -> str:
        """The cache's arm of its trials (``bot.replay.cache.trial_key``): a rule under test, or the playbook as is."""
        return "candidate" if self.label in CANDIDATE_SIDES else "baseline"

    @property
    def scored(self) -> list[TrialResult]:
        return [t for t in self.trials if t.verdict != "unscored"]

    @property
    def passes(self) -> int:
        return sum(t.verdict == "passed" for t in self.trials)

    @property
    def n(self) -> int:
        return len(self.scored)

    @property
    def unscored(self) -> int:
        return len(self.trials) - self.n

    @property
    def undelivered(self) -> int:
        """Trials whose rule under test never reached the agent (unscored: ``bot.replay.delivery``)."""
        return sum(t.delivered is False for t in self.trials)

    @property
    def undelivered_cause(self) -> str:
        """Why the rule did not reach the agent, from the first trial where it did not; empty when it always did."""
        return next((t.delivery.get("reason") or t.reason for t in self.trials if t.delivered is False), "")

    @property
    def never_delivered(self) -> str:
        """Why the rule never reached the agent, when it reached it in no trial of this side; else empty."""
        return "" if any(t.delivered for t in self.trials) else self.undelivered_cause

    @property
    def interval(self) -> tuple[float, float]:
        return stats.wilson(self.passes, self.n)


@dataclass
class SuiteEntry:
    scenario: str
    baseline: Side
    candidate: Side | None = None
    judged: bool = False
    regressed: bool = False
    undecided: bool = False  # the gate's budget ended before its test decided
    broken: bool = False  # could not be loaded or replayed: the suite is incomplete without it
    note: str = ""
    task_type: str | None = None  # the scenario's (scenario.yaml), for the report per task type
    # not replayed with the rule because its baseline trials never triggered the rule's path scope
    # (``bot.gate.reach``): how many were read, and the 95% bound on the harm they leave
    reach_trials: int | None = None
    reach_bound: float | None = None


@dataclass
class GateResult:
    rule_id: str
    rule_text: str
    decision: Decision
    reason: str
    provisional: bool = False
    screen: list[Side] = field(default_factory=list)
    before: Side | None = None
    after: Side | None = None
    suite: list[SuiteEntry] = field(default_factory=list)
    cost_usd: float = 0.0
    model_calls: int = 0
    tokens: int = 0  # input and output, of the replays run (not those from the cache)
    replays: int = 0
    cache_hits: int = 0
    traces: str | None = None
    simulated: bool = False
    model_label: str = ""  # a real local model's name and quantisation: the report says so, and $0
    admitted: dict | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. replayed without a sandbox
    flags: dict[str, list[str]] = field(default_factory=dict)  # cheap_flags: "conflicts", "leakage"; not decided on
    twins_by: str = ""  # the method that judged twins and conflicts (bot.model.meaning), named in the report
    own_test: str = ""  # how the own scenario was judged (the test ``gate.own_test`` picked), for the report
    suite_test: str = ""  # how the suite was judged, for the report
    own_task_type: str | None = None  # the own scenario's task type (scenario.yaml), for the report per task type
    task_types: tuple[str, ...] | None = None  # the rule's scope as the gate read it; None: not read (no rule file)
    paths: tuple[str, ...] | None = None
    speculative: int = 0  # replays run ahead that no test read (parallel gates only; not in the decision)
    speculative_cost_usd: float = 0.0
    # inconclusive: the replays still to run to decide, from the tests' state (``bot.gate.estimate``): expected
    # at the design point, and the most any gate could need; None when not inconclusive
    fresh_replays: int = 0  # replays run, not read from the cache (the control and runs ahead included)
    more_replays: float | None = None
    # a scoped candidate: the trials its gate read beside those the same rule global would have
    # (``bot.gate.estimate.scope_cost``: scoped_replays, global_replays, counts, reason, line); None: no scope
    scope_cost: dict | None = None
    most_replays: int | None = None

    @property
    def not_delivered(self) -> list[Side]:
        """The sides replayed with the rule (own scenario, screen, suite) where some trial's rule never arrived."""
        sides = [*self.screen, self.after, *(e.candidate for e in self.suite)]
        return [s for s in sides if s is not None and s.arm == "candidate" and s.undelivered]

    @property
    def regressions(self) -> list[SuiteEntry]:
        return [e for e in self.suite if e.regressed]

    @property
    def undecided(self) -> list[SuiteEntry]:
        """Suite scenarios whose test the budget stopped before it decided."""
        return [e for e in self.suite if e.undecided]

    @property
    def broken(self) -> list[SuiteEntry]:
        """Suite scenarios that could not be loaded or replayed, so the suite check is incomplete."""
        return [e for e in self.suite if e.broken]
