"""``--preset noisy``: the loop under the noisy agent of ``loopbench.noise`` (SIMULATED), gated by ``bot.gate.stats``.

The same stream as the default run (``loopbench.stream``) and the same loop
(capture each failure, distill after ``distill_every`` new incidents and
weekly, gate each proposal, admit or refuse), but a run is not a sandbox
replay: its outcome is drawn from the noise model, and each gate decides on
those outcomes with the product's own tests (``SequentialTest``,
``PairedTest``, ``SuiteTest`` of ``bot.gate.stats``), trial by trial, as
``bot.gate.decision`` does. That is what lets three seeds of twelve weeks run
in seconds; what it cannot show (prompts, sandbox, checks) the default preset
shows. Replays are counted one per trial and priced at the default run's
measured mean (SIMULATED prices).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from bot.gate import stats
from bot.playbook.worth import compliance
from loopbench.catalogue import guard as guard_of
from loopbench.noise import REGRESSION, Noise, NoiseConfig, Proposal, _rng
from loopbench.run import LoopConfig, Week
from loopbench.stream import Stream

NOISY_POLICIES = ("none", "single_run", "unvalidated", "replaybook_v1", "replaybook", "replaybook_carry")
# Measured on the default run (bench/loopbench/results-2026-12-02.json, SIMULATED prices): the mean cost of one
# replay (task replays), and of one capture or distill call (unvalidated: $1.01 over 89 calls).
REPLAY_USD = 0.0183
CALL_USD = 0.0113
SINGLE_SUITE = stats.SuiteTest(baseline_n=1, max_n=1, reject_at=0.5, accept_at=-0.5, on_demand=False)


@dataclass
class NoisyGate:
    """How a policy gates: the own-scenario test and the suite test."""

    own: str  # single | sequential | paired
    suite: stats.SuiteTest
    carry: bool = False  # after an admission, a suite baseline starts from the trials already run with the new playbook
    sequential: stats.SequentialTest = field(default_factory=stats.SequentialTest)
    paired: stats.PairedTest = field(default_factory=stats.PairedTest)

    def describe(self) -> str:
        own = {"single": "1 run without the rule (must fail), 1 with (must pass)",
               "sequential": self.sequential.describe(), "paired": self.paired.describe()}[self.own]
        carry = ("; after an admission each baseline starts from the admitted rule's own trials with the new "
                 "playbook (its suite candidate trials, its own 'after' trials), topped up with the previous "
                 "baseline's, never refreshed" if self.carry else "")
        return f"{own}; suite: {self.suite.describe()}{carry}"


def gates(suite_trials: int = 40) -> dict[str, NoisyGate]:
    product = replace(stats.SuiteTest(), baseline_n=suite_trials)
    return {"single_run": NoisyGate("single", SINGLE_SUITE),
            "replaybook_v1": NoisyGate("sequential", product),  # the product's gate before issue 28
            "replaybook": NoisyGate("paired", product),  # the product's default on a noisy agent (`gate.own_test: auto`)
            "replaybook_carry": NoisyGate("paired", product, carry=True)}  # an economy tried: baselines carried


class NoisyRun:
    def __init__(self, policy: str, stream: Stream, noise: Noise, cfg: LoopConfig, gate: NoisyGate | None,
                 reproposals: int = 0, escalate: bool = False):
        self.policy, self.stream, self.noise, self.cfg, self.gate = policy, stream, noise, cfg, gate
        # After a refusal, distill proposes again for the mode with the refusal's reason, at most this often per
        # mode over the run (0: it does not; the mode waits for its next incidents and a fresh, uninformed proposal).
        self.reproposals = reproposals if gate is not None else 0
        self.escalate = escalate and gate is not None  # an ignored rule becomes a guard (bot.health.escalation)
        self.reasons: dict[str, str] = {}  # mode -> the reason its last proposal was refused
        self.parked: dict[str, str] = {}  # mode -> why distill stopped proposing for it (a person decides)
        self.used: Counter = Counter()  # mode -> its re-proposals so far
        self.since: Counter = Counter()  # mode -> repeats since its rule was admitted (bot.playbook.worth)
        self.guards: dict[str, str] = {}  # escalated mode -> 'hook' | 'ci' | '' (a rewording: no guard)
        self.last: dict[str, Proposal] = {}  # mode -> its last proposal
        self.rules: list[Proposal] = []
        self.version = 0  # bumps when the playbook changes: every baseline is stale then
        self.baselines: dict[tuple[str, int], list[bool]] = {}
        self.evidence: dict[str, dict[str, list[bool]]] = {}  # proposal -> scenario -> trials with it admitted
        self.pending: Counter = Counter()
        self.proposed: Counter = Counter()
        self.refused: Counter = Counter()
        self.refused_good: Counter = Counter()
        self.failed: set[str] = set()
        self.controls: set[str] = set()
        self.new_incidents = 0
        self.harmful_ever = self.useless_ever = self.admissions = 0
        self.loop_cost = 0.0
        self.weeks: list[Week] = []

    @property
    def cap(self) -> int:
        return 1000 if self.policy == "unvalidated" else self.cfg.cap

    def q(self, extra: int = 0) -> float:
        return self.cfg.q(len(self.rules) + extra)

    def run(self) -> list[Week]:
        for tasks in self.stream.weeks:
            week = Week(tasks[0].week)
            for task in tasks:
                self._task(week, task)
                if self.policy != "none" and self.new_incidents >= self.cfg.distill_every:
                    self._distill(week)
            if self.policy != "none":
                self._distill(week)
            self._close(week)
            self.weeks.append(week)
        return self.weeks

    def _task(self, week: Week, task) -> None:
        week.tasks += 1
        week.task_replays += 1
        week.task_cost_usd += REPLAY_USD
        if self.noise.run(task.mode, self.rules, self.q(), "task", task.index, guard=self.guards.get(task.mode, "")):
            return
        week.failures += 1
        if task.mode in self.failed:
            week.repeats += 1
            week.repeat_causes[self._cause(task.mode)] += 1
        self.failed.add(task.mode)
        if any(r.mode == task.mode for r in self.rules):
            self.since[task.mode] += 1
            self._escalate(week, task.mode)
        if self.policy != "none":
            self._spend(week, CALL_USD, calls=1)  # capture
            self.pending[task.mode] += 1
            self.new_incidents += 1

    def _escalate(self, week: Week, mode: str) -> None:
        """An ignored rule (``bot.playbook.worth.compliance``: 2 repeats since its admission) is escalated, as
        ``replaybook playbook escalate`` / the dashboard's guard PR do: its scenario's checks become a hook or a
        CI guard (``bot.health.escalation``), or, with neither, a rewording for a person (no effect here)."""
        if not self.escalate or mode in self.guards or compliance(self.since[mode]) != "ignored":
            return
        self.guards[mode] = guard_of(self.stream.modes[mode])
        week.escalated += 1

    def _cause(self, mode: str) -> str:
        """Why a mode failed again: the named causes of a repeat."""
        rule = next((r for r in self.rules if r.mode == mode), None)
        if mode in self.guards:
            return {"hook": "escalated to a hook, slipped through", "ci": "escalated to a CI guard, not fixed",
                    "": "ignored rule, no guard possible (rewording)"}[self.guards[mode]]
        if rule is not None:
            return "useless rule" if rule.effect < self.noise.config.useless_below else "rule, failed anyway"
        if mode in self.parked:
            return self.parked[mode]
        if self.stream.modes[mode].harmful_rule:
            return "no safe rule"
        if self.policy == "none":
            return "no loop"
        if self.refused_good[mode]:
            return "a good rule refused"
        if self.refused[mode]:
            return "only useless proposals so far"
        return "not proposed yet"

    def _spend(self, week: Week, usd: float, calls: int = 0, replays: int = 0) -> None:
        week.cost_usd += usd
        week.model_calls += calls
        week.replays += replays
        self.loop_cost += usd

    def _distill(self, week: Week) -> None:
        self.new_incidents = 0
        covered = {r.mode for r in self.rules}
        modes = sorted(m for m in self.pending if m not in covered)
        self.pending.clear()
        if not modes:
            return
        self._spend(week, CALL_USD, calls=1)
        for mode in modes:
            if mode in self.parked:
                continue
            proposal = self._draw(week, mode, again=False)
            while True:
                why = self._propose(week, proposal)
                if not why or why == "cap":
                    break
                self.reasons[mode] = why
                if why == REGRESSION and proposal.scope:  # regressed even within its own task type
                    self.parked[mode] = "no safe rule"
                    break
                if self.used[mode] >= self.reproposals:
                    if self.reproposals:
                        self.parked[mode] = "re-proposals used up"
                    break
                proposal = self._draw(week, mode, again=True)  # the reason goes back to distill: it proposes again

    def _draw(self, week: Week, mode: str, again: bool) -> Proposal:
        """The mode's next proposal. With re-proposals on and an earlier refusal it is made with that refusal's
        reason (``Noise.reproposal``); ``again``: straight after the refusal, a distill call of its own."""
        k = self.proposed[mode]
        self.proposed[mode] += 1
        why = self.reasons.get(mode)
        if not (self.reproposals and why):
            return self.noise.proposal(mode, k)
        if again:
            self._spend(week, CALL_USD, calls=1)
        week.reproposals += 1
        self.used[mode] += 1
        return self.noise.reproposal(mode, k, why, self.last[mode])

    def _propose(self, week: Week, proposal: Proposal) -> str:
        """One proposal through the gate: '' admitted, else the refusal's reason class."""
        mode = proposal.mode
        self.last[mode] = proposal
        week.proposals += 1
        if len(self.rules) >= self.cap:
            self.refused[mode] += 1
            self.refused_good[mode] += proposal.kind == "good"
            week.rejections["cap"] += 1
            return "cap"
        why = "" if self.gate is None else self._gate(week, proposal)
        if why:
            self.refused[mode] += 1
            self.refused_good[mode] += proposal.kind == "good"
            week.rejections[why] += 1
            week.good_rejected += proposal.kind == "good"
            return why
        self.rules.append(proposal)
        self._carry(proposal)
        self.version += 1
        self.admissions += 1
        week.admitted += 1
        if proposal.kind == "harmful":
            self.harmful_ever += 1
            week.admitted_harmful += 1
        if proposal.effect < self.noise.config.useless_below:
            self.useless_ever += 1
        return ""

    def _carry(self, proposal: Proposal) -> None:
        """With ``carry``: the next version's baselines, from trials already run with this playbook."""
        seen = self.evidence.pop(proposal.id, {})
        if not (self.gate and self.gate.carry):
            return
        n = self.gate.suite.baseline_n
        for sid in self.noise.suite:
            old = self.baselines.get((sid, self.version))
            if old is not None or sid in seen:
                self.baselines[(sid, self.version + 1)] = (seen.get(sid, []) + (old or []))[:n]

    # -- the gate: trials drawn from the noise model, decided by bot.gate.stats ------------------------

    def _trial(self, week: Week, mode: str, rules: list[Proposal], q: float, *key) -> bool:
        self._spend(week, REPLAY_USD, calls=1, replays=1)
        return self.noise.run(mode, rules, q, "gate", *key)

    def _gate(self, week: Week, proposal: Proposal) -> str:
        """'' to admit, else the rejection's reason class (as the default preset's ``reason_class``)."""
        gate, pid, mode = self.gate, proposal.id, proposal.mode
        before_q, after_q, after = self.q(), self.q(1), [*self.rules, proposal]
        if mode not in self.controls:  # the do-nothing control, once per scenario
            self.controls.add(mode)
            self._spend(week, REPLAY_USD, calls=0, replays=1)
        seen = self.evidence.setdefault(pid, {})
        if gate.own == "paired":
            wins = losses = pairs = 0
            while gate.paired.decide(wins, losses, pairs) == "continue":
                b = self._trial(week, mode, self.rules, before_q, "before", pid, pairs)
                a = self._trial(week, mode, after, after_q, "after", pid, pairs)
                seen.setdefault(mode, []).append(a)
                wins, losses, pairs = wins + (a and not b), losses + (b and not a), pairs + 1
            if gate.paired.decide(wins, losses, pairs) == "fail":
                return "no difference with the rule"
        else:
            test = gate.sequential if gate.own == "sequential" else stats.SequentialTest(1, 0, 1, 1)
            if self._side(week, test.before, mode, self.rules, before_q, "before", pid) != "pass":
                return "passes without the rule"
            if self._side(week, test.after, mode, after, after_q, "after", pid, seen.setdefault(mode, [])) != "pass":
                return "fails with the rule"
        return "regression" if self._regresses(week, proposal, after, before_q, after_q) else ""

    def _side(self, week: Week, decide, mode, rules, q, side, pid, into: list | None = None) -> str:
        passes = fails = 0
        while (state := decide(passes, fails)) == "continue":
            ok = self._trial(week, mode, rules, q, side, pid, passes + fails)
            passes, fails = passes + ok, fails + (not ok)
            if into is not None:
                into.append(ok)
        return state

    def _regresses(self, week: Week, proposal: Proposal, after: list[Proposal], before_q: float,
                   after_q: float) -> bool:
        test = self.gate.suite
        # Every other scenario is judged, scoped rule or not, as the product's gate does by default
        # (``GateOptions.scope_reach`` off: AGENTS.md is read whole). The noise model lets a scoped rule's
        # harm reach only its own task type (``noise.reproposal``), so out of scope it can only cost replays.
        suite = [s for s in self.noise.suite if s != proposal.mode]
        if self.gate.own == "single":  # the seed's one-run suite check, its boundary set for this suite
            test = replace(test, suite_size=max(1, len(suite)))
        regressed = False
        for sid in suite:  # every scenario is judged (as the product does), not only until the first regression
            regressed |= self._judge(week, test, len(suite), sid, proposal, after, before_q, after_q) == "fail"
        return regressed

    def _judge(self, week: Week, test: stats.SuiteTest, k: int, sid: str, proposal: Proposal,
               after: list[Proposal], before_q: float, after_q: float) -> str:
        """One suite scenario, in the order of ``bot.gate.decision._judge`` (the baseline on demand)."""
        base = self.baselines.setdefault((sid, self.version), [])  # per playbook version, shared by candidates
        cand = self.evidence[proposal.id].setdefault(sid, [])
        key = f"{proposal.id}@{sid}"
        if test.on_demand and len(base) < test.baseline_n:
            state = self._side(week, lambda p, f: test.pessimistic(p, f, k), sid, after, after_q, "candidate",
                               key, cand)
            if state == "pass":
                return "pass"  # it cleared a baseline that never failed: the baseline is not run
        n = test.baseline_n
        while len(base) < n and not (test.on_demand and
                                     test.settled(sum(base), sum(base) + n - len(base), cand, k) != "continue"):
            base.append(self._trial(week, sid, self.rules, before_q, "baseline", sid, self.version, len(base)))
        if len(base) < n:  # settled on part of the baseline (kept for the next candidate of this playbook)
            return test.settled(sum(base), sum(base) + n - len(base), cand, k)
        base_passes, base_n = sum(base), len(base)
        if base_passes == 0:
            return "pass"  # not judged: it fails with the current playbook too
        state = test.settle(base_passes, base_n, cand, k)
        while state == "continue":
            ok = self._trial(week, sid, after, after_q, "candidate", key, len(cand))
            cand.append(ok)
            state = test.decide(base_passes, base_n, sum(cand), len(cand) - sum(cand), k)
        return state

    def _close(self, week: Week) -> None:
        week.playbook_size = len(self.rules)
        week.harmful_in_playbook = sum(r.kind == "harmful" for r in self.rules)
        week.harmful_ever = self.harmful_ever
        week.useless_admitted = self.useless_ever
        week.q = self.q()
        week.cost_usd = round(week.cost_usd, 6)
        week.task_cost_usd = round(week.task_cost_usd, 6)
        week.cost_per_admission = round(self.loop_cost / self.admissions, 4) if self.admissions else None


