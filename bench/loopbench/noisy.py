"""``--preset noisy``: the loop under the noisy agent of ``loopbench.noise`` (SIMULATED), gated by the product's code.

The same stream as the default run (``loopbench.stream``) and the same loop
(capture each failure, distill after ``distill_every`` new incidents and
weekly, gate each proposal, admit or refuse), but a run is not a sandbox
replay: its outcome is drawn from the noise model. Each gate is the product's
own decision code (``loopbench.simgate``: ``bot.gate.decision.Runner`` with its
trials drawn instead of replayed), at the options the policy names. Replays
are counted one per trial drawn (a trial the product's cache would hold is
not drawn again).

Every policy gets only what the product does: distill re-proposes a refused
rule with the gate's reason at its next run, at most ``reproposals`` times per
incident (``bot.distill.refusals``: new incidents get fresh tries), and an
ignored rule is escalated to a guard (``bot.health.escalation``) in every
policy that has rules, gated or not. Nothing else: no mode is ever set aside.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from dataclasses import replace

from bot.gate.result import GateOptions
from bot.gate.stats import SuiteTest
from bot.playbook.worth import compliance
from loopbench import simgate
from loopbench.catalogue import Mode
from loopbench.catalogue import guard as guard_of
from loopbench.noise import Noise, NoiseConfig, Proposal, _rng
from loopbench.run import LoopConfig, Week
from loopbench.scope import ScopeConfig, Scopes
from loopbench.stream import Stream

NOISY_POLICIES = ("none", "single_run", "single_run_fair", "unvalidated", "replaybook", "oracle")
EXTRA_POLICIES = ("replaybook_v1",)  # the product with `gate.own_test: sequential` (its default before issue 28)
# Measured on the default run (bench/loopbench/results-2026-12-02.json, SIMULATED prices): the mean cost of one
# replay (task replays), and of one capture or distill call (unvalidated: $1.01 over 89 calls).
REPLAY_USD = 0.0183
CALL_USD = 0.0113
HAND_WRITTEN_SUITE = 13
DESIGN_DROP = SuiteTest().drop  # the drop in pass rate the product's suite test is built to catch (0.35)


def gates(suite_size: int, product: GateOptions | None = None) -> dict[str, GateOptions]:
    """Each gated policy's options (``product``: the product's gate, default ``simgate.product_options()``)."""
    product = product or simgate.product_options()
    from bot.gate import stats

    table = {"single_run": simgate.single_run_options(suite_size - 1),
             "single_run_fair": replace(product, test=stats.SequentialTest(1, 0, 1, 1)),
             "replaybook": product,
             "replaybook_v1": replace(product, test=stats.SequentialTest())}
    return {name: simgate.memoised(opts) for name, opts in table.items()}


def describe(opts: GateOptions) -> str:
    from bot.gate import suite_check

    return f"own scenario: {opts.test.describe()}; suite: {suite_check.suite_test(opts).describe()}"


def suite_extra(n: int, task_types: list[str]) -> Mode:
    """Suite scenario ``n`` beyond the hand-written ones: a task the agent does right (SIMULATED, never a task of
    the stream), of a task type taken in turn from the hand-written modes'."""
    return Mode(f"suite-{n:03d}", "done-right", f"Suite task {n}.", "", "", task_type=task_types[n % len(task_types)])


def suite_modes(stream: Stream, size: int | None = None) -> list[str]:
    """The gate's suite: the hand-written scenarios (not the one-offs), and with ``size`` above their number,
    done-right scenarios up to ``size`` (added to ``stream.modes``)."""
    ids = sorted(m.id for m in stream.modes.values() if m.kind != "oneoff" and not m.id.startswith("suite-"))
    if size is not None and size > len(ids):
        types = sorted({stream.modes[i].task_type for i in ids})
        for n in range(size - len(ids)):
            mode = suite_extra(n, types)
            stream.modes.setdefault(mode.id, mode)
            ids.append(mode.id)
    return ids[:size] if size else ids


