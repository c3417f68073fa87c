"""What a gate will cost before it runs: replays, model calls, money and wall time.

The plan walks the gate as it would run (``bot.gate.decision``): the do-nothing
control, the screen, the rule's own scenario before and after, then each suite
scenario's baseline and candidate trials. Every trial the cache already holds
is read, not replayed, and decides the test as it would in the gate; where the
cache runs out, the rest is the sequential test's expected sample size from
that point (``bot.gate.stats.expected_runs``), at the pass rates the gate is
designed for: the mistake every time without the rule, 90% with it, and a
suite scenario at its baseline's rate. ``most`` is the bound no gate exceeds
(unscored retries aside).

Per-replay figures (seconds, model calls, cost) come from the scenario's
past replays in the cache, else from any past replay there, else (the local
model) from its measured seconds per answer times ``LOCAL_CALLS_PER_REPLAY``,
else a stated default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from bot.gate import stats
from bot.replay import agents as agents_mod
from bot.replay import validate as sv
from bot.replay.cache import ReplayCache, trial_key
from bot.replay.engine import ReplayOptions, TrialResult
from bot.scenario import spec as sc
from bot.scenario import suite as suite_mod

DEFAULT_REPLAY_S = 20.0  # a replay's wall time when no past replay says otherwise
LOCAL_CALLS_PER_REPLAY = 6  # the local model's answers a replay (the median of bench/README.md's measured replays)
P_BEFORE, P_AFTER, P_SUITE = 0.0, 0.9, 0.9  # the design point of bot.gate.stats (a real rule, a healthy suite)
_SCAN = 2000  # cache entries read at most for past figures


@dataclass
class Estimate:
    replays: float = 0.0  # expected replays to run (the cache's trials subtracted)
    most: int = 0
    cached: int = 0  # trials the gate will read from the cache
    model_calls: float = 0.0
    cost_usd: float = 0.0
    seconds: float = 0.0  # wall time, the replays spread over ``jobs``
    jobs: int = 1
    simulated: bool = True
    timing: str = "default"  # "past replays" when the cache held some
    per_replay_s: float = DEFAULT_REPLAY_S
    scenarios: dict[str, float] = field(default_factory=dict)  # expected replays per scenario
    # a scoped candidate's plan beside the same rule global (``scope_cost``; issue 54 item 4); None: not asked
    scope: dict | None = None

    def as_dict(self) -> dict:
        return {"replays": round(self.replays, 1), "most": self.most, "cached": self.cached,
                "model_calls": round(self.model_calls, 1), "cost_usd": round(self.cost_usd, 4),
                "seconds": round(self.seconds, 1), "jobs": self.jobs, "simulated": self.simulated,
                "timing": self.timing, "per_replay_s": round(self.per_replay_s, 2),
                "scenarios": {k: round(v, 1) for k, v in self.scenarios.items()},
                **({"scope": self.scope} if self.scope is not None else {})}

    def lines(self) -> list[str]:
        cost = f"${self.cost_usd:.2f}" + (" (simulated model: no money is spent)" if self.simulated else "")
        timing = (f"{self.per_replay_s:.1f} s a replay from past replays" if self.timing == "past replays"
                  else f"{self.per_replay_s:.0f} s a replay: the local model's measured seconds an answer, "
                       f"{LOCAL_CALLS_PER_REPLAY} answers a replay" if self.timing.startswith("the local")
                  else f"a stated default of {DEFAULT_REPLAY_S:.0f} s a replay: no past replay in the cache")
        return [f"replays to run: about {self.replays:.1f} (at most {self.most}); "
                f"{self.cached} trial(s) read from the cache",
                f"model calls: about {self.model_calls:.0f}",
                f"cost: about {cost}",
                f"wall time: about {duration(self.seconds)} with {self.jobs} job(s) ({timing})",
                *(f"  {sid}: about {n:.1f} replay(s)" for sid, n in self.scenarios.items()),
                *([self.scope["line"]] if self.scope else [])]


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class _Plan:
    def __init__(self, opts, cache: ReplayCache | None, reads: bool = False):
        self.opts, self.cache = opts, cache
        self.reads = reads  # count the trials read from the cache as replays too (``scope_cost(reads=True)``)
        self.est = Estimate(jobs=opts.jobs, simulated=opts.replay.simulated)
        self.past = _past(cache)
        self.default_s, self.measured = DEFAULT_REPLAY_S, False
        if not self.past and opts.replay.model == "local":  # no past replay: the model's speed, measured now
            from bot.model import served

            per_call = served.seconds_per_call()
            if per_call:
                self.default_s, self.measured = per_call * LOCAL_CALLS_PER_REPLAY, True
        self._agents: dict[str, object] = {}

    def _version(self, replay: ReplayOptions) -> str:
        name = f"{replay.agent}:{replay.command}"
        if name not in self._agents:
            self._agents[name] = agents_mod.make(replay.agent, command=replay.command)
        return self._agents[name].version

    def lookup(self, loaded, text: str, index: int, replay: ReplayOptions, arm: str = "baseline") -> TrialResult | None:
        if self.cache is None:
            return None
        return self.cache.get(trial_key(loaded, text, replay, index, self._version(replay), arm))

    def hit(self, sid: str, n: int = 1) -> None:
        """``n`` trials read from the cache."""
        self.est.cached += n
        if self.reads:
            self.to_run(sid, n, n, calls=False)

    def to_run(self, sid: str, expected: float, most: int, *, calls: bool = True) -> None:
        self.est.replays += expected
        self.est.most += most
        self.est.scenarios[sid] = self.est.scenarios.get(sid, 0.0) + expected
        seconds, model_calls, cost = self.past.get(sid) or self.past.get("") or (self.default_s, 0.0, 0.0)
        self.est.seconds += expected * seconds
        if calls:
            self.est.model_calls += expected * model_calls
            self.est.cost_usd += expected * cost

    def sequential(self, loaded, text: str, decide, p: float, replay: ReplayOptions,
                   arm: str = "baseline") -> str | None:
        """The test's outcome if the cache decides it, else None (and the rest is planned)."""
        passes = fails = index = 0
        while (state := decide(passes, fails)) == "continue":
            hit = self.lookup(loaded, text, index, replay, arm)
            if hit is None:
                self.to_run(loaded.scenario.id, stats.expected_runs(decide, p, passes, fails),
                            stats.most_runs(decide, passes, fails))
                return None
            self.hit(loaded.scenario.id)
            passes, fails, index = passes + (hit.verdict == "passed"), fails + (hit.verdict != "passed"), index + 1
        return state

    def fixed(self, loaded, text: str, n: int, replay: ReplayOptions, arm: str = "baseline") -> tuple[int, int]:
        """(passes, trials) the cache holds of ``n`` fixed trials; the rest is planned."""
        hits = [self.lookup(loaded, text, i, replay, arm) for i in range(n)]
        found = [h for h in hits if h is not None]
        self.hit(loaded.scenario.id, len(found))
        missing = n - len(found)
        if missing:
            self.to_run(loaded.scenario.id, missing, missing)
        return sum(h.verdict == "passed" for h in found), len(found)


