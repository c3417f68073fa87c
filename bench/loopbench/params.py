"""The noisy preset's parameters, each with its source: cited, measured, or an assumption with a sensitivity run.

``PARAMETERS`` is the table the output prints. An assumption names how its
±50% sensitivity run changes it (``SENSITIVITY``): the reported seeds are run
again with the value halved and with it 1.5×, and the policy ranking
(``targets.ranking``) is printed for each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.model.pricing import PRICES
from loopbench.noise import NoiseConfig
from loopbench.run import LoopConfig

SEED = "the seed article (/work/shared/seeds/000_2d625608180f27ac.txt)"
SEED_ZH = "the Chinese seed article (/work/shared/seeds/002_3c0ace0be60f15d1.txt)"

# A replay of a Sonnet-class or Haiku-class agent: about 30k input and 3k output tokens (issue 46's figure),
# at the list prices of bot/model/pricing.py.
REPLAY_TOKENS = (30_000, 3_000)
AGENTS = {"Sonnet-class (claude-sonnet-4-6)": PRICES["claude-sonnet-4-6"],
          "Haiku-class (claude-haiku-4-5)": PRICES["claude-haiku-4-5"]}


def replay_usd(price) -> float:
    return round((REPLAY_TOKENS[0] * price.input_per_mtok + REPLAY_TOKENS[1] * price.output_per_mtok) / 1e6, 4)


@dataclass(frozen=True)
class Parameter:
    name: str
    value: str
    kind: str  # cited | measured | assumed
    source: str


def table(noise: NoiseConfig, loop: LoopConfig, suite: int) -> list[Parameter]:
    n = noise
    p_mean = n.p_alpha / (n.p_alpha + n.p_beta)
    e_mean = n.e_alpha / (n.e_alpha + n.e_beta)
    return [
        Parameter("repeat share with no loop", "38% (stream rates)", "cited",
                  f"{SEED}: \"repeat failures dropped from 38% of all failures to 6%\"; the stream's rates are set to "
                  "give it (docs/loop-benchmark.md, \"The stream\")"),
        Parameter("suite size", f"{suite} scenarios", "cited", f"{SEED}: \"about 30 scenarios by month three\""),
        Parameter("playbook cap", f"{loop.cap} rules", "cited", f"{SEED}: \"hard cap of 60 rules\""),
        Parameter("distill cadence", f"every {loop.distill_every} incidents and weekly", "cited",
                  f"{SEED}: \"Every ten incidents (or weekly, whichever comes first)\""),
        Parameter("proposal the agent already follows (effect 0)", f"{n.p_redundant}", "cited",
                  f"{SEED}: \"About a quarter of candidates got rejected here\" (the before-run passed)"),
        Parameter("a good rule's effect e (mistake rate × (1 − e) when followed)",
                  f"Beta({n.e_alpha:g}, {n.e_beta:g}), mean {e_mean:.3f}", "cited (mean); shape assumed",
                  f"{SEED_ZH}: with lessons injected the CSV task's success went 63% → 87%, failures 37% → 13%, "
                  "a cut of 0.65 = q·e at q 0.97"),
        Parameter("rule followed, q(rules)", f"{loop.q0} − {loop.q_slope} × rules (min {loop.q_min})",
                  "cited (slope); q0 assumed",
                  "IFScale (Jaffe et al. 2025): 68% of 500 instructions followed by the best model: (0.97 − 0.68)/500 "
                  "per rule; q0 = 0.97 is issue 46's figure (the seed's 6.4% oracle with perfect rules); ±50% run on 1 − q0"),
        Parameter("flaky checks", f"{n.flaky}", "cited",
                  "Google: about 1.5% of test runs report a flaky result (Micco, \"Flaky Tests at Google and How "
                  "We Mitigate Them\", 2016)"),
        Parameter("mistake rate without a rule", f"Beta({n.p_alpha:g}, {n.p_beta:g}), mean {p_mean:.2f}", "assumed",
                  "fractional per-task success (HumanEval pass@1 28.8% vs pass@100 72.3%; τ-bench pass^1 ≈ 0.6 → "
                  "pass^8 ≈ 0.25) says rates are fractional, not their mean; ±50% run on the mean"),
        Parameter("harmful proposal (breaks another scenario)", f"{n.p_harmful}", "assumed",
                  "SkillsBench: 16 of 84 tasks (19%) got worse with skills, an upper reference (skills there are not "
                  "replay-scoped rules); ±50% run (0.05, 0.15)"),
        Parameter("weak proposal (effect U(0, 0.1)), of the rest", f"{n.p_weak}", "assumed",
                  "arXiv 2602.11988: model-written context files change success by −0.5 to −2 points (+20% cost): "
                  "much of what a model writes does nothing; SkillsBench: +4.5 points for software tasks; ±50% run"),
        Parameter("a harmful rule's drop on its victim", f"U({n.drop_min}, {n.drop_max})", "assumed", "±50% run"),
        Parameter("deny hook lets a mistake through", f"{n.hook_slip}", "assumed",
                  "a PreToolUse hook that exits 2 blocks the call (Claude Code hooks reference); ±50% run"),
        Parameter("agent fixes a CI guard's catch in the task", f"{n.ci_fix}", "assumed", "±50% run"),
        Parameter("suite scenarios beyond the 13 hand-written", "done right (mistake rate 0)", "assumed",
                  f"{SEED}: a suite scenario that failed would reject every rule, so the suite passes with the "
                  "playbook; the benchmark's own 13 include failure modes at their current rate"),
        Parameter("the local model's pass rates with and without each bundled rule", "not used", "measured: not yet",
                  "bench/real_model.py (branch model-wiring) had not landed when these figures were made"),
        Parameter("a replay's tokens", f"{REPLAY_TOKENS[0]:,} in + {REPLAY_TOKENS[1]:,} out", "assumed",
                  "issue 46's figure; prices from bot/model/pricing.py: "
                  + ", ".join(f"{k} ${replay_usd(p)} a replay" for k, p in AGENTS.items())),
    ]


def _mean_p(noise: NoiseConfig, factor: float) -> NoiseConfig:
    conc = noise.p_alpha + noise.p_beta
    mean = min(0.95, noise.p_alpha / conc * factor)
    return replace(noise, p_alpha=round(mean * conc, 4), p_beta=round((1 - mean) * conc, 4))


def _noise(change):
    return lambda n, loop, f: (change(n, f), loop)


# name -> (noise, loop, factor) -> (noise, loop): each assumption halved (0.5) or 1.5x
SENSITIVITY = {
    "mistake rate mean": _noise(_mean_p),
    "harmful share": _noise(lambda n, f: replace(n, p_harmful=round(n.p_harmful * f, 4))),
    "weak share": _noise(lambda n, f: replace(n, p_weak=round(n.p_weak * f, 4))),
    "harm's drop": _noise(lambda n, f: replace(n, drop_min=round(n.drop_min * f, 4),
                                               drop_max=round(min(1.0, n.drop_max * f), 4))),
    "hook slip": _noise(lambda n, f: replace(n, hook_slip=round(n.hook_slip * f, 4))),
    "CI fix": _noise(lambda n, f: replace(n, ci_fix=round(min(1.0, n.ci_fix * f), 4))),
    "rule ignored with an empty playbook (1 − q0)": lambda n, loop, f: (
        n, replace(loop, q0=round(1 - (1 - loop.q0) * f, 4))),
}