class NoisyRun:
    def __init__(self, policy: str, stream: Stream, noise: Noise, cfg: LoopConfig, gate: GateOptions | None,
                 reproposals: int = 0, escalate: bool = False):
        if gate is not None and noise.scopes is not None and noise.scopes.whole_file:
            gate = replace(gate, scope_reach=False)  # a host that reads the whole file: every rule is global
        self.policy, self.stream, self.noise, self.cfg, self.gate = policy, stream, noise, cfg, gate
        # A refused proposal is answered at distill's next run, at most this often per incident (0: never).
        self.reproposals = reproposals if gate is not None else 0
        self.escalate = escalate and policy != "none"  # an ignored rule becomes a guard, whatever the gate
        self.reasons: dict[str, str] = {}  # mode -> the reason its last proposal was refused (still open)
        self.used: Counter = Counter()  # mode -> re-proposals since its last new incident
        self.since: Counter = Counter()  # mode -> repeats since its rule was admitted (bot.playbook.worth)
        self.guards: dict[str, str] = {}  # escalated mode -> 'hook' | 'ci' | '' (a rewording: no guard)
        self.last: dict[str, Proposal] = {}  # mode -> its last proposal
        self.rules: list[Proposal] = []
        self.store: dict = {}  # the gate's trials, as the product's replay cache keeps them
        self.gated = 0  # gate runs so far (each its own salt where trials are not cached)
        self.judged: set[str] = set()  # proposals gated at least once
        self.open: dict[str, Proposal] = {}  # mode -> its proposal an inconclusive gate left proposed
        self.cache = policy != "single_run"  # the seed's gate keeps no trial from one gate to the next
        self.fresh_own = policy == "single_run_fair"  # its one run each way is the seed's: never cached
        self.texts: dict[str, tuple[list[Proposal], float]] = {}  # playbook text -> (its rules, q)
        self.pending: Counter = Counter()
        self.proposed: Counter = Counter()
        self.refused: Counter = Counter()
        self.refused_good: Counter = Counter()
        self.failed: set[str] = set()
        self.new_incidents = 0
        self.harmful_ever = self.harmful_big = self.useless_ever = self.admissions = 0
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
        if self.noise.run(task.mode, self.rules, self.q_for(task.mode), "task", task.index,
                          guard=self.guards.get(task.mode, "")):
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
            self.incident(task.mode)

    def incident(self, mode: str) -> None:
        """A captured failure: distill's next run proposes for it; fresh re-proposals (``bot.distill.refusals``
        counts them per incident)."""
        self.pending[mode] += 1
        self.used[mode] = 0
        self.new_incidents += 1

    def _escalate(self, week: Week, mode: str) -> None:
        """An ignored rule (``bot.playbook.worth.compliance``: 2 repeats since its admission) is escalated, as
        ``replaybook playbook escalate`` / the dashboard's guard PR do: its scenario's checks become a hook or a
        CI guard (``bot.health.escalation``), or, with neither, a rewording for a person (no effect here). It
        needs no gate, so every policy with rules gets it."""
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
        """One distill run: a proposal for each mode with new incidents, and a re-proposal (with the gate's
        reason) for each mode whose last proposal was refused and whose incidents have tries left."""
        self.new_incidents = 0
        covered = {r.mode for r in self.rules}
        retry = {m for m in self.reasons if self.used[m] < self.reproposals}
        modes = sorted((set(self.pending) | retry | set(self.open)) - covered)
        self.pending.clear()
        if not modes:
            return
        self._spend(week, CALL_USD, calls=1)
        for mode in modes:
            # An inconclusive gate left its rule proposed, its trials cached: the same gate goes on from there.
            proposal = self.open.pop(mode, None) or self._draw(week, mode)
            if proposal is None:
                continue
            why = self._propose(week, proposal)
            if why == "inconclusive":
                self.open[mode] = proposal
            elif why and why != "cap":
                self.reasons[mode] = why
            elif not why:
                self.reasons.pop(mode, None)

    def _draw(self, week: Week, mode: str) -> Proposal | None:
        """The mode's next proposal: with the last refusal's reason while its incidents have re-proposals left
        (``Noise.reproposal``), else a fresh one. None: nothing to propose (the oracle has no rule for it)."""
        k = self.proposed[mode]
        self.proposed[mode] += 1
        why = self.reasons.get(mode)
        if self.reproposals and why and self.used[mode] < self.reproposals:
            week.reproposals += 1
            self.used[mode] += 1
            return self.noise.reproposal(mode, k, why, self.last[mode])
        proposal = self.noise.proposal(mode, k)
        if self.policy == "oracle" and proposal.kind == "redundant":
            return None  # no safe rule, or nothing to fix: the oracle proposes nothing
        return proposal

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
        if why == "inconclusive":  # neither admitted nor refused: it stays proposed
            week.rejections[why] += 1
            return why
        if why:
            self.refused[mode] += 1
            self.refused_good[mode] += proposal.kind == "good"
            week.rejections[why] += 1
            week.good_rejected += proposal.kind == "good"
            return why
        self.rules.append(proposal)
        self.admissions += 1
        week.admitted += 1
        if self.noise.harms(proposal):
            self.harmful_ever += 1
            self.harmful_big += self.noise.harm_size(proposal) >= DESIGN_DROP
            week.admitted_harmful += 1
        if proposal.kind != "self-harm" and proposal.effect < self.noise.config.useless_below:
            self.useless_ever += 1
        return ""

    # -- the gate: the product's decision code on trials drawn from the noise model ------------------------

    def _text(self, rules: list[Proposal], q: float | None = None) -> str:
        """A prompt's text as the cache keys it: which rules (the same rules: the same text, any policy)."""
        text = "|".join(sorted(r.id + (f"@{r.scope}" if r.scope else "") + (f"/{r.area}" if r.area else "")
                               for r in rules))
        self.texts[text] = (rules, q)
        return text

    def reaching(self, sid: str, rules: list[Proposal]) -> list[Proposal]:
        """The rules whose scope reaches ``sid``'s prompt (all of them under whole-file delivery)."""
        sc = self.noise.scopes
        return rules if sc is None or sc.whole_file else [r for r in rules if sc.reaches(r.scope, r.area, sid)]

    def q_for(self, sid: str) -> float:
        """q for a run of ``sid``: IFScale's fall with the rules its prompt holds."""
        return self.cfg.q(len(self.reaching(sid, self.rules)))

    def _texts(self, proposal: Proposal):
        """Each scenario's (prompt, prompt with the candidate or None) as the gate keys them: where the host
        delivers by scope (``scope_reach``), the scenario's own scoped prompt (``decision.prompts``,
        ``suite_check.scoped_prompts``: the admitted rules whose task types and paths reach its fixture; the
        candidate by its task types alone when the reach test reads its paths from the trials), else the whole
        playbook."""
        whole = (self._text(self.rules), self._text([*self.rules, proposal]))
        sc = self.noise.scopes
        if not getattr(self.gate, "scope_reach", False) or sc is None or sc.whole_file:
            return lambda _sid: whole
        by_files = not getattr(self.gate, "reach_trigger", None)
        memo: dict = {}

        def texts(sid: str):
            got = memo.get(sid)
            if got is None:
                base = self.reaching(sid, self.rules)
                ok = sc.reaches(proposal.scope, proposal.area if by_files or sid == proposal.mode else "", sid)
                got = memo[sid] = (self._text(base), self._text([*base, proposal]) if ok else None)
            return got
        return texts

    def _draw_trial(self, sid: str, text: str, arm: str, index: int, salt: str = "") -> tuple[bool, frozenset]:
        rules, _q = self.texts[text]
        key = ("gate", sid, arm, _digest(text), index, *((salt,) if salt else ()))
        q = self.cfg.q(len(self.reaching(sid, rules)))
        return self.noise.run(sid, rules, q, *key), self.noise.touched(sid, *key)

    def _gate(self, week: Week, proposal: Proposal) -> str:
        """'' to admit, else the rejection's reason class (``simgate.decide``: the product's decision code)."""
        if proposal.id not in self.judged:  # a candidate counts once, however often an inconclusive gate goes on
            self.judged.add(proposal.id)
            week.gated += 1
        texts = self._texts(proposal)
        before, after = texts(proposal.mode)
        # The product caches every trial (scenario, text, arm, index) across gates; the seed's gate has no cache
        # (``single_run``: every trial its own), and ``single_run_fair`` runs its own scenario afresh each time
        # (one run each way, as the seed) before the product's suite check, with the product's cache.
        salt = f"gate{self.gated}"
        fresh = {"*": salt} if not self.cache else {proposal.mode: salt} if self.fresh_own else None
        self.gated += 1
        runner = simgate.SimRunner(self.gate, self._draw_trial, self.store if self.cache else {}, fresh)
        sc = self.noise.scopes
        scoped = sc is not None and not sc.whole_file
        reaches = (lambda sid: sc.reaches(proposal.scope, proposal.area, sid)) if scoped else (
            lambda sid: not proposal.scope or self.noise.task_type(sid) == proposal.scope)
        verdict = simgate.decide(self.gate, runner, proposal.mode, self.noise.suite, before, after, proposal.id,
                                 reaches=reaches, texts=texts if scoped else None,
                                 paths=(f"{proposal.area}/**",) if proposal.area else ())
        self._spend(week, REPLAY_USD * verdict.replays, calls=verdict.replays, replays=verdict.replays)
        week.gates_by[verdict.outcome] += 1
        week.replays_by.update({(verdict.outcome, purpose): n for purpose, n in verdict.by_purpose.items()})
        if verdict.decision == "admit" and self.cache:
            simgate.carry_over(self.store, verdict.result, lambda sid: texts(sid)[1])  # bot.gate.reuse
        return verdict.reason if verdict.decision != "admit" else ""

    def _close(self, week: Week) -> None:
        week.playbook_size = len(self.rules)
        week.harmful_in_playbook = sum(self.noise.harms(r) for r in self.rules)
        week.harmful_ever = self.harmful_ever
        week.harmful_big = self.harmful_big
        week.useless_admitted = self.useless_ever
        week.q = self.q()
        week.cost_usd = round(week.cost_usd, 6)
        week.task_cost_usd = round(week.task_cost_usd, 6)
        week.cost_per_admission = round(self.loop_cost / self.admissions, 4) if self.admissions else None


