"""One policy on the stream: real replays, real capture, real distill, the real gate, week by week.

Per task: the scenario is replayed (``bot.gate.decision.Runner``, so through the
replay cache) with the playbook of that moment, rendered as the gate renders
it, and the simulated agent follows each rule in its prompt with probability
q(playbook size). A failed run's ``trace.jsonl`` is captured into an incident
(``bot.incident.capture``). Distill (``bot.distill.plan``) runs after every ``distill_every``
new incidents and at the end of each week; each proposal then goes through
the policy's gate (``bot.gate.decision.run_gate``) and is admitted with
``Playbook.admit``, or is deleted, so its incidents can be proposed again.
"""

from __future__ import annotations

import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from bot import config
from bot.distill import plan as distill
from bot.errors import BadInput
from bot.gate import decision as gate
from bot.gate import stats
from bot.incident import capture
from bot.incident.store import IncidentStore
from bot.playbook.store import Playbook
from bot.replay.engine import SCRIPTED, ReplayOptions, TrialResult, run_trial
from bot.replay.gateway.server import Gateway
from bot.scenario import spec as sc
from loopbench.catalogue import install
from loopbench.simulated import DistillerConfig, SimulatedModel
from loopbench.stream import Stream, Task

POLICIES = ("none", "single_run", "unvalidated", "replaybook")
START = date(2027, 1, 4)  # a Monday; the stream's calendar, so ids and last_hit dates are stable
UNCAPPED = 1000  # the config's largest cap: "no cap" for unvalidated memory


@dataclass
class LoopConfig:
    seed: int = 7
    jobs: int = 2
    cap: int = 60
    distill_every: int = 10
    q0: float = 0.97  # chance the agent follows a rule in its prompt, with an empty playbook
    q_slope: float = 0.00058  # q falls by this much per rule (IFScale: 68% of 500 instructions followed) ...
    q_min: float = 0.5  # ... down to this
    # replaybook gate: the product's own options (``GateOptions()``); set one of these only to try a variant
    suite_trials: int | None = None  # baseline trials per suite scenario (product: 40)
    suite_drop: float | None = None  # the drop in pass rate the suite test looks for (product: 0.4)
    suite_accept_at: float | None = None  # log-likelihood ratio that clears a suite scenario (product: -4.5)
    distiller: DistillerConfig = field(default_factory=DistillerConfig)
    suite: tuple[str, ...] | None = None  # scenario ids of the gate's suite; None: every hand-written one

    def q(self, rules: int) -> float:
        return round(max(self.q_min, self.q0 - self.q_slope * rules), 4)

    def as_dict(self) -> dict:
        return {"seed": self.seed, "jobs": self.jobs, "cap": self.cap, "distill_every": self.distill_every,
                "q": f"max({self.q_min}, {self.q0} - {self.q_slope} x rules in the playbook)",
                "suite_trials": self.suite_trials, "suite_drop": self.suite_drop,
                "suite_accept_at": self.suite_accept_at, **self.distiller.as_dict()}


def gate_options(policy: str, cfg: LoopConfig, replay: ReplayOptions, cache: Path, suite_size: int) -> gate.GateOptions:
    """The seed's single-run gate, or Replaybook's sequential gate, over the same Runner and cache."""
    if policy == "single_run":  # one run without, one with, one run of each suite scenario
        return gate.GateOptions(replay=replay, jobs=cfg.jobs, cache_dir=cache,
                                test=stats.SequentialTest(before_n=1, before_max_pass=0, after_n=1, after_min_pass=1),
                                suite=stats.SuiteTest(baseline_n=1, max_n=1, reject_at=0.5, accept_at=-0.5,
                                                      suite_size=max(1, suite_size), on_demand=False))
    # The product's gate as it ships: its own-scenario test and its suite test (the baseline on demand).
    opts = gate.GateOptions(replay=replay, jobs=cfg.jobs, cache_dir=cache)
    variant = {name: value for name, value in (("baseline_n", cfg.suite_trials), ("drop", cfg.suite_drop),
                                               ("accept_at", cfg.suite_accept_at)) if value is not None}
    return replace(opts, suite=replace(opts.suite, **variant)) if variant else opts