def suite_modes(stream: Stream) -> list[str]:
    """The gate's suite: the hand-written scenarios, not the one-offs (as in the default preset)."""
    return sorted(m.id for m in stream.modes.values() if m.kind != "oneoff")


def learning(reproposals: int, escalate: bool) -> str:
    """The loop's learning from refusals and ignored rules, as the parameters state it (gated policies only)."""
    out = (f"after a refusal distill proposes again for the mode with the refusal's reason, at most {reproposals} "
           "times per mode (scoped to the mode's task type; after a regression the same rule scoped, after 'not "
           "discriminative' not one the agent already follows); a mode whose scoped rule regresses, or whose "
           "re-proposals are used up, is left to a person" if reproposals else "no re-proposals")
    return out + ("; an ignored rule (2 repeats since admission) is escalated to a hook or CI guard from its "
                  "scenario's checks, or a rewording" if escalate else "; no escalation")


def run_seed(stream: Stream, seed: int, cfg: LoopConfig, noise_cfg: NoiseConfig, names: list[str],
             suite_trials: int = 40, reproposals: int = 0, escalate: bool = False,
             table: dict[str, NoisyGate] | None = None) -> dict[str, list[Week]]:
    noise = Noise(noise_cfg, seed, stream.modes, suite_modes(stream))
    table = table or gates(suite_trials)
    return {n: NoisyRun(n, stream, noise, replace(cfg, seed=seed), table.get(n), reproposals, escalate).run()
            for n in names}


