"""Carrying out ``/replaybook`` comment commands (parsed by :mod:`bot.github.commands`).

One command comment is handled once and answered once:

1. **Once.** The bot's reaction on the comment marks it handled: a comment the bot already reacted to
   (a redelivery, a re-run of the job) runs nothing again. The bot reacts ``eyes`` before it acts.
2. **Who.** Only a user with write permission or more (admin, maintain, write) runs a command, by the
   collaborator-permission endpoint; never by ``author_association``, which shows private org members as
   ``CONTRIBUTOR``. Anyone else gets a polite reply, no reaction (the reaction means "handled for someone
   allowed to"), and nothing runs; a redelivery finds that reply and leaves it as it is (dependabot, too,
   answers such a comment once and reacts to nothing).
3. **Where.** On a closed issue or PR the reply says so and nothing runs.
4. **One reply**, marked ``command-<comment id>``, edited in place as the commands run.

What each command does:

- ``replay`` re-gates the PR: it dispatches the admit workflow with the PR's number, the gate path a
  maintainer's dispatch and "Replay again" already take (so the gate runs on the PR's head, in its own job),
  and with ``agent`` and ``trials`` when given: ``--agent`` must be one of ``replay.agents`` (the gate
  replays with it alone), ``--trials`` is capped by the gate's after-side budget
  (:func:`bot.gate.options.gate_test`). The reply says what the re-gate runs.
- ``retest`` dispatches the distill workflow with ``reason: retest``: the monthly re-test, on demand.
- ``retire rule-NNNN [reason]`` opens (or updates) the retirement PR, with the reason neutralised.
- ``explain`` answers from the gate's ledger in the PR's gate comment: each gate's decision, and for the newest
  gates each failing trial with the rule (the check that failed, at most five commands around it, the rule
  text the agent saw and its hash), all neutralised; what GitHub does not keep is said so.

The comment's text is data: it reaches the reply only through :func:`~bot._util.text_safety.code` and
:func:`~bot._util.text_safety.neutralise`, and never a shell, an expression or a workflow input.
"""

from __future__ import annotations

import json
from datetime import date

from bot._util.text_safety import neutralise, one_line
from bot.errors import BadInput
from bot.github import commands, ledger
from bot.github.context import Outcome, RunContext, code
from bot.github.events import RunCommand
from bot.github.port import GitHubError, fit_body, marker, written_by
from bot.github.pulls import bot_logins, find_mine, pr_url, upsert_pr
from bot.model.served import SCRIPTED

ALLOWED = ("admin", "maintain", "write")
HANDLED = ("eyes", "+1", "-1", "confused")  # any of these, left by the bot, marks a command comment handled
ADMIT_WORKFLOW = "replaybook-admit.yml"  # bot.github.init.WORKFLOWS["admit"]
MAX_COMMANDS = 5  # command lines carried out from one comment
DISPATCH_INPUTS = ("pr", "agent", "trials")  # what `replay` may give the admit workflow's workflow_dispatch


def reply_key(comment_id: int) -> str:
    return f"command-{int(comment_id)}"


def run(action: RunCommand, ctx: RunContext) -> list[Outcome]:
    parsed = list(dict.fromkeys(commands.parse(action.body)))[:MAX_COMMANDS]  # a repeated line runs once
    if not parsed:
        return [Outcome(action.kind, "skipped", f"comment {action.comment_id} holds no command line")]
    logins = bot_logins(ctx)
    if written_by(action.login, logins):
        return [Outcome(action.kind, "skipped", f"comment {action.comment_id} is the bot's own")]
    done = [r for r in ctx.port.comment_reactions(action.comment_id) if r.content in HANDLED and written_by(r.login, logins)]
    if done:
        return [Outcome(action.kind, "skipped", f"comment {action.comment_id} was handled already "
                                                f"(the bot reacted {done[0].content})")]
    who = code(action.login, 60)
    permission = ctx.port.collaborator_permission(action.login)
    if permission not in ALLOWED:
        # No reaction: it would read as "handled for someone allowed to". The reply, keyed by the comment,
        # is found again on a redelivery and left as it is, so the refusal is said once.
        _reply(action, ctx, [f"Sorry {who}, only people with write permission (or more) on this repository can run "
                             f"Replaybook commands; you have {code(permission, 20)}. Ask a maintainer to run it."])
        return [Outcome(action.kind, "skipped", f"{action.login!r} has {permission} permission; nothing ran")]
    ctx.port.add_reaction(action.comment_id, "eyes")  # before acting: a redelivery from here on runs nothing
    where = "pull request" if action.is_pr else "issue"
    if action.state != "open":
        _reply(action, ctx, [f"This {where} is {code(action.state, 20)}, so the command did not run. Reopen it, or "
                             "comment on an open one."])
        return [Outcome(action.kind, "skipped", f"#{action.number} is {action.state}; nothing ran")]
    lines, outcomes = [], []
    for command in parsed:
        text, outcome = _one(command, action, ctx)
        lines.append(text)
        outcomes.append(outcome)
    url = _reply(action, ctx, lines)
    return [o if o.url else Outcome(o.kind, o.status, o.summary, url) for o in outcomes]