def reason_class(result: gate.GateResult) -> str:
    why = result.reason
    if result.decision == "error":
        return "error"
    if "passed without the rule" in why:
        return "passes without the rule"
    if "still failed with the rule" in why:
        return "fails with the rule"
    if why.startswith("regressed"):
        return "regression"
    if why.startswith("cheap checks"):
        return "cheap checks"
    if why.startswith("unsound"):
        return "unsound scenario"
    return "other"


@dataclass
class Week:
    week: int
    tasks: int = 0
    failures: int = 0
    repeats: int = 0
    unscored: int = 0
    proposals: int = 0
    admitted: int = 0
    admitted_harmful: int = 0
    retired: int = 0
    rejections: Counter = field(default_factory=Counter)
    distill_refused: int = 0
    replays: int = 0  # the gate's replays (each distinct trial once, cached or not)
    model_calls: int = 0  # the gate's replays' model calls, plus capture and distill
    cost_usd: float = 0.0  # the loop's simulated cost: gate replays, capture, distill
    task_replays: int = 0
    task_cost_usd: float = 0.0
    playbook_size: int = 0
    harmful_in_playbook: int = 0
    harmful_ever: int = 0
    harmful_big: int = 0  # cumulative: of harmful_ever, those whose harm is at least the suite test's design drop
    useless_admitted: int = 0  # cumulative: admitted rules whose effect is below 0.1 (noisy preset; else 0)
    good_rejected: int = 0  # rules with a real effect refused this week (noisy preset; else 0)
    gated: int = 0  # proposals that went through a gate's replays (noisy preset; else 0)
    repeat_causes: Counter = field(default_factory=Counter)
    reproposals: int = 0  # proposals made again after a refusal, with its reason (noisy preset)
    escalated: int = 0  # ignored rules escalated to a guard or a rewording (noisy preset)
    replays_by: Counter = field(default_factory=Counter)  # (gate outcome, purpose) -> fresh gate replays (noisy)
    gates_by: Counter = field(default_factory=Counter)  # gate outcome -> gate runs (noisy preset)
    q: float = 1.0
    cost_per_admission: float | None = None  # cumulative loop cost / cumulative admissions

    @property
    def repeat_share(self) -> float:
        return round(self.repeats / self.failures, 4) if self.failures else 0.0