class _Oracle(Noise):
    """The best a loop can do under this noise: every mode with a safe rule gets a good rule (effect drawn as a
    good proposal's, or ``effect``), admitted at once with no gate."""

    def __init__(self, *args, effect: float | None = None):
        super().__init__(*args)
        self.effect = effect

    def proposal(self, mode: str, k: int, not_redundant: bool = False) -> Proposal:
        m, c = self.modes[mode], self.config
        if m.kind == "done-right" or m.harmful_rule:
            return Proposal(mode, k, "redundant", 0.0)
        e = self.effect if self.effect is not None else _rng(self.seed, "oracle", mode).betavariate(c.e_alpha, c.e_beta)
        return Proposal(mode, k, "good", round(e, 4))


def floor(streams: dict[int, Stream], cfg: LoopConfig, noise_cfg: NoiseConfig, escalate: bool,
          effect: float | None = None) -> dict:
    """The oracle's repeats over the last 4 weeks, summed over the seeds: about the repeat share no gate beats."""
    fails = repeats = 0
    for seed, stream in streams.items():
        noise = _Oracle(noise_cfg, seed, stream.modes, suite_modes(stream), effect=effect)
        run = NoisyRun("oracle", stream, noise, replace(cfg, seed=seed), None)
        run.escalate = escalate
        weeks = run.run()[-4:]
        fails, repeats = fails + sum(w.failures for w in weeks), repeats + sum(w.repeats for w in weeks)
    return {"failures_last4": fails, "repeats_last4": repeats,
            "repeat_share_last4": round(repeats / fails, 4) if fails else 0.0}
