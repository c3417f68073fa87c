"""Baseline reuse: an admitted rule's trials with it become the next playbook's baseline trials.

Once a rule is admitted, the playbook it was judged in (the old one plus the rule) is the playbook every later
gate compares against. Its gate already replayed suite scenarios with exactly that text; reading them again as
the new baseline costs nothing, where replaying them costs the same trials twice. The cache keys a trial with a
rule under test apart from a trial with the playbook as it is (``trial_key``'s arm), so this is done once, at
admission, by writing each such trial under its baseline key too, and only where the new playbook renders to the
very text the trial ran with (a retirement at the cap, or a scope, changes it: then nothing is carried).

Why this keeps the next gate's guarantees (docs/gate.md, "Baseline reuse"): the carried trials are not
independent of the admission, which needed them to clear their tests, so given the admission they pass a little
more often than fresh ones would. Every test they feed is monotone the safe way: a baseline that passes more
makes the suite test find a regression more readily (its log likelihood ratio rises with the baseline's rate) and
makes the own scenario's "fails without the rule" harder to meet. Admission, a conjunction of tests each passed
more readily by more passes, is an increasing event of independent trials, so by Harris's inequality the carried
baseline is stochastically at least as high as a fresh one: a harmful rule is caught at least as often as the
exact tables say, and a harmless one is refused more often by at most eps / (1 - eps), eps being the chance the
admitted rule's own test of that scenario called a regression (``stats.suite_scenario_characteristics``).
"""

from __future__ import annotations

from pathlib import Path

from bot.gate.result import GateOptions, GateResult, by_task_type, scoped
from bot.gate.suite_check import reaches
from bot.playbook.store import Playbook
from bot.replay import agents as agents_mod
from bot.replay import validate as sv
from bot.replay.cache import ReplayCache, trial_key
from bot.scenario import spec as sc
from bot.scenario import suite as suite_mod


def carry_over(book: Playbook, result: GateResult, suite_dir: Path, opts: GateOptions) -> int:
    """After ``result``'s rule is admitted into ``book``: each trial its gate ran with the rule (its own scenario's
    and every suite scenario's) is written under the baseline key of the new playbook, where that playbook renders
    to the text it ran with. Returns how many trials were carried (0 without a cache)."""
    if opts.cache_dir is None or result.decision != "admit":
        return 0
    cache = ReplayCache(opts.cache_dir)
    version = agents_mod.make(opts.replay.agent, command=opts.replay.command).version
    sides = [e.candidate for e in result.suite if e.candidate is not None] + ([result.after] if result.after else [])
    wanted = {s.scenario for s in sides}
    folders = {}
    rule = next((r for r in book.admitted() if r.id == result.rule_id), None)
    for folder in [*suite_mod.folders(Path(suite_dir)), *([book.root / rule.replay] if rule else [])]:
        if sv.validate(folder, control=False, policy=opts.replay.simulated).ok:
            loaded = sc.load(folder)
            if loaded.scenario.id in wanted:
                folders.setdefault(loaded.scenario.id, loaded)
    carried, scope, typed = 0, scoped(opts), by_task_type(opts)
    for side in sides:
        loaded = folders.get(side.scenario)
        if loaded is None:
            continue
        rules = [r for r in book.admitted() if not scope or reaches(r, loaded, typed)]
        text = book.render_text(rules)  # what the next gate's baseline of this scenario is replayed with
        for trial in side.scored:
            with_rule = trial_key(loaded, text, opts.replay, trial.trial, version, "candidate")
            baseline = trial_key(loaded, text, opts.replay, trial.trial, version, "baseline")
            found = cache.get(with_rule)
            if found is not None and cache.get(baseline) is None:
                cache.put(baseline, found)
                carried += 1
    return carried