class PolicyRun:
    def __init__(self, policy: str, stream: Stream, cfg: LoopConfig, root: Path, cache: Path,
                 progress: Callable[[str], None] = lambda _: None):
        self.policy, self.stream, self.cfg, self.progress = policy, stream, cfg, progress
        self.ws = root / policy
        shutil.rmtree(self.ws, ignore_errors=True)
        self.ws.mkdir(parents=True)
        cap = UNCAPPED if policy == "unvalidated" else cfg.cap
        (self.ws / ".replaybook.yml").write_text(f"# loop benchmark workspace ({policy})\ncap: {cap}\n",
                                                 encoding="utf-8")
        install(list(stream.modes.values()), self.ws / "scenarios", self.ws / "suite", cfg.suite)
        self.settings = config.load(self.ws)
        self.store = IncidentStore(self.settings.path("incidents"))
        self.book = Playbook(self.settings.path("playbook"), root=self.ws, cap=cap, incidents=self.store)
        self.cache = cache
        self.replay = ReplayOptions(model=SCRIPTED, seed=cfg.seed, runs_dir=cache.parent / "runs")
        self.tasks = gate.Runner(gate.GateOptions(replay=self.replay, cache_dir=cache))
        self.sim = SimulatedModel(stream.modes, cfg.seed, cfg.distiller)
        self.failed_modes: set[str] = set()
        self.harmful_ids: set[str] = set()
        self.harmful_ever = 0
        self.seen_trials: set[str] = set()
        self.seen_controls: set[str] = set()
        self.loop_cost = 0.0
        self.admissions = 0
        self.new_incidents = 0
        self.weeks: list[Week] = []
        self.prompts: list[tuple[int, int]] = []  # (task index, rules in the playbook it was replayed with)

    @property
    def loop(self) -> bool:
        return self.policy != "none"

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> list[Week]:
        from bot.model.llm import LLM

        with Gateway(self.sim) as gw:
            self.llm = LLM.connect(SCRIPTED, api_key=gw.token, base_url=gw.url, simulated=True, max_retries=0,
                                   max_tokens=8192)
            for tasks in self.stream.weeks:
                week = Week(tasks[0].week)
                self._week(week, tasks)
                if self.loop:
                    self._distill(week, self._day(week.week, 6))
                self._close(week)
                self.weeks.append(week)
                self.progress(f"{self.policy}: week {week.week}: {week.failures} failures, {week.repeats} repeats, "
                              f"playbook {week.playbook_size}, {week.replays} gate replays")
        return self.weeks

    def _week(self, week: Week, tasks: list[Task]) -> None:
        pending = list(tasks)
        while pending:
            text, q = self.book.render_text(), self.cfg.q(len(self.book.admitted()))
            results = self._replay_tasks(pending, text, q)
            done = 0
            for task, result in zip(pending, results):
                done += 1
                self._record(week, task, result)
                if self.loop and self.new_incidents >= self.cfg.distill_every:
                    if self._distill(week, self._day(week.week, min(6, task.index % len(tasks)))):
                        break  # the playbook changed: the rest of the week runs with the new one
            pending = pending[done:]

    def _replay_tasks(self, tasks: list[Task], text: str, q: float) -> list[TrialResult]:
        opts = replace(self.replay, follow=q)
        rules = len(self.book.admitted())

        def one(task: Task) -> TrialResult:
            loaded = sc.load(self.ws / "scenarios" / task.mode)
            result = self.tasks.trial(loaded, text, task.index, opts)
            if result.verdict == "failed" and not _trace(result).is_file():  # a cache hit whose run folder is gone
                result = run_trial(loaded, text, opts, task.index)
            return result

        with ThreadPoolExecutor(max_workers=max(1, self.cfg.jobs)) as pool:
            results = list(pool.map(one, tasks))
        self.prompts += [(t.index, rules) for t in tasks]
        return results

    def _record(self, week: Week, task: Task, result: TrialResult) -> None:
        week.tasks += 1
        week.task_replays += 1
        week.task_cost_usd += result.cost_usd
        mode = self.stream.modes[task.mode]
        if result.verdict == "unscored":
            week.unscored += 1
            return
        if result.verdict == "passed":
            self._hits(mode.branch_on, self._day(week.week, 0))
            return
        week.failures += 1
        week.repeats += mode.id in self.failed_modes
        self.failed_modes.add(mode.id)
        if self.loop:
            self._capture(task, result, week)

    def _hits(self, branch_on: str, on: date) -> None:
        """The simulated agent cites the rules it followed: those that say its scenario's branch words."""
        cited = [r.id for r in self.book.admitted() if branch_on.casefold() in " ".join(r.rule.split()).casefold()]
        if cited:
            self.book.hit(" ".join(f"[{rid}]" for rid in cited), on)

    def _capture(self, task: Task, result: TrialResult, week: Week) -> None:
        evidence = capture.evidence_from_transcript(_trace(result))
        loaded = sc.load(self.ws / "scenarios" / task.mode)
        when = datetime.combine(self._day(task.week, task.index % 7), datetime.min.time(), tzinfo=timezone.utc)
        calls = self.llm.usage.calls, self.llm.usage.cost_usd
        got = capture.capture(evidence, self.store, self.llm, task=loaded.scenario.task,
                              task_type=loaded.scenario.task_type, key=f"loop-task-{task.index}",
                              now=when + timedelta(minutes=task.index))
        self._charge_llm(week, calls)
        self.new_incidents += got.created

    def _charge_llm(self, week: Week, before: tuple[int, float]) -> None:
        week.model_calls += self.llm.usage.calls - before[0]
        spent = self.llm.usage.cost_usd - before[1]
        week.cost_usd += spent
        self.loop_cost += spent

    # -- distill, gate, admit ------------------------------------------------------------------

    def _distill(self, week: Week, today: date) -> bool:
        """One distill round and its gates; whether the playbook changed."""
        self.new_incidents = 0
        calls = self.llm.usage.calls, self.llm.usage.cost_usd
        report = distill.distill(self.settings, self.llm, today=today)
        self._charge_llm(week, calls)
        week.distill_refused += sum(r.what == "refused" for r in report.refusals)
        proposals = sorted(report.proposals, key=lambda p: p.id)
        week.proposals += len(proposals)
        if not proposals:
            return False
        if self.policy == "unvalidated":
            decisions = [("admit", "") for _ in proposals]
        else:
            decisions = self._gate(week, proposals)
        changed = False
        for proposal, (decision, why) in zip(proposals, decisions):
            path = Path(proposal.path)
            if decision == "admit":
                try:
                    admission = self.book.admit(path, today, recheck=gate.twins)
                except BadInput as exc:
                    decision, why = "reject", "cheap checks"  # a twin admitted meanwhile in this round
                    self.progress(f"{self.policy}: {proposal.id} not admitted: {exc.message}")
                else:
                    changed = True
                    self._admitted(week, proposal, admission)
                    continue
            week.rejections[why] += 1
            path.unlink(missing_ok=True)  # as a closed rule PR: its incidents may be proposed again
        return changed

    def _admitted(self, week: Week, proposal, admission) -> None:
        self.admissions += 1
        week.admitted += 1
        week.retired += len(admission.retired)
        if self.sim.kind_of(proposal.rule) == "harmful":
            self.harmful_ids.add(proposal.id)
            self.harmful_ever += 1
            week.admitted_harmful += 1

    def _gate(self, week: Week, proposals) -> list[tuple[str, str]]:
        admitted = len(self.book.admitted())
        replay = replace(self.replay, follow=self.cfg.q(admitted + 1))
        suite = self.ws / "suite"
        opts = gate_options(self.policy, self.cfg, replay, self.cache, len(list(suite.glob("*/scenario.yaml"))))

        def one(proposal) -> gate.GateResult:
            return gate.run_gate(self.book, Path(proposal.path), suite, opts)

        with ThreadPoolExecutor(max_workers=max(1, self.cfg.jobs)) as pool:
            results = list(pool.map(one, proposals))
        out = []
        for proposal, result in zip(proposals, results):
            self._charge_gate(week, proposal, result)
            out.append((result.decision, "" if result.decision == "admit" else reason_class(result)))
        return out

    def _charge_gate(self, week: Week, proposal, result: gate.GateResult) -> None:
        """Count each distinct trial once per policy, whether it ran now or came from the cache."""
        sides = [*result.screen, result.before, result.after,
                 *[s for e in result.suite for s in (e.baseline, e.candidate)]]
        ran_control = not result.reason.startswith("cheap checks")  # the do-nothing control ran first
        if ran_control and proposal.scenario not in self.seen_controls:
            self.seen_controls.add(proposal.scenario)
            week.replays += 1
        for side in sides:
            for trial in side.trials if side else ():
                key = trial.run_dir or f"{trial.scenario}:{trial.trial}:{id(trial)}"
                if key in self.seen_trials:
                    continue
                self.seen_trials.add(key)
                week.replays += 1
                week.model_calls += trial.model_calls
                week.cost_usd += trial.cost_usd
                self.loop_cost += trial.cost_usd

    # -- the week's figures ---------------------------------------------------------------------

    def _close(self, week: Week) -> None:
        admitted = {r.id for r in self.book.admitted()}
        week.playbook_size = len(admitted)
        week.harmful_in_playbook = len(admitted & self.harmful_ids)
        week.harmful_ever = self.harmful_ever
        week.q = self.cfg.q(len(admitted))
        week.cost_usd = round(week.cost_usd, 6)
        week.task_cost_usd = round(week.task_cost_usd, 6)
        week.cost_per_admission = round(self.loop_cost / self.admissions, 4) if self.admissions else None

    @staticmethod
    def _day(week: int, day: int) -> date:
        return START + timedelta(days=7 * (week - 1) + day)


def _trace(result: TrialResult) -> Path:
    return Path(result.run_dir or "/nonexistent") / "trace.jsonl"