def learning(reproposals: int, escalate: bool) -> str:
    """The loop's learning from refusals and ignored rules, as the parameters state it."""
    out = (f"distill's next run answers a refusal with the gate's reason, at most {reproposals} times per incident "
           "(new incidents: fresh tries; bot.distill.refusals); every proposal is scoped as narrowly as its incidents "
           "allow (loopbench.scope), a re-proposal is a new rule in that scope" if reproposals else "no re-proposals")
    return out + ("; an ignored rule (2 repeats since admission) is escalated to a hook or CI guard from its "
                  "scenario's checks, or a rewording, in every policy with rules" if escalate else "; no escalation")


@functools.lru_cache(maxsize=200_000)
def _digest(text: str) -> str:
    """A short stable name of a playbook text for the draws' keys (the same text: the same name, any policy)."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class _Oracle(Noise):
    """The best a loop can do under this noise: every mode with a safe rule gets a good rule (effect drawn as a
    good proposal's, or ``effect``), admitted with no gate."""

    def __init__(self, *args, effect: float | None = None):
        super().__init__(*args)
        self.effect = effect

    def proposal(self, mode: str, k: int, not_redundant: bool = False) -> Proposal:
        m = self.modes[mode]
        if m.kind == "done-right" or m.harmful_rule:
            return Proposal(mode, k, "redundant", 0.0)
        e = self.effect if self.effect is not None else self._effect(_rng(self.seed, "oracle", mode))
        scope, area = self.scopes.proposed(mode) if self.scopes is not None else ("", "")
        return Proposal(mode, k, "good", round(e, 4), scope=scope, area=area)


def run_seed(stream: Stream, seed: int, cfg: LoopConfig, noise_cfg: NoiseConfig, names: list[str],
             suite_size: int | None = None, reproposals: int = 0, escalate: bool = False,
             table: dict[str, GateOptions] | None = None, scope: ScopeConfig | None = None) -> dict[str, list[Week]]:
    """Every policy in ``names`` on one seed's stream (``scope``: where rules reach, ``loopbench.scope``; None: no
    scope at all, every rule everywhere)."""
    suite = suite_modes(stream, suite_size)
    table = table or gates(len(suite))
    out = {}
    for n in names:
        scopes = Scopes(scope, seed, stream.modes) if scope is not None else None
        noise = (_Oracle if n == "oracle" else Noise)(noise_cfg, seed, stream.modes, suite, scopes)
        out[n] = NoisyRun(n, stream, noise, replace(cfg, seed=seed), table.get(n), reproposals, escalate).run()
    return out


def floor(streams: dict[int, Stream], cfg: LoopConfig, noise_cfg: NoiseConfig, escalate: bool,
          effect: float | None = None, suite_size: int | None = None, scope: ScopeConfig | None = None) -> dict:
    """The oracle's repeats over the last 4 weeks, summed over the seeds (``effect``: every rule's effect)."""
    fails = repeats = 0
    for seed, stream in streams.items():
        scopes = Scopes(scope, seed, stream.modes) if scope is not None else None
        noise = _Oracle(noise_cfg, seed, stream.modes, suite_modes(stream, suite_size), scopes, effect=effect)
        weeks = NoisyRun("oracle", stream, noise, replace(cfg, seed=seed), None, 0, escalate).run()[-4:]
        fails, repeats = fails + sum(w.failures for w in weeks), repeats + sum(w.repeats for w in weeks)
    return {"failures_last4": fails, "repeats_last4": repeats,
            "repeat_share_last4": round(repeats / fails, 4) if fails else 0.0}