def _reply(action: RunCommand, ctx: RunContext, lines: list[str]) -> str | None:
    link = f" ([comment]({action.html_url}))" if action.html_url and action.html_url.startswith("https://") else ""
    head = f"**Replaybook** answering {code(action.login, 60)}{link}:"
    body = fit_body({"marker": marker(reply_key(action.comment_id)), "head": head,
                     "lines": "\n\n".join(lines)}, trim_first=("lines",))
    return ctx.port.upsert_comment(action.number, marker(reply_key(action.comment_id)), body).url or None


def _one(command: commands.Parsed, action: RunCommand, ctx: RunContext) -> tuple[str, Outcome]:
    kind = action.kind
    if isinstance(command, commands.BadCommand):
        return (f"{code(command.line, 200)}: {neutralise(command.problem)}",
                Outcome(kind, "skipped", "bad command: " + one_line(command.problem, 200)))
    title = code(f"/replaybook {command.name}", 40)
    try:
        handler = {"replay": _replay, "retest": _retest, "retire": _retire, "explain": _explain}[command.name]
        text, outcome = handler(command, action, ctx)
    except (GitHubError, BadInput) as exc:
        text, outcome = (f"could not run: {code(exc.render(), 400)}",
                         Outcome(kind, "failed", f"{command.name}: " + one_line(exc.render(), 300)))
    return f"{title}: {text}", outcome


def _replay(command: commands.Command, action: RunCommand, ctx: RunContext) -> tuple[str, Outcome]:
    from bot.gate.options import DEFAULT_AGENT, gate_test, what_runs

    if not action.is_pr:
        return "runs on a pull request; this is an issue.", Outcome(action.kind, "skipped", "replay on an issue")
    agents = list(ctx.effective.replay.agents) or [DEFAULT_AGENT]
    if command.agent is not None and command.agent not in agents:
        why = f"{code(command.agent, 40)} is not one of the agents the gate runs here ({', '.join(agents)}; " \
              "`replay.agents` in `.replaybook.yml`)."
        return why, Outcome(action.kind, "skipped", f"replay: agent {command.agent!r} is not configured")
    budget = gate_test(kind="sequential").after_n  # what `--trials` caps: the sequential test's after side
    notes = []
    trials = None if command.trials is None else min(command.trials, budget)
    if command.trials is not None and command.trials > budget:
        notes.append(f"`--trials {command.trials}` is over the gate's budget of {budget}; capped at {budget}")
    inputs = {"pr": str(action.number), **({"agent": command.agent} if command.agent else {}),
              **({"trials": str(trials)} if trials is not None else {})}
    ctx.port.dispatch_workflow(ADMIT_WORKFLOW, ctx.port.default_branch(), inputs)
    text = (f"re-gating this pull request: dispatched `{ADMIT_WORKFLOW}` with "
            f"{what_runs(command.agent, trials, ctx.effective.gate.own_test, simulated=ctx.effective.models.agent == SCRIPTED)}; "
            "`replaybook/admit` and the gate comment update when it finishes."
            + "".join(f"\n- {n}" for n in notes))
    return text, Outcome(action.kind, "done", f"replay: dispatched {ADMIT_WORKFLOW} for #{action.number}")


def _retest(command: commands.Command, action: RunCommand, ctx: RunContext) -> tuple[str, Outcome]:
    workflow = ctx.github.distill_workflow
    ctx.port.dispatch_workflow(workflow, ctx.port.default_branch(), {"reason": "retest"})
    return (f"dispatched {code(workflow, 80)} to re-test every admitted rule without it; the rules the agent no "
            "longer needs come in one retirement PR.",
            Outcome(action.kind, "done", f"retest: dispatched {workflow}"))


