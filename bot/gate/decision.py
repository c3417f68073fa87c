"""The admit gate: a rule enters the playbook only if replay proves it.

Cheap checks first (the rule's form, its citations, its scenario, no twin in
the playbook), then the rule's own scenario as a sequential test (it must
fail without the rule and pass with it; see ``bot.gate.stats``), then the whole
suite with the candidate, judged against each scenario's cached baseline.
Every replay goes through ``Runner``, which caches scored results by content,
retries unscored ones and stops at the gate's budget.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

from bot import errors as errors_mod
from bot.errors import BadInput
from bot.gate import stats
from bot.gate.estimate import scope_cost, with_eta
from bot.gate.pool import Pool, Stream
from bot.gate.result import BudgetSpent, Decision, GateOptions, GateResult, Side, SuiteEntry  # noqa: F401  (re-exported)
from bot.gate.result import scoped, watching
from bot.gate.own_scenario import (  # noqa: F401  (re-exported)
    _not_discriminative,
    _paired,
    against_baseline,
    before_then_after,
    deterministic,
    own_test_for,
)
from bot.gate.suite_check import (  # noqa: F401  (re-exported)
    _broken,
    _judge,
    _suite,
    _unscored_reasons,
    by_reach,
    prompts,
    reaches,
    scoped_prompts,
    suite_test,
)
from bot.model import meaning
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.replay import agents as agents_mod
from bot.replay import validate as sv
from bot.replay.cache import ReplayCache, trial_key
from bot.replay.engine import ReplayOptions, TrialResult, run_trial
from bot.replay.sandbox import process as process_mod
from bot.replay.sandbox.interrupt import stop_on_sigint
from bot.scenario import leakage
from bot.scenario import spec as sc

TWIN_THRESHOLD = 0.6  # word overlap's, before #49: still distill's against refused rules and the org tier's


class Runner:
    """Runs trials through the cache, within the budget, ``jobs`` at a time.

    Trials run on one pool shared by every scenario (``bot.gate.pool``) and are
    read in trial order; ``cost``, ``model_calls``, ``replays`` and ``hits``
    count the trials read, ``speculative`` those run ahead and never read.
    Every fresh trial first claims its place in the budget (``reserve``): a
    runner whose trials come from elsewhere (a simulation overriding
    ``_attempt``) calls it too, or ``gate.budget`` does not hold there.
    """

    def __init__(self, opts: GateOptions):
        self.opts = opts
        self.cache = ReplayCache(opts.cache_dir) if opts.cache_dir else None
        self.cost = 0.0
        self.model_calls = 0
        self.tokens = 0
        self.replays = 0
        self.hits = 0
        self.spent = 0.0  # every trial run, read or not: what the budget counts
        self._ran = 0
        self.started = 0  # fresh replays started (run ahead, unscored and the do-nothing control included)
        self._held = 0.0  # the per-replay caps of the replays running now, held against ``budget_usd``
        self.warnings: dict[str, None] = {}  # each trial's warnings, once each, in order
        self._lock = threading.Lock()
        self._agents: dict[str, object] = {}
        self._pool: Pool | None = None
        self.on_replay: Callable[[TrialResult], None] = lambda _: None  # each fresh replay, as it ends

    @property
    def pool(self) -> Pool:
        with self._lock:
            if self._pool is None:
                self._pool = Pool(self.opts.jobs)
            return self._pool

    @property
    def speculative(self) -> int:
        """Replays run ahead that no test read (cached for a later gate)."""
        return self._ran - self.replays

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def _agent(self, replay: ReplayOptions):
        name = f"{replay.agent}:{replay.command}"
        with self._lock:
            if name not in self._agents:
                self._agents[name] = agents_mod.make(replay.agent, command=replay.command)
            return self._agents[name]

    def _attempt(self, loaded: sc.LoadedScenario, text: str, index: int, replay: ReplayOptions,
                 arm: str = "baseline") -> tuple[TrialResult, bool]:
        """(result, came from the cache); runs on the pool. ``arm``: see ``bot.replay.cache.trial_key``."""
        agent = self._agent(replay)
        if arm != "candidate" and replay.rule:  # only a trial with the rule under test looks for its delivery
            replay = replace(replay, rule="", rule_paths=())
        key = trial_key(loaded, text, replay, index, agent.version, arm) if self.cache else None
        cached = self.cache.get(key) if self.cache else None
        if cached is not None:
            return cached, True
        cap = loaded.scenario.budget.max_cost_usd
        self.reserve(cap)
        try:
            result = run_trial(loaded, text, replay, index, agent)
        finally:
            with self._lock:
                self._held -= cap
        with self._lock:
            self.spent += result.cost_usd
            self._ran += 1
        if self.cache:
            self.cache.put(key, result)
        self.on_replay(result)
        return result, False

    def reserve(self, cap_usd: float) -> None:
        """Claim one fresh replay within the gate's budgets, or ``BudgetSpent``: never more than
        ``budget_replays`` started, and never one whose own cap (the scenario's ``budget.max_cost_usd``) could
        take the spend past ``budget_usd``, counting the caps of those still running."""
        o = self.opts
        with self._lock:
            if o.max_cost_usd is not None and self.spent >= o.max_cost_usd:
                raise BudgetSpent(f"the gate's budget of ${o.max_cost_usd:.2f} (--max-cost-usd) is spent")
            if o.budget_replays is not None and self.started >= o.budget_replays:
                raise BudgetSpent(f"the gate's budget of {o.budget_replays} replays (gate.budget) is spent")
            if o.budget_usd is not None and self.spent + self._held + cap_usd > o.budget_usd + 1e-9:
                raise BudgetSpent(f"the gate's budget of ${o.budget_usd:.2f} (gate.budget) is spent: "
                                  f"${self.spent:.2f} spent, and a replay may cost up to ${cap_usd:.2f}")
            self.started += 1
            self._held += cap_usd

    def _count(self, result: TrialResult, hit: bool) -> TrialResult:
        """Account for a trial a test read."""
        with self._lock:
            self.warnings.update(dict.fromkeys(result.warnings))
            if hit:
                self.hits += 1
            else:
                self.cost += result.cost_usd
                self.model_calls += result.model_calls
                self.tokens += result.input_tokens + result.output_tokens
                self.replays += 1
        return result

    def trial(self, loaded: sc.LoadedScenario, text: str, index: int, replay: ReplayOptions) -> TrialResult:
        return self._count(*self._attempt(loaded, text, index, replay))

    def control(self, folder: Path, *, policy: bool) -> sv.Finding:
        """Validate a scenario, do-nothing control included (cached like any replay, counted when run)."""
        hits = self.cache.hits if self.cache else 0
        self.reserve(0.0)  # the control calls no model: it costs a replay, not money
        try:
            finding = sv.validate(folder, control=True, policy=policy, cache=self.cache)
        finally:
            with self._lock:
                if (self.cache.hits if self.cache else 0) != hits:
                    self.started -= 1  # read from the cache: no replay was run
        if finding.control is not None:
            with self._lock:
                if (self.cache.hits if self.cache else 0) == hits:
                    self.replays += 1
                    self._ran += 1
                else:
                    self.hits += 1
        return finding

    def batch(self, jobs: list[tuple[sc.LoadedScenario, str, int, ReplayOptions]]) -> list[TrialResult]:
        futures = [self.pool.submit(self._attempt, *job) for job in jobs]
        return [self._count(*f.result()) for f in futures]

    def _stream(self, loaded: sc.LoadedScenario, text: str, replay: ReplayOptions, start: int = 0,
                arm: str = "baseline") -> Stream:
        return Stream(self.pool, lambda index: self._attempt(loaded, text, index, replay, arm), start)

    def peek(self, loaded: sc.LoadedScenario, text: str, replay: ReplayOptions, most: int = 64) -> list[TrialResult]:
        """The trials with the rule under test (arm 'candidate') the cache already holds for this text, from trial 0
        to the first it lacks; nothing is run or counted."""
        if self.cache is None:
            return []
        version, found = self._agent(replay).version, []
        for index in range(most):
            trial = self.cache.get(trial_key(loaded, text, replay, index, version, "candidate"))
            if trial is None:
                break
            found.append(trial)
        return found

    def cached(self, loaded: sc.LoadedScenario, text: str, n: int, replay: ReplayOptions) -> bool:
        """Whether the cache already holds trials 0..n-1 of this scenario with this text (a baseline run before)."""
        if self.cache is None:
            return False
        version = self._agent(replay).version
        return all(self.cache.get(trial_key(loaded, text, replay, i, version, "baseline")) is not None
                   for i in range(n))

    def _read(self, stream: Stream, ahead: int) -> TrialResult:
        # The budget stops a test between two reads, on what was read, not on what ran ahead.
        with self._lock:
            if self.opts.max_cost_usd is not None and self.cost >= self.opts.max_cost_usd:
                raise BudgetSpent(f"the gate's budget of ${self.opts.max_cost_usd:.2f} is spent")
        return self._count(*stream.next(ahead))

    def sequential(self, side: Side, loaded: sc.LoadedScenario, text: str,
                   decide: Callable[[int, int], str], limit: int, replay: ReplayOptions) -> Side:
        """Run trials until ``decide`` says pass or fail; unscored trials are retried, never counted.

        ``decide`` is asked after every trial, in trial order, so the test stops
        where a one-job gate would, whatever ran ahead. A side that holds trials
        already goes on from the next trial index.
        """
        stream = self._stream(loaded, text, replay, start=len(side.trials), arm=side.arm)
        try:
            while True:
                state = decide(side.passes, side.n - side.passes)
                if state != "continue":
                    side.outcome = state
                    return side
                if side.unscored > self.opts.max_unscored:
                    side.outcome = "error"
                    return side
                # Run ahead only as many as could still be needed.
                side.trials.append(self._read(stream, ahead=min(self.opts.jobs, limit - side.n)))
        finally:
            stream.close()

    def paired(self, before: Side, after: Side, loaded: sc.LoadedScenario, before_text: str, after_text: str,
               test: stats.PairedTest, replay: ReplayOptions) -> str:
        """Before and after in pairs until ``test`` decides: 'pass', 'fail', or 'error' (too many unscored)."""
        streams = [(before, self._stream(loaded, before_text, replay, arm=before.arm)),
                   (after, self._stream(loaded, after_text, replay, arm=after.arm))]
        wins = losses = 0
        try:
            while (state := test.decide(wins, losses, pairs := before.n)) == "continue":
                for side, stream in streams:
                    while side.n < pairs + 1:  # one more scored trial on each side
                        if side.unscored > self.opts.max_unscored:
                            return "error"
                        side.trials.append(self._read(stream, ahead=1))
                b, a = (s.scored[-1].verdict == "passed" for s, _ in streams)
                wins, losses = wins + (a and not b), losses + (b and not a)
            return state
        finally:
            for _, stream in streams:
                stream.close()

    def fixed(self, side: Side, loaded: sc.LoadedScenario, text: str, n: int, replay: ReplayOptions) -> Side:
        """``n`` scored trials (unscored ones retried, within the limit)."""
        stream = self._stream(loaded, text, replay, arm=side.arm)
        try:
            while side.n < n and side.unscored <= self.opts.max_unscored:
                side.trials.append(self._read(stream, ahead=n - side.n))
        finally:
            stream.close()
        side.outcome = "pass" if side.n >= n else "error"
        return side


# -- cheap checks -----------------------------------------------------------


def cheap_checks(book: Playbook, path: Path) -> tuple[Rule | None, list[str]]:
    """The rule, or the reasons it is rejected before any replay."""
    try:
        candidate = book.vet(path)
    except BadInput as exc:
        return None, exc.problems or [exc.message]
    return candidate, twins(book, candidate)


def twins(book: Playbook, candidate: Rule) -> list[str]:
    """Why ``candidate`` is a near-duplicate of an admitted rule (``bot.model.meaning``: by embeddings when
    installed, else word overlap; the reason names which); ``Playbook.admit`` asks again under its lock."""
    problems = []
    for admitted in book.admitted():
        if admitted.id == candidate.id:
            continue
        found = meaning.relate(candidate.rule, admitted.rule)
        if found.kind == "twin":
            problems.append(f"near-duplicate of admitted {admitted.id} ({found.reason}): \"{admitted.rule}\"")
    return problems


def twins_method() -> tuple[str, str]:
    """The method that judges twins and conflicts here, and a warning when it fell back to word overlap."""
    method = meaning.default().method
    if method != meaning.WORDS:
        return method, ""
    return method, (f"twins and conflicts were judged by word overlap, not by meaning ({meaning.why_words()}): a "
                    "paraphrase of an admitted rule can pass as new")


def cheap_flags(book: Playbook, candidate: Rule, loaded: sc.LoadedScenario) -> dict[str, list[str]]:
    """Named flags the report carries and the decision does not read (a person judges them): ``conflicts`` (an
    admitted rule demands the opposite) and ``leakage`` (the scenario already tells the agent the rule)."""
    conflicts = []
    for admitted in book.admitted():
        found = meaning.relate(candidate.rule, admitted.rule) if admitted.id != candidate.id else None
        if found is not None and found.kind == "conflict":
            conflicts.append(f"conflicts with admitted {admitted.id}: {found.reason}: \"{admitted.rule}\"")
    leaks = [leak.line() for leak in leakage.find(loaded, candidate.rule)]
    return {name: lines for name, lines in (("conflicts", conflicts), ("leakage", leaks)) if lines}


# -- the gate -----------------------------------------------------------------


def estimate(book: Playbook, rule_path: Path, suite_dir: Path, opts: GateOptions):
    """The plan of ``run_gate`` (``bot.gate.estimate.Estimate``), or None when the cheap checks reject the rule."""
    from bot.gate import estimate as gate_estimate

    candidate, problems = cheap_checks(book, rule_path)
    if candidate is None or problems:
        return None
    loaded = sc.load(book.root / candidate.replay)
    opts = replace(opts, replay=watching(opts.replay, candidate, scoped(opts)))  # its trials' keys, as the gate's
    before_text, after_text, texts = prompts(book, candidate, loaded, opts)
    return gate_estimate.estimate(loaded, before_text, after_text, suite_dir, opts, candidate, texts)


def _scope(candidate: Rule | None) -> dict:
    """The candidate's scope for its ``GateResult`` (nothing when its file did not load)."""
    return {} if candidate is None else {"task_types": tuple(candidate.task_types), "paths": tuple(candidate.paths)}


def run_gate(book: Playbook, rule_path: Path, suite_dir: Path, opts: GateOptions,
             progress: Callable[[str], None] | None = None) -> GateResult:
    """Decide admit or reject for one candidate rule. Changes nothing.

    With ``progress``, each line ends with an ETA from the gate's plan (``estimate``)."""
    candidate, problems = cheap_checks(book, rule_path)
    if candidate is None or problems:
        rule_id = candidate.id if candidate else Path(rule_path).stem
        return GateResult(rule_id, candidate.rule if candidate else "", "reject",
                          "cheap checks failed: " + "; ".join(problems), twins_by=twins_method()[0],
                          **_scope(candidate))
    runner = Runner(opts)
    shown = progress is not None
    progress = (lambda _: None) if progress is None else with_eta(
        progress, estimate(book, rule_path, suite_dir, opts), lambda: runner._ran)
    if shown:  # the progress line moves with every replay
        runner.on_replay = lambda r: progress(f"replay `{r.scenario}` trial {r.trial}: {r.verdict}")
    result = GateResult(candidate.id, candidate.rule, "error", "", provisional=bool(candidate.provisional),
                        simulated=opts.replay.simulated, model_label=opts.replay.model_label,
                        traces=str(opts.replay.runs_dir) if opts.replay.runs_dir else None, **_scope(candidate))
    loaded = sc.load(book.root / candidate.replay)
    result.flags = cheap_flags(book, candidate, loaded)
    opts = replace(opts, replay=watching(opts.replay, candidate, scoped(opts)))
    before_text, after_text, texts = prompts(book, candidate, loaded, opts)
    try:
        with stop_on_sigint():
            _decide(result, runner, opts, loaded, before_text, after_text, suite_dir, progress, texts=texts,
                    candidate=candidate)
    except BudgetSpent as exc:
        result.decision, result.reason = "inconclusive", str(exc)
    except (KeyboardInterrupt, process_mod.Interrupted):
        runner.close()  # the trials still running were killed: this returns at once
        raise errors_mod.Interrupted(
            f"interrupted: the gate of {candidate.id} stopped after {runner.replays} replay(s) read "
            f"({runner.hits} from the cache, ${runner.cost:.2f} spent); nothing was decided or changed. "
            + ("Every finished trial is in the cache: run the same gate again to go on from there"
               if opts.cache_dir is not None else
               "With --no-cache no trial was kept: the same gate replays every trial again")) from None
    finally:
        runner.close()
        process_mod.STOP.clear()  # only once every trial thread has ended
    result.cost_usd = round(runner.cost, 6)
    result.model_calls, result.replays, result.tokens = runner.model_calls, runner.replays, runner.tokens
    result.cache_hits, result.speculative = runner.hits, runner.speculative
    result.speculative_cost_usd = round(max(0.0, runner.spent - runner.cost), 6)
    result.warnings = list(runner.warnings)
    result.twins_by, fallback = twins_method()
    result.warnings += [fallback] if fallback else []
    result.scope_cost = scope_cost(book, candidate, loaded, suite_dir, opts, reads=True)  # beside it global
    result.fresh_replays = runner.started
    if result.decision == "inconclusive":
        _still_to_run(result, book, rule_path, suite_dir, opts)
    return result


def _still_to_run(result: GateResult, book: Playbook, rule_path: Path, suite_dir: Path, opts: GateOptions) -> None:
    """An inconclusive gate's replays still to run (``bot.gate.estimate.still_to_run``)."""
    from bot.gate.estimate import still_to_run

    still_to_run(result, estimate(book, rule_path, suite_dir, opts), cached=opts.cache_dir is not None)


def _decide(result: GateResult, runner: Runner, opts: GateOptions, loaded: sc.LoadedScenario,
            before_text: str, after_text: str, suite_dir: Path, progress, k: int | None = None,
            texts: Callable | None = None, candidate: Rule | None = None) -> None:
    """Decide ``result`` (the own scenario, then the suite); ``k``: the scenarios the suite test's correction
    is over (default: this suite's; the org gate passes every member's); ``texts``: each suite scenario's
    (baseline, candidate) prompts (``scoped_prompts``; default: the whole playbook's)."""
    test = own_test_for(opts.test, loaded, opts.replay)
    result.own_test, result.own_task_type = test.describe(), loaded.scenario.task_type
    progress(f"own scenario `{loaded.scenario.id}` with an agent that does nothing")
    finding = runner.control(loaded.folder, policy=opts.replay.simulated)
    if not finding.ok:
        result.decision = "reject"
        result.reason = f"unsound scenario `{loaded.scenario.id}`: " + "; ".join(finding.lines())
        return
    if opts.screen_model and not _screen(result, runner, opts, loaded, before_text, after_text, progress):
        return
    run_own = (_paired if isinstance(test, stats.PairedTest) else
               against_baseline if isinstance(test, stats.BaselineTest) else before_then_after)
    if not run_own(result, runner, opts, test, loaded, before_text, after_text, progress):
        return
    result.suite = _suite(runner, opts, loaded, before_text, after_text, suite_dir, progress, k, texts, candidate)
    result.suite_test = suite_test(opts).describe()
    incomplete = incomplete_note(result)
    if result.undecided and not result.regressions:
        names = ", ".join(e.scenario for e in result.undecided)
        why = result.undecided[0].note.removeprefix("not decided: ")
        raise BudgetSpent(f"{why}, with the suite undecided on {names}")
    if result.regressions:
        names = ", ".join(e.scenario for e in result.regressions)
        result.decision, result.reason = "reject", f"regressed {names}" + (f" ({incomplete})" if incomplete else "")
    elif incomplete:
        # "The suite does not regress" is unproven where a scenario could not be judged: breaking the one
        # scenario a harmful rule would regress must not be a way to admit it.
        result.decision = "error"
        result.reason = (f"could not decide: {incomplete}; fix them (`replaybook scenario validate`) and gate again "
                         f"(its own scenario is fixed: {result.before.passes}/{result.before.n} without the rule, "
                         f"{result.after.passes}/{result.after.n} with it)")
    else:
        result.decision = "admit"
        result.reason = (f"replay is discriminative ({result.before.passes}/{result.before.n} passed without the rule, "
                         f"{result.after.passes}/{result.after.n} with it) and "
                         + ("the suite does not regress" if result.suite else
                            "no other scenario was checked (the suite holds none besides its own)")
                         + by_reach(result.suite) + (f" ({incomplete})" if incomplete else ""))


def incomplete_note(result: GateResult) -> str:
    """Says the suite was incomplete, naming each scenario it lacked; empty when it was whole."""
    if not result.broken:
        return ""
    names = ", ".join(e.scenario for e in result.broken)
    return f"suite incomplete: {len(result.broken)} scenario(s) could not be loaded or replayed: {names}"


def _screen(result, runner, opts, loaded, before_text, after_text, progress) -> bool:
    """A cheaper model's one run each way; only a rule that can matter goes on."""
    progress(f"screen with `{opts.screen_model}`")
    cheap = replace(opts.replay, model=opts.screen_model)
    before = runner.fixed(Side("screen before", loaded.scenario.id), loaded, before_text, 1, cheap)
    after = runner.fixed(Side("screen after", loaded.scenario.id), loaded, after_text, 1, cheap)
    result.screen = [before, after]
    if before.passes == 0 and after.passes == 1:
        return True
    result.decision = "reject"
    result.reason = (f"screen: with {opts.screen_model} the scenario {'passed' if before.passes else 'failed'} "
                     f"without the rule and {'passed' if after.passes else 'failed'} with it, so the rule cannot matter there")
    return False
