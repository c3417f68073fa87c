"""Redundancy re-tests on GitHub: monthly, on demand, and when the agent's model or pin changes.

Each admitted rule's scenario is replayed *without* the rule by
:func:`bot.health.redundancy.retest` (the gate's sequential test, its cache, and
``health.retest_max_cost_usd`` as the budget). The rules the agent no longer
needs are retired by ONE pull request, ``replaybook/retest``, found again by
its hidden marker and updated in place; its body gives the evidence per rule
("passes 4/4 without it on MODEL"). A rule that is needed, or ``unknown``
(the budget ran out, the scenario does not load), is never retired.

What was last re-tested is the *agent key*: ``models.agent`` plus the pinned
version of each agent in ``replay.agents``. It is recorded in
``playbook/retest.json``, committed by the retirement PR (and kept on the
default branch once merged). A ``Retest(reason="if_changed")`` (every
scheduled run) re-tests only when the key differs from that file's.

A simulated re-test never retires a real rule: without ``ANTHROPIC_API_KEY``,
or on the simulated model, the action fails with a clear outcome, as the PR
gate reports ``error``.
"""

from __future__ import annotations

import json
from datetime import date

from bot._util.text_safety import one_line
from bot.change import Change
from bot.errors import BadInput
from bot.github.context import Outcome, RunContext, code
from bot.github.events import Retest
from bot.github.port import fit_body, marker
from bot.github.pulls import bot_logins, find_mine, pr_url, upsert_pr
from bot.playbook import transitions as playbook_changes

KEY = "retest"
MARKER = marker(KEY)
STATE = "retest.json"  # under paths.playbook


def agent_key(config) -> str:
    """What a re-test is valid for: the agent's model and each agent's pinned version."""
    from bot.replay.agents.install import PINS

    pins = [f"{a} {PINS[a].version}" for a in (config.replay.agents or ["builtin"]) if a in PINS]
    return " · ".join([config.models.agent, *pins])


def recorded_key(ctx: RunContext) -> str | None:
    path = ctx.settings.path("playbook") / STATE
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("agent_key") or "") or None
    except (OSError, ValueError, AttributeError):
        return None


def run(action: Retest, ctx: RunContext, *, replay=None, allow_simulated: bool = False) -> list[Outcome]:
    """Re-test every admitted rule; the redundant ones in one retirement PR.

    ``replay`` (tests) replaces the options read from the environment; ``allow_simulated`` is for tests
    only: no command and no workflow can set it, so on GitHub a simulated re-test is always refused.
    """
    from bot.config import playbook as open_playbook
    from bot.config import has_model, replay_options
    from bot.gate import decision as gate_mod
    from bot.health import redundancy
    from bot.settings import Environment

    config = ctx.settings.config
    current = agent_key(config)
    if action.reason == "if_changed" and recorded_key(ctx) == current:
        return [Outcome(action.kind, "skipped", f"the agent is unchanged since the last re-test ({code(current)})")]
    if replay is None:
        env = Environment.read()
        if not has_model(env, config.models.agent):
            status = "skipped" if action.reason == "if_changed" else "failed"
            return [Outcome(action.kind, status, "re-test not run: ANTHROPIC_API_KEY is not set; a simulated "
                                                   "re-test never retires a real rule")]
        replay = replay_options(ctx.settings, env, model=config.models.agent)
    if replay.simulated and not allow_simulated:
        return [Outcome(action.kind, "failed", "re-test refused: the simulated model cannot show a real rule is "
                                               "redundant; set models.agent to a real model and ANTHROPIC_API_KEY")]
    book = open_playbook(ctx.settings, root=ctx.root)
    opts = gate_mod.GateOptions(replay=replay, max_cost_usd=config.health.retest_max_cost_usd,
                                cache_dir=ctx.settings.path("cache"))
    try:
        results, cost = redundancy.retest(book, opts)
    except BadInput as exc:
        return [Outcome(action.kind, "failed", "re-test not run: " + code(exc.render(), 400))]
    model = replay.model + (" (simulated)" if replay.simulated
                            else f" ({replay.model_label})" if replay.model_label else "")
    counts = {v: sum(r.verdict == v for r in results) for v in ("redundant", "needed", "unknown")}
    tally = ", ".join(f"{n} {v}" for v, n in counts.items())  # the body holds no cost: a cached run spends $0
    redundant = [r for r in results if r.verdict == "redundant"]
    if not redundant:
        return [Outcome(action.kind, "unchanged", f"re-test on {model}: {tally}; ${cost:.4f} spent; nothing to retire")]
    on = ctx.today or date.today()
    reasons = {r.rule_id: f"redundant: {r.evidence}" for r in redundant}
    files = Change({})
    for r in redundant:  # one reason per rule: retirement() takes one reason for all it retires
        planned = playbook_changes.retirement(book, [r.rule_id], reason=json.dumps(reasons[r.rule_id]), on=on)
        files = files | planned.change.only(f"{book.rel}/rules/", f"{book.rel}/archive/")
    state = json.dumps({"agent_key": current, "model": replay.model}, indent=2) + "\n"
    files = files | Change({f"{book.rel}/{STATE}": state})
    body = fit_body({"marker": MARKER, "summary": _summary(results, model, tally)}, trim_first=("summary",))
    prs = ctx.port.list_prs("open")
    found = find_mine(prs, KEY, bot_logins(ctx))
    pr, changed = upsert_pr(ctx, KEY, "Replaybook: retire rules the agent no longer needs", body, files, prs)
    what = "opened" if found is None else "updated" if changed else "already in"
    return [Outcome(action.kind, "done" if changed else "unchanged",
                    f"re-test on {model}: {tally}; ${cost:.4f} spent; {what} PR #{pr.number}", pr_url(pr))]


def _summary(results, model: str, tally: str) -> str:
    def cell(text: str) -> str:  # a pipe in the evidence must not add a table cell
        return code(one_line(text, 300), 320).replace("|", "\\|")

    rows = "\n".join(f"| {code(r.rule_id, 40)} | {r.verdict} | {cell(r.evidence)} |" for r in results)
    return "\n".join([
        f"## Replaybook: rules the agent no longer needs on {code(model, 80)}", "",
        "Each admitted rule's scenario was replayed without the rule, with the gate's sequential test. "
        "A rule that passes as often as the gate asks of a rule is redundant; merging this PR moves it to the "
        "archive with its evidence as the reason. Needed and unknown rules stay.", "",
        "| rule | verdict | evidence |", "| --- | --- | --- |", rows, "", f"Re-test: {code(tally, 200)}.",
    ])