def _retire(command: commands.Command, action: RunCommand, ctx: RunContext) -> tuple[str, Outcome]:
    from bot.playbook import transitions as playbook_changes
    from bot.playbook.store import Playbook

    if not ctx.open_prs:
        return ("not enabled: this run may not open pull requests (REPLAYBOOK_OPEN_PRS=1 and a GitHub App token).",
                Outcome(action.kind, "not_implemented", "retire: PR writing is not enabled"))
    rule = str(command.rule)
    reason = one_line(neutralise(command.reason or ""), commands.REASON_LIMIT) or "retired by comment command"
    stated = f"{reason} (asked by {action.login[:40]} in PR or issue {action.number})"
    book = Playbook(ctx.settings.path("playbook"), root=ctx.root, cap=ctx.settings.cap)
    planned = playbook_changes.retirement(book, [rule], reason=json.dumps(neutralise(stated)), on=ctx.today or date.today())
    key = f"retire-{rule}"
    summary = "\n".join([f"## Replaybook: retire {code(rule, 40)}", "",
                         f"Asked for with `/replaybook retire` by {code(action.login, 60)}. Reason: {code(reason, 520)}",
                         "", "Merging this PR moves the rule to the archive with that reason and re-renders the "
                         "playbook."])
    body = fit_body({"marker": marker(key), "summary": summary}, trim_first=("summary",))
    prs = ctx.port.list_prs("open")
    found = find_mine(prs, key, bot_logins(ctx))
    pr, changed = upsert_pr(ctx, key, f"Replaybook: retire {rule}", body, planned.change, prs)
    what = "opened" if found is None else "updated" if changed else "already open:"
    return (f"{what} the retirement PR #{pr.number}.",
            Outcome(action.kind, "done" if changed else "unchanged", f"retire {rule}: {what} PR #{pr.number}",
                    pr_url(pr)))


def _explain(command: commands.Command, action: RunCommand, ctx: RunContext) -> tuple[str, Outcome]:
    from bot.github.gate import GATE_MARKER

    if not action.is_pr:
        return ("explains a pull request's gate; this is an issue.",
                Outcome(action.kind, "skipped", "explain on an issue"))
    comment = ctx.port.find_comment_by_marker(action.number, GATE_MARKER)  # the bot's own only
    records, unreadable = ledger.read(comment.body, action.number) if comment is not None else ([], False)
    if not records:
        why = ("its ledger could not be read" if unreadable else
               "the gate has not reported on this pull request" if comment is None else
               "its gate comment holds no replay (nothing agents are told changed, or the gate refused early)")
        return (f"nothing to explain: {why}. Comment `/replaybook replay` to gate it again.",
                Outcome(action.kind, "unchanged", f"explain: no gate records on #{action.number}"))
    rows = [f"| {code(r.rule_id, 40)} | {r.decision} | {r.replays} | {code(one_line(r.reason, 300), 320).replace('|', '/')} |"
            for r in records[-10:]]
    newest = {r.rule_id: r for r in records}  # each rule's latest gate
    detailed = [r for r in newest.values() if r.detail is not None]
    lines = ["the gate's decisions on this pull request, newest last:", "",
             "| rule | decision | replays | reason |", "| --- | --- | --- | --- |", *rows, ""]
    for record in detailed:
        lines += _trials(record)
    if len(detailed) < len(newest):
        lines.append("Per-trial detail is kept for the newest gates only, not for "
                     + ", ".join(code(r.rule_id, 40) for r in newest.values() if r.detail is None)
                     + ". Comment `/replaybook replay` to gate it again, or run `replaybook gate` on the rule locally "
                       "to see every trial's trace.")
    return "\n".join(lines), Outcome(action.kind, "done", f"explain: {len(records)} gate record(s) on #{action.number}")


def _inert(text: str, limit: int) -> str:
    """An agent's text as one inline code span: neutralised, and with no ``${{`` or ``-->`` left whole either."""
    return code(one_line(text, limit).replace("${{", "$\u200b{{").replace("-->", "--\u200b>"), limit + 10)


def _trials(record) -> list[str]:
    """One rule's failing trials with the rule, as the gate kept them (bot.gate.ledger.detail_of)."""
    detail = record.detail
    head = (f"**{code(record.rule_id, 40)}**, latest gate: {record.decision}. The rule text the agent saw "
            f"(sha256 `{detail.rule_hash}`): {_inert(detail.rule_text, 600)}")
    if not detail.trials:
        return [head, "", "No trial with the rule failed.", ""]
    out = [head, ""]
    for note in detail.trials:
        out.append(f"- {note.side}, scenario {_inert(note.scenario, 120)}, trial {note.trial}: "
                   f"{_inert(note.check, 160)} failed: {_inert(note.detail, 240)}")
        out += [f"  - {_inert(c, 160)}" for c in note.commands] or ["  - (no command recorded)"]
    if detail.more:
        out.append(f"- and {detail.more} more failing trial(s), not kept on GitHub")
    return [*out, ""]