def _past(cache: ReplayCache | None) -> dict[str, tuple[float, float, float]]:
    """Mean (seconds, model calls, cost) of past replays per scenario id, and over all of them under ""."""
    if cache is None or not cache.folder.is_dir():
        return {}
    sums: dict[str, list[float]] = {}
    for i, path in enumerate(cache.folder.glob("*/*.json")):
        if i >= _SCAN:
            break
        try:
            data = json.loads(json.loads(path.read_text(encoding="utf-8"))["result"])
            figures = (float(data["duration_s"]), float(data["model_calls"]), float(data["cost_usd"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if figures[1] == 0:
            continue  # a do-nothing control says nothing about an agent's replay
        for key in (str(data.get("scenario", "")), ""):
            acc = sums.setdefault(key, [0.0, 0.0, 0.0, 0.0])
            for j, value in enumerate(figures):
                acc[j] += value
            acc[3] += 1
    return {k: (a[0] / a[3], a[1] / a[3], a[2] / a[3]) for k, a in sums.items() if a[3]}


def estimate(loaded: sc.LoadedScenario, before_text: str, after_text: str, suite_dir: Path, opts,
             candidate=None, texts=None, reads: bool = False) -> Estimate:
    """The plan of ``bot.gate.decision.run_gate`` for one candidate (``opts`` a ``GateOptions``; ``candidate``, its
    rule, for ``opts.unreached_once`` and reach; ``texts``: each suite scenario's instructions, as the gate's).
    Replays nothing. ``reads``: count the trials the gate reads, from the cache or not (``scope_cost``)."""
    from bot.gate.decision import own_test_for, reaches, suite_test
    from bot.gate.result import UNREACHED_ACCEPT, trigger_of

    cache = ReplayCache(opts.cache_dir) if opts.cache_dir else None
    plan = _Plan(opts, cache, reads)
    control = sv.CONTROL
    if cache and cache.get(trial_key(loaded, "", control, 0, sv.DoNothingAgent().version)) is not None:
        plan.hit(loaded.scenario.id)
    else:
        plan.to_run(loaded.scenario.id, 1, 1, calls=False)
    if opts.screen_model:
        cheap = replace(opts.replay, model=opts.screen_model)
        plan.fixed(loaded, before_text, 1, cheap)
        plan.fixed(loaded, after_text, 1, cheap, "candidate")
    test = own_test_for(opts.test, loaded, opts.replay)
    if isinstance(test, stats.PairedTest):  # planned as its expected number of pairs, each side
        pairs = math.ceil(stats.paired_characteristics(test, P_BEFORE, P_AFTER).expected_runs / 2)
        for text, arm in ((before_text, "baseline"), (after_text, "candidate")):
            plan.sequential(loaded, text, lambda p, f: "continue" if p + f < pairs else "pass", P_BEFORE, opts.replay,
                            arm)
    elif isinstance(test, stats.BaselineTest):  # the baseline (cached or run whole), then the rule's trials
        passes, n = plan.fixed(loaded, before_text, test.baseline_n, opts.replay)
        base = passes if n == test.baseline_n else round(P_BEFORE * test.baseline_n)
        if plan.sequential(loaded, after_text, lambda p, f: test.decide(base, test.baseline_n, p, f), P_AFTER,
                           opts.replay, "candidate") not in (None, "pass"):
            return _done(plan)
    elif plan.sequential(loaded, before_text, test.before, P_BEFORE, opts.replay) not in (None, "pass"):
        return _done(plan)
    elif plan.sequential(loaded, after_text, test.after, P_AFTER, opts.replay, "candidate") not in (None, "pass"):
        return _done(plan)
    folders = [f for f in suite_mod.folders(Path(suite_dir)) if f.resolve() != loaded.folder.resolve()]
    for folder in folders:
        if not sv.validate(folder, control=False, policy=opts.replay.simulated).ok:
            continue  # the gate does not replay a scenario that does not load
        other = sc.load(folder)
        base_text, cand_text = texts(other) if texts else (before_text, after_text)
        if cand_text is None:
            continue  # its instructions do not change: not replayed
        how = trigger_of(opts) if texts and candidate is not None and candidate.paths else None
        if opts.unreached_once and how is None and candidate is not None and not reaches(candidate, other):
            suite = replace(suite_test(opts), accept_at=UNREACHED_ACCEPT)  # screened, as the gate judges it
        else:
            suite = suite_test(opts)
        if how is not None and _skipped(plan, other, base_text, cand_text, suite.baseline_n, candidate, how, opts):
            continue  # its cached baseline never triggered the rule's scope (``suite_check.by_trace``)
        if how is None and suite.on_demand and not _on_demand(plan, other, base_text, cand_text, suite,
                                                              len(folders), opts):
            continue  # the candidate's trials clear the pessimistic baseline: no baseline to run
        passes, n = plan.fixed(other, base_text, suite.baseline_n, opts.replay)
        rate = passes / n if n == suite.baseline_n else P_SUITE
        base = round(rate * suite.baseline_n)
        if base == 0:
            continue  # not judged: it fails with the current playbook too
        plan.sequential(other, cand_text, lambda p, f, b=base: suite.decide(b, suite.baseline_n, p, f, len(folders)),
                        rate, opts.replay, "candidate")
    return _done(plan)


def _skipped(plan: _Plan, other, base_text: str, cand_text: str, n: int, candidate, how: str, opts) -> bool:
    """Whether reach skips ``other`` on what the cache holds: its whole baseline, none of it touching the scope, and
    no cached trial with the rule that got it (a baseline still to run is planned whole, with the full test)."""
    from bot.gate import reach as reach_mod

    hits = [plan.lookup(other, base_text, i, opts.replay) for i in range(n)]
    if any(h is None for h in hits) or not reach_mod.judge(hits, candidate.paths, how).skip:
        return False
    first = plan.lookup(other, cand_text, 0, opts.replay, "candidate")
    if first is not None and first.delivered:
        return False
    plan.hit(other.scenario.id, n)
    if first is None and opts.unreached_once:  # the one screening trial `gate.unreached: once` runs (by_trace)
        plan.to_run(other.scenario.id, 1, 1)
    return True


def _on_demand(plan: _Plan, other, before_text: str, after_text: str, suite: stats.SuiteTest, k: int,
               opts) -> bool:
    """The on-demand order's first step (``bot.gate.decision._judge``): whether the baseline is still planned.

    A baseline the cache holds whole is used at once; else the candidate's trials run against the pessimistic
    baseline, and the baseline is planned with the chance that they do not clear it."""
    if all(plan.lookup(other, before_text, i, opts.replay) is not None for i in range(suite.baseline_n)):
        return True
    decide = lambda p, f: suite.pessimistic(p, f, k)  # noqa: E731
    state = plan.sequential(other, after_text, decide, P_SUITE, opts.replay, "candidate")
    if state is not None:
        return state == "fail"
    p_fail = 1 - stats.expected_pass(decide, P_SUITE)
    plan.to_run(other.scenario.id, p_fail * suite.baseline_n, suite.baseline_n)
    return False


def _done(plan: _Plan) -> Estimate:
    est = plan.est
    est.timing = ("past replays" if plan.past else "the local model's measured speed" if plan.measured
                  else "default")
    est.per_replay_s = est.seconds / est.replays if est.replays else (plan.past.get("", (plan.default_s,))[0])
    est.seconds /= max(1, est.jobs)
    return est


def still_to_run(result, plan: Estimate | None, *, cached: bool) -> None:
    """An inconclusive ``GateResult``'s reason, with the replays still to run to decide: the plan of the same gate
    from the trials the cache now holds (``plan``), or from nothing when the gate ran without a cache."""
    if plan is None:
        return
    result.more_replays, result.most_replays = round(plan.replays, 1), plan.most
    kept = ("its trials are cached, so the same gate goes on from here" if cached else
            "it ran without a cache, so a new gate starts over")
    result.reason = (f"inconclusive: {result.reason} before the tests decided ({result.fresh_replays} fresh "
                     f"replays run); about {plan.replays:.0f} more replays would decide (at most {plan.most}); "
                     f"{kept}. The rule stays proposed")


def scope_cost(book, candidate, loaded: sc.LoadedScenario, suite_dir: Path, opts, *,
               reads: bool = False) -> dict | None:
    """What the candidate's chosen scope costs beside the same rule global (issue 54 item 4), as the gate's plan
    counts it (``bot.playbook.scope.global_cost``): the plan with the rule as the agent's host delivers it
    (``scope.priced``; global where the gate does not scope, ``result.scoped``) and with the same rule global. Both
    read the same cache: a scenario reach will skip on its cached baseline costs nothing scoped. ``reads`` counts
    the trials the gate reads, from the cache or not: after a gate, what it read beside what global would have.
    None for a rule with no scope (``paths``, ``task_types``): its global cost is its plan."""
    if not candidate.paths and not candidate.task_types:
        return None
    from bot.gate.result import scoped, watching
    from bot.gate.suite_check import prompts
    from bot.playbook import scope as scope_mod

    def cost(rule) -> float:
        given = replace(opts, replay=watching(opts.replay, rule, scoped(opts)))
        before, after, texts = prompts(book, rule, loaded, given)
        return estimate(loaded, before, after, suite_dir, given, rule, texts, reads).replays

    agent = opts.replay.agent
    if scoped(opts):
        found = scope_mod.global_cost(candidate, agent, cost)
    else:
        every = cost(scope_mod.as_global(candidate))
        found = scope_mod.ScopeCost(every, every, f"{agent}'s host reads one whole file here: priced as global")
    return {"scoped_replays": round(found.scoped, 1), "global_replays": round(found.global_, 1),
            "counts": "trials read" if reads else "replays to run", "reason": found.reason,
            "line": found.line().replace(" replays ", " trials read " if reads else " replays to run ", 1)}


def planned_scope(book, rule_path: Path, suite_dir: Path, opts) -> dict | None:
    """``scope_cost`` of a candidate file in replays to run (``replaybook gate --estimate``); None for a rule with no
    scope (its global cost is its plan)."""
    candidate = book.vet(rule_path)
    return scope_cost(book, candidate, sc.load(book.root / candidate.replay), suite_dir, opts)


def with_eta(progress: Callable[[str], None], plan: Estimate, ran: Callable[[], int]) -> Callable[[str], None]:
    """Progress lines that end with the time left: the plan's replays not yet run (``ran()`` so far), at the pace
    seen so far, or the plan's own pace before the first replay ends."""
    import time

    started = time.monotonic()

    def say(msg: str) -> None:
        done = ran()
        pace = (time.monotonic() - started) / done if done else plan.per_replay_s / max(1, plan.jobs)
        left = max(0.0, plan.replays - done) * pace
        progress(f"{msg} (ETA {duration(left)}, {done} of about {plan.replays:.0f} replays run)")

    return say
