"""A generated scenario is proven before it is proposed: its do-nothing control must fail and its reference
solution pass every check, both replayed in the sandbox (``bot.distill.staging.unsound``). An unsound one is
asked for again once, with the reason; unsound again, or not answered, it is refused, never proposed."""

from __future__ import annotations

from typing import Any, Callable

from bot._util.text_safety import one_line
from bot.distill.staging import unsound
from bot.errors import LLMError

REASON_MAX = 1500


def _split(plans: list[Any]) -> tuple[list[Any], list[tuple[Any, str]]]:
    """(the plans kept, (plan, why) for each whose generated scenario is unsound); reused scenarios are not
    replayed here (the suite's own validation answers for them)."""
    kept, bad = [], []
    for plan in plans:
        staged = getattr(plan, "staged", None)
        why = unsound(staged) if staged is not None else None
        (bad.append((plan, why)) if why else kept.append(plan))
    return kept, bad


def sound(plans: list[Any], again: Callable[[str], list[Any]], refuse: Callable[[str, str], None],
          report: Any) -> list[Any]:
    """``plans`` whose generated scenarios are sound. For the unsound ones the model is asked ``again`` once
    (with why); of that answer, the plans for the same incidents are proven the same way, and what fails twice is
    refused. The retry's model call counts in ``report.asked``; ``refuse(reason, what)`` is called for each refusal."""
    kept, bad = _split(plans)
    if not bad:
        return kept
    why = one_line("; ".join(f"scenario {p.scenario_id!r}: {w}" for p, w in bad), REASON_MAX)
    report.asked += 1
    try:
        retried = again(why)
    except LLMError as exc:
        refuse(f"the model failed on the retry of an unsound scenario: {exc}", "failed")
        retried = []
    cited = {c for p, _ in bad for c in p.cites}
    retried = [p for p in retried if getattr(p, "cites", None) and set(p.cites) & cited]
    good, still = _split(retried)
    for plan, reason in still:
        refuse(f"scenario {plan.scenario_id!r} cannot prove its rule, after one retry: {reason}", "refused")
    if not good and not still:
        refuse(f"unsound scenario, and the retry proposed none for these incidents: {why}", "refused")
    return kept + good
