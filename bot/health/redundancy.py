"""Redundancy re-tests: is each admitted rule still needed on the current agent and model?

Each rule's own scenario is replayed *without* the rule (the rest of the
playbook in place), with the gate's sequential test for the "with" side:
passing it as often as the gate asks of a rule (4 of at most 5 by default)
means the agent no longer makes the mistake, and the rule is ``redundant``,
with the evidence "passes 4/4 without it on MODEL". Failing means it is
still ``needed``. Trials go through the gate's cache and budget
(``GateOptions.max_cost_usd``); once the budget is spent the remaining rules
are ``unknown``, never guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Literal

from bot.errors import BadInput
from bot.gate import decision as gate
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.scenario import spec as sc

Verdict = Literal["redundant", "needed", "unknown"]


@dataclass
class Retest:
    rule_id: str
    scenario: str
    verdict: Verdict
    passes: int
    n: int
    model: str
    evidence: str
    compliance: str | None = None  # with ``compliance``: "no longer reproduces" | "ignores it" | "obeys it"

    def as_json(self) -> dict:
        return asdict(self)


def retest(book: Playbook, opts: gate.GateOptions, rules: list[Rule] | None = None,
           progress: Callable[[str], None] = lambda _: None, *, compliance: bool = False) -> tuple[list[Retest], float]:
    """Each rule's re-test, and what the replays cost (the gateway's count).

    With ``compliance`` (for an ``ignored`` rule), a rule still needed is also replayed WITH the whole
    playbook: failing then means the agent ignores it; passing, that it obeys it in the replay (the
    repeats come from cases the scenario does not hold). A redundant rule's mistake no longer reproduces.
    """
    admitted = book.admitted()
    chosen = admitted if rules is None else rules
    runner = gate.Runner(opts)
    out: list[Retest] = []
    spent = False
    for rule in chosen:
        model = opts.replay.model
        if spent:
            out.append(Retest(rule.id, rule.replay, "unknown", 0, 0, model, "not replayed: the budget is spent"))
            continue
        try:
            loaded = sc.load(book.root / rule.replay)
        except BadInput as exc:
            out.append(Retest(rule.id, rule.replay, "unknown", 0, 0, model, f"its scenario does not load: {exc.message}"))
            continue
        without = book.render_text([r for r in admitted if r.id != rule.id])
        progress(f"{rule.id}: `{loaded.scenario.id}` without the rule")
        side = gate.Side("without", loaded.scenario.id)
        try:
            runner.sequential(side, loaded, without, opts.test.after, opts.test.after_n, opts.replay)
        except gate.BudgetSpent as exc:
            spent = True
            out.append(Retest(rule.id, rule.replay, "unknown", side.passes, side.n, model, str(exc)))
            continue
        verdict: Verdict = {"pass": "redundant", "fail": "needed"}.get(side.outcome, "unknown")  # type: ignore[assignment]
        row = Retest(rule.id, rule.replay, verdict, side.passes, side.n, model,
                     f"passes {side.passes}/{side.n} without it on {model}")
        if compliance and verdict != "unknown":
            try:
                row.compliance = _compliance(runner, opts, loaded, book.render_text(admitted), row)
            except gate.BudgetSpent:
                spent = True
        out.append(row)
    return out, round(runner.cost, 6)


def _compliance(runner: gate.Runner, opts: gate.GateOptions, loaded: sc.LoadedScenario, full: str, row: Retest) -> str:
    if row.verdict == "redundant":
        return "no longer reproduces"
    side = runner.sequential(gate.Side("with", loaded.scenario.id), loaded, full, opts.test.after, opts.test.after_n,
                             opts.replay)
    row.evidence += f"; passes {side.passes}/{side.n} with it"
    return "obeys it" if side.outcome == "pass" else "ignores it"
