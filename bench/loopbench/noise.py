"""The noisy agent of ``bench/loop.py --preset noisy``: a SIMULATED agent whose runs are random.

Every number is drawn from a stated distribution (``NoiseConfig``; defaults and
their sources in docs/loop-benchmark.md), and every draw comes from its own
``random.Random`` keyed by (seed, what, which), never from a shared stream. So
the draws are deterministic per seed and identical across policies: the mode's
mistake rate, the k-th proposal for a mode (its kind, effect, victim, drop),
the uniform number that decides task i, and the uniform that decides the j-th
trial of a gate side. Two policies that replay the same task with the same
playbook see the same outcome (common random numbers), so their differences
are the policies', not the dice's.

The model, per run of scenario s with playbook R:

* the agent makes s's mistake with probability p_s (p_s ~ Beta, drawn per
  mode; a done-right scenario has p = 0);
* each rule r in R is followed with probability q (the loop's q(size)); a
  followed rule for s's mode scales the mistake probability by (1 - e_r);
* a followed harmful rule whose victim is s lowers s's pass rate by d_r;
* a run that did it right still fails its checks with probability ``flaky``;
* a rule is scoped as distill scopes it (``loopbench.scope``: its task type, and the path glob of its
  incidents' area where they cite files); under scoped delivery it is delivered into a run only where its
  scope reaches the scenario and the run touches its area, so its effect and its harm land only there;
  under whole-file delivery everywhere;
* a proposal may hurt its own task (``p_self_harm``: the rule raises its own mistake rate), and a weak one
  may be slightly harmful (its effect drawn from ``weak_min`` below 0);
* an escalated mode (its ignored rule turned into a guard, ``bot.health.escalation``)
  lets a mistake through only with ``hook_slip`` (a PreToolUse deny hook) or
  ``1 - ci_fix`` (a CI guard the agent then fixes in the same task), whatever q.

Re-proposals (``Noise.reproposal``) are the SIMULATED distiller's answer to a
refusal's reason: see its docstring, and docs/loop-benchmark.md for the
assumptions.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass, replace

from loopbench.catalogue import VICTIM

# The gate's reason classes (``loopbench.run.reason_class``, ``NoisyRun._gate``) a re-proposal answers.
NOT_DISCRIMINATIVE = ("passes without the rule", "no difference with the rule")
NOT_FIXED = "fails with the rule"
REGRESSION = "regression"


@dataclass(frozen=True)
class NoiseConfig:
    """The noise model's parameters; ``PARAMETERS`` gives each one's source (cited, measured or assumed)."""

    p_alpha: float = 3.0  # mistake probability without a rule ~ Beta(3, 2): mean 0.6, sd 0.2
    p_beta: float = 2.0
    p_redundant: float = 0.25  # a proposal the agent already follows: effect 0 (assumed; see params)
    p_harmful: float = 0.10  # a proposal that also breaks another scenario (assumed)
    p_self_harm: float = round(16 / 84, 4)  # a proposal that hurts its own task (SkillsBench: 16 of 84 tasks)
    self_harm_min: float = -0.5  # ... its effect ~ U(self_harm_min, 0): the mistake rate up by as much (assumed)
    p_weak: float = 0.35  # of the other proposals, the share whose effect is near 0: U(weak_min, weak_max)
    weak_min: float = -0.05  # weak rules may be slightly harmful (arXiv 2602.11988: -0.5 to -2 points)
    weak_max: float = 0.10
    e_alpha: float = 4.0  # the rest: effect ~ Beta(4, 2), mean 0.667 (assumed; see params)
    e_beta: float = 2.0
    e_shape: str = "beta"  # beta | uniform | bimodal: the good effect's shape at the same mean (sensitivity)
    suite_mistake: float = 0.0  # the mean mistake rate of the suite scenarios beyond the hand-written (assumed)
    drop_min: float = 0.2  # a harmful rule lowers its victim's pass rate by d ~ U(drop_min, drop_max)
    drop_max: float = 0.7
    flaky: float = 0.015  # a right run's checks fail anyway (Google: about 1.5% of test runs flaky)
    useless_below: float = 0.1  # an admitted rule with effect below this is "useless"
    hook_slip: float = 0.1  # escalated to a deny hook: share of the mistakes still made (another command's way)
    ci_fix: float = 0.7  # escalated to a CI guard: chance the agent fixes a caught mistake within the task

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Proposal:
    mode: str
    k: int  # the mode's k-th proposal, from 0
    kind: str  # good | weak | redundant | harmful | self-harm
    effect: float  # e: with the rule followed the mistake happens with p * (1 - e)
    victim: str = ""  # a harmful rule's victim scenario
    drop: float = 0.0  # ... and how much it lowers the victim's pass rate
    scope: str = ""  # the task type it is scoped to (its `task_types`); "": every task
    area: str = ""  # the area its `paths` glob names (``loopbench.scope``); "": no path
    reason: str = ""  # a re-proposal: the refusal's reason it was given (SIMULATED distiller input)

    @property
    def id(self) -> str:
        return f"{self.mode}#{self.k}"


def _rng(seed: int, *key) -> random.Random:
    return random.Random("noisy:" + ":".join(str(k) for k in (seed, *key)))


def uniform(seed: int, *key) -> float:
    """The one uniform number of a named event (a task, a gate trial), the same in every policy."""
    return uniforms(seed, *key)[0]


def uniforms(seed: int, *key) -> tuple[float, float]:
    """Two independent uniform numbers of a named event, from a keyed BLAKE2b digest (a pure function of the
    key, as ``_rng``, at a fraction of seeding a ``random.Random``)."""
    d = hashlib.blake2b(("noisy:" + ":".join(str(k) for k in (seed, *key))).encode(), digest_size=16).digest()
    return int.from_bytes(d[:8], "big") / 2.0**64, int.from_bytes(d[8:], "big") / 2.0**64


class Noise:
    """The draws of one seed. Pure functions of (seed, key): call them in any order, from any policy."""

    def __init__(self, config: NoiseConfig, seed: int, modes: dict, suite: list[str], scopes=None):
        self.config, self.seed, self.modes, self.suite = config, seed, modes, suite
        self.scopes = scopes  # loopbench.scope.Scopes; None: every rule reaches every run (whole-file)

    def mistake(self, mode: str) -> float:
        """p: the chance the agent makes this mode's mistake with no rule for it."""
        cache = self.__dict__.setdefault("_p", {})
        if mode not in cache:
            m, c = self.modes[mode], self.config
            if m.kind == "done-right":  # a suite scenario the agent does right (suite_mistake: not quite)
                cache[mode] = round(_rng(self.seed, "p", mode).uniform(0, 2 * c.suite_mistake), 4) \
                    if c.suite_mistake and mode.startswith("suite-") else 0.0
            else:
                cache[mode] = round(_rng(self.seed, "p", mode).betavariate(c.p_alpha, c.p_beta), 4)
        return cache[mode]

    def task_type(self, mode: str) -> str:
        return self.modes[mode].task_type

    def proposal(self, mode: str, k: int, not_redundant: bool = False) -> Proposal:
        """The mode's k-th proposal. ``not_redundant``: the same uniforms, with the redundant share taken out
        (the draw rescaled over the other kinds), for a distiller told its last rule changed nothing."""
        c, m = self.config, self.modes[mode]
        rng = _rng(self.seed, "proposal", mode, k)
        draw, weak, effect = rng.random(), rng.random(), self._effect(rng)
        small, victim_draw, drop = rng.uniform(c.weak_min, c.weak_max), rng.random(), rng.uniform(c.drop_min, c.drop_max)
        near_draw, own_harm = rng.random(), rng.uniform(c.self_harm_min, 0.0)
        scope, area = self.scopes.proposed(mode) if self.scopes is not None else ("", "")
        if not_redundant:
            draw = c.p_redundant + draw * (1 - c.p_redundant)
        if m.kind == "done-right" or draw < c.p_redundant:  # nothing to fix, or a rule it already follows
            return Proposal(mode, k, "redundant", 0.0, scope=scope, area=area)
        value = round(small if weak < c.p_weak else effect, 4)
        if draw < c.p_redundant + c.p_harmful or m.harmful_rule:
            others = [s for s in self.suite if s != mode]
            near = self.scopes.near(scope, area, others) if self.scopes is not None else []
            pool = near if near and near_draw < self.scopes.config.harm_near else others
            victim = pool[int(victim_draw * len(pool))] if pool else ""
            if m.harmful_rule and VICTIM in others:  # targeted-tests: its own rule breaks the whole-suite scenario
                victim = VICTIM
            return Proposal(mode, k, "harmful", value, victim, round(drop, 4), scope=scope, area=area)
        if draw < c.p_redundant + c.p_harmful + c.p_self_harm:  # it hurts its own task
            return Proposal(mode, k, "self-harm", round(own_harm, 4), scope=scope, area=area)
        return Proposal(mode, k, "weak" if weak < c.p_weak else "good", value, scope=scope, area=area)

    def _effect(self, rng: random.Random) -> float:
        """A good rule's effect: Beta(e_alpha, e_beta), or at the same mean uniform over (2m - 1, 1) / (0, 2m)
        (``uniform``) or all-or-nothing (``bimodal``: 1 with chance m, else 0.05)."""
        c = self.config
        e = rng.betavariate(c.e_alpha, c.e_beta)
        mean = c.e_alpha / (c.e_alpha + c.e_beta)
        u = rng.random()
        if c.e_shape == "uniform":
            lo = max(0.0, 2 * mean - 1)
            return lo + u * (2 * mean - 2 * lo) if mean <= 0.5 else lo + u * (1 - lo)
        if c.e_shape == "bimodal":
            return 1.0 if u < (mean - 0.05) / 0.95 else 0.05
        return e

    def reproposal(self, mode: str, k: int, why: str, refused: Proposal) -> Proposal:
        """The mode's k-th proposal, made again after ``refused`` was refused for ``why`` (SIMULATED distiller).

        Every proposal is already scoped as narrowly as its incidents allow (``loopbench.scope``), so a
        re-proposal cannot narrow it further. By the reason:

        * not discriminative: a new rule for the same mistake, not one the agent already follows
          (``proposal(not_redundant=True)``): it may still be weak, harmful or good;
        * a regression, not fixed (fails with the rule), or anything else: a new rule, drawn as any other.
        """
        return replace(self.proposal(mode, k, not_redundant=why in NOT_DISCRIMINATIVE), reason=why)

    def delivered(self, r: Proposal, mode: str, *key) -> bool:
        """Whether rule ``r`` is in this run's context (``loopbench.scope``): always under whole-file delivery;
        scoped, only where its scope reaches ``mode`` and the run touches its area (named by ``key``)."""
        sc = self.scopes
        if sc is None or sc.whole_file:
            return True
        if not sc.reaches(r.scope, r.area, mode):
            return False
        chance = sc.touch(mode)[r.area] if r.area else 1.0
        return chance >= 1.0 or uniform(self.seed, "touch", r.area, *key) < chance

    def touched(self, mode: str, *key) -> frozenset:
        """The areas a run of ``mode`` (named by ``key``) touches: what its trace shows (the reach test reads it)."""
        if self.scopes is None:
            return frozenset()
        return frozenset(a for a, chance in self.scopes.touch(mode).items()
                         if chance >= 1.0 or uniform(self.seed, "touch", a, *key) < chance)

    def harm_size(self, r: Proposal) -> float:
        """How much an admitted harmful ``r`` lowers a pass rate, followed: its victim's by its drop times the chance
        a run of the victim gets it; its own task's by the rise in its mistake rate."""
        if r.kind == "self-harm":
            return -r.effect * self.mistake(r.mode)
        if r.kind != "harmful" or not r.victim:
            return 0.0
        return r.drop * (1.0 if self.scopes is None else self.scopes.reach_chance(r.scope, r.area, r.victim))

    def harms(self, r: Proposal) -> bool:
        """Whether an admitted ``r`` does harm: it hurts its own task, or its victim is one it can reach."""
        if r.kind == "self-harm":
            return True
        if r.kind != "harmful" or not r.victim:
            return False
        return self.scopes is None or self.scopes.reach_chance(r.scope, r.area, r.victim) > 0

    def slip(self, guard: str) -> float:
        """The share of mistakes an escalation lets through: '' (none) 1, 'hook' ``hook_slip``, 'ci' 1 - ci_fix."""
        return {"": 1.0, "hook": self.config.hook_slip, "ci": 1 - self.config.ci_fix}[guard]

    def pass_rate(self, mode: str, rules: list[Proposal], q: float, guard: str = "") -> float:
        """The exact pass rate of one run of ``mode`` with these rules (each followed with chance q, and, scoped,
        delivered with the chance a run touches its area)."""
        sc = self.scopes

        def got(r: Proposal) -> float:
            return q * (1.0 if sc is None else sc.reach_chance(r.scope, r.area, mode))

        p = self.mistake(mode)
        for r in rules:
            if r.mode == mode:
                p *= 1 - got(r) * r.effect
        p *= self.slip(guard)
        ok = 1 - p
        for r in rules:
            if r.victim == mode:
                ok = max(0.0, ok - got(r) * r.drop)
        return ok * (1 - self.config.flaky)

    def run(self, mode: str, rules: list[Proposal], q: float, *key, guard: str = "") -> bool:
        """One run of ``mode``: passed? Decided by uniform numbers named by ``key``, so it is the
        same run in every policy that holds the same rules (and the same ``guard``)."""
        u_mistake, u_flaky = uniforms(self.seed, "run", *key)
        p = self.mistake(mode)
        for r in rules:
            if r.mode == mode and uniform(self.seed, "follow", r.id, *key) < q and self.delivered(r, mode, *key):
                p *= 1 - r.effect
        if u_mistake < p and (not guard or uniform(self.seed, "guard", *key) < self.slip(guard)):
            return False  # the mistake, and no guard stopped it
        p *= self.slip(guard)
        for r in rules:  # the victim passes only if the harm does not strike: pass rate lowered by d
            if r.victim == mode and uniform(self.seed, "follow", r.id, *key) < q and self.delivered(r, mode, *key):
                if uniform(self.seed, "harm", r.id, *key) < r.drop / max(1 - p, 1e-9):
                    return False
        return u_flaky >= self.config.flaky
