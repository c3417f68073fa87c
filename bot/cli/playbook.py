"""``replaybook playbook``: list, check, render, hit, retire, inject."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, timezone
from pathlib import Path

import click

from bot import config as config_mod
from bot.cli.output import emit_json, table
from bot.errors import BadInput, CheckFailed
from bot.incident.store import IncidentStore
from bot.playbook.store import STATES, Playbook


def open_playbook(ctx: click.Context) -> Playbook:
    settings = ctx.obj.settings
    return config_mod.playbook(settings, incidents=IncidentStore(settings.path("incidents")))


def warn_skipped(book: Playbook) -> None:
    """Each broken candidate a read left out, as a warning: it is not served, and the rest is."""
    for line in book.skipped:
        click.echo(f"warning: skipped a candidate that does not load: {line}; fix it or delete it "
                   "(`replaybook rule validate FILE` checks it)", err=True)


def _today(value: str | None) -> date:
    if value is None:
        return datetime.now(timezone.utc).date()
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise BadInput(f"--date {value!r} is not a date; write e.g. 2026-08-20") from None


HOSTS = "claude, agents, copilot, cursor, gemini, windsurf"


def _render_scope(section_help: str, target_help: str):
    """``--section`` and ``--target``, as ``check`` and ``render`` both take them."""
    def decorate(command):
        command = click.option("--target", "targets", multiple=True, metavar="NAME[:PATH]", help=target_help)(command)
        return click.option("--section", "sections", multiple=True, help=section_help,
                            type=click.Path(dir_okay=False, path_type=Path))(command)
    return decorate


@click.group("playbook")
def group() -> None:
    """The admitted rules: list, check, render, hit, retire, inject."""


@group.command("list")
@click.option("--all", "all_states", is_flag=True, help="Also list proposed and archived rules.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def list_(ctx: click.Context, all_states: bool, as_json: bool) -> None:
    """List admitted rules (with --all: every state)."""
    from bot.playbook import worth as health

    book = open_playbook(ctx)
    entries = book.entries(STATES if all_states else ("rules",), skip_bad_candidates=True)
    warn_skipped(book)
    known = {i.id: i for i in book.incidents.read().incidents}
    today = datetime.now(timezone.utc).date()
    scores = {e.rule.id: health.worth(e.rule, known, today, book.half_life_days).score for e in entries}
    if as_json:
        emit_json([{"state": e.state, "path": str(e.path), "score": scores[e.rule.id], **e.rule.to_yaml_data()}
                   for e in entries])
        return
    admitted = sum(e.state == "rules" for e in entries)
    click.echo(f"{admitted} admitted of a cap of {book.cap}")
    if entries:
        click.echo(
            table(
                ["id", "state", "provisional", "task types", "last hit", "hits", "score", "rule"],
                [
                    (e.rule.id, e.state, "yes" if e.rule.provisional else "", ", ".join(e.rule.task_types) or "all",
                     e.rule.last_hit or "never", e.rule.hits or 0, f"{scores[e.rule.id]:g}", e.rule.rule)
                    for e in entries
                ],
            )
        )


@group.command("check")
@_render_scope("Also check the marked section of this file (repeatable; config `sections` adds more).",
               f"Also check this render target ({HOSTS}; config `render` adds more).")
@click.pass_context
def check(ctx: click.Context, sections: tuple[Path, ...], targets: tuple[str, ...]) -> None:
    """Check ids, the cap, scenarios, citations and rendering. Exit 1 with a list if any fails.

    Rendered files are checked against each host's documented size limit
    (docs/playbook.md): it warns at 90% of a limit and fails past it, so a
    host never truncates one silently.

    Each admitted rule's scenario is validated as `replaybook scenario validate`
    does, do-nothing control included (a cached replay).
    """
    settings = ctx.obj.settings
    files = list(sections) + [settings.root / s for s in settings.config.sections]
    book = open_playbook(ctx)
    from bot.playbook import check as check_mod

    specs = list(targets) + settings.config.render
    for warning in check_mod.warnings(book, settings.root, specs, files):
        click.echo(f"warning: {warning}", err=True)
    problems = check_mod.problems(book, settings.root, specs, files, cache_dir=settings.path("cache"))
    if problems:
        raise CheckFailed(f"playbook check failed ({len(problems)} problem(s))", problems=problems)
    click.echo("playbook ok")


@group.command("render")
@_render_scope("Keep the marked section of this file (e.g. CLAUDE.md) in sync; bytes outside it are untouched.",
               f"Also render for this host ({HOSTS}; NAME:PATH moves its main file); config `render` lists the usual "
               "ones.")
@click.pass_context
def render(ctx: click.Context, sections: tuple[Path, ...], targets: tuple[str, ...]) -> None:
    """Write playbook/PLAYBOOK.md and every render target's files, the text agents read.

    Nothing is written when a rendered file would pass its host's size limit.
    """
    from bot.playbook import render as render_mod

    book = open_playbook(ctx)
    book.entries(skip_bad_candidates=True)  # a broken candidate is named, and never stops the rendering
    warn_skipped(book)
    settings = ctx.obj.settings
    for change in render_mod.render(book, settings.root, list(targets) + settings.config.render):
        verb = "removed" if change.new is None else "created" if change.old is None else "updated"
        click.echo(f"{verb} {change.rel} (render target {change.target})")
    changed = book.render()
    click.echo(f"{'wrote' if changed else 'unchanged'} {book.rendered_path}")
    for file in sections:
        existed = Path(file).exists()
        changed = book.sync_section(file)
        click.echo(f"{'unchanged' if not changed else 'updated' if existed else 'created'} section in {file}"
                   + ("" if existed or not changed else " (a new file holding only the playbook section)"))


@group.command("hit")
@click.argument("source", default="-", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--date", "on", help="Date of the hit (default: today, UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def hit(ctx: click.Context, source: Path, on: str | None, as_json: bool) -> None:
    """Find [rule-NNNN] citations in text (a file or stdin) and update each rule's last_hit."""
    text = _read_text(source)
    result = open_playbook(ctx).hit(text, _today(on))
    if as_json:
        emit_json({"hit": result.hit, "not_admitted": result.not_admitted})
        return
    click.echo(f"hit: {', '.join(result.hit) or 'none'}")
    if result.not_admitted:
        click.echo(f"cited but not admitted (ignored): {', '.join(result.not_admitted)}")


def _read_text(source: Path) -> str:
    limit = 50 << 20
    if str(source) == "-":
        data = sys.stdin.buffer.read(limit + 1)
    else:
        if not source.exists():
            raise BadInput(f"{source}: no such file")
        if source.stat().st_size > limit:
            raise BadInput(f"{source}: larger than 50 MB; pass the relevant part of the transcript")
        data = source.read_bytes()
    if len(data) > limit:
        raise BadInput("stdin: larger than 50 MB; pass the relevant part of the transcript")
    return data.decode("utf-8", errors="replace")


@group.command("retire")
@click.argument("rule_id", required=False)
@click.option("--reason", default=None, help="Why (default: cap when retiring for the cap, else manual).")
@click.option("--date", "on", help="Retirement date (default: today, UTC).")
@click.option("--dry-run", is_flag=True, help="Say what would retire; change nothing.")
@click.pass_context
def retire(ctx: click.Context, rule_id: str | None, reason: str | None, on: str | None, dry_run: bool) -> None:
    """Move a rule to playbook/archive/. Without RULE_ID, retire the coldest rules until the cap holds.

    Coldest: provisional rules first, then the lowest score (the cost of the
    incidents it cites and prevented, halving with every half-life since it
    was last cited; see docs/playbook.md), then the oldest last_hit.
    """
    book = open_playbook(ctx)
    when = _today(on)
    if rule_id:
        if dry_run:
            click.echo(f"would retire {rule_id}")
            return
        retired = [book.retire(rule_id, reason=reason or "manual", on=when)]
    else:
        targets = book.coldest_over_cap()
        if dry_run or not targets:
            click.echo(f"would retire: {', '.join(r.id for r in targets)}" if targets else f"within the cap of {book.cap}; nothing to retire")
            return
        retired = [book.retire(r.id, reason=reason or "cap", on=when) for r in targets]
    for r in retired:
        click.echo(f"retired {r.id} to {book.dir('archive')}/")


@group.command("inject")
@click.option("--task-type", required=True, help="The task's type; rules scoped to it or to every task apply.")
@click.option("--max", "max_rules", type=click.IntRange(min=1), default=None, help="Most rules to inject.")
@click.option("--json", "as_json", is_flag=True, help="Print the chosen rules as JSON.")
@click.pass_context
def inject(ctx: click.Context, task_type: str, max_rules: int | None, as_json: bool) -> None:
    """Print the rules for one task as text for a system prompt.

    A candidate in playbook/proposed/ that does not load is named on stderr and skipped: the admitted
    rules are served whatever a proposal holds.
    """
    book = open_playbook(ctx)
    book.entries(skip_bad_candidates=True)
    warn_skipped(book)
    if as_json:
        emit_json([r.to_yaml_data() for r in book.select(task_type, max_rules)])
        return
    click.echo(book.inject(task_type, max_rules), nl=False)


@group.command("escalate")
@click.argument("rule_id")
@click.option("--write", is_flag=True, help="Write the files (default: list what would change).")
@click.pass_context
def escalate(ctx: click.Context, rule_id: str, write: bool) -> None:
    """Turn an ignored rule's scenario checks into enforcement: its `not_ran` checks as a Claude Code
    PreToolUse hook (.claude/settings.json, .claude/hooks/replaybook-guard.*), its `diff_excludes` as a CI
    step (.github/workflows/replaybook-guard.yml). With neither, print a proposed rewording.

    On GitHub the dashboard offers the same as one PR for each ignored rule.
    """
    from bot.health import escalation as escalate_mod

    book = open_playbook(ctx)
    rule = next((r for r in book.admitted() if r.id == rule_id), None)
    if rule is None:
        raise BadInput(f"{rule_id} is not an admitted rule in {book.dir('rules')}/; see `replaybook playbook list`")
    planned = escalate_mod.plan(rule, book.root, book.tree)
    if not planned.change:
        click.echo(planned.escalation.rewording)
        return
    if write:
        book.apply(planned.change)
    for path in planned.change:
        click.echo(f"{'wrote' if write else 'would write'} {path}")


@group.command("retest")
@click.argument("rule_ids", nargs=-1)
@click.option("--agent", default="builtin", show_default=True, help="The agent to replay (as for `gate`).")
@click.option("--model", default="scripted", show_default=True,
              help="`scripted` (the offline simulated model), `local` (the real model `replaybook model install "
                   "local` installs, offline), or a hosted model id (needs ANTHROPIC_API_KEY).")
@click.option("--max-cost-usd", type=click.FloatRange(min=0), help="Stop once the replays have spent this much.")
@click.option("--jobs", type=click.IntRange(1, 64), default=1, show_default=True, help="Trials run at once.")
@click.option("--no-cache", is_flag=True, help="Replay everything; read and write no cache.")
@click.option("--retire", "do_retire", is_flag=True, help="Retire each redundant rule, its evidence as the reason.")
@click.option("--compliance", is_flag=True,
              help="Also replay each needed rule WITH the playbook: tells `ignores it` from `no longer reproduces`.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def retest(ctx: click.Context, rule_ids: tuple[str, ...], agent: str, model: str, max_cost_usd: float | None,
           jobs: int, no_cache: bool, do_retire: bool, compliance: bool, as_json: bool) -> None:
    """Replay each admitted rule's scenario WITHOUT the rule (default: every rule): one the agent now passes
    as often as the gate asks of a rule (4 of at most 5) is redundant, e.g. "passes 4/4 without it on M".

    Run it when the agent's model or pinned version changes, and monthly. Replays come from the cache
    and stop at --max-cost-usd (the rest are `unknown`).
    """

    from bot.config import replay_options, require_key
    from bot.gate import decision as gate_mod
    from bot.health import redundancy

    settings = ctx.obj.settings
    book = open_playbook(ctx)
    admitted = {r.id: r for r in book.admitted()}
    unknown = [r for r in rule_ids if r not in admitted]
    if unknown:
        raise BadInput(f"{', '.join(unknown)}: not admitted rules in {book.dir('rules')}/; see `replaybook playbook list`")
    require_key(ctx.obj.env, agent, model)
    replay = replay_options(settings, ctx.obj.env, model=model, agent=agent)
    opts = gate_mod.GateOptions(replay=replay, jobs=jobs, max_cost_usd=max_cost_usd,
                                cache_dir=None if no_cache else settings.path("cache"))
    progress = (lambda msg: None) if as_json else (lambda msg: click.echo(f"… {msg}", err=True))
    chosen = [admitted[r] for r in rule_ids] if rule_ids else None
    results, cost = redundancy.retest(book, opts, chosen, progress, compliance=compliance)
    retired = []
    if do_retire:
        for r in results:
            if r.verdict == "redundant":
                reason = json.dumps(f"redundant: {r.evidence}")  # quoted: the colon must not make YAML of it
                book.retire(r.rule_id, reason=reason, on=_today(None))
                retired.append(r.rule_id)
    if as_json:
        emit_json({"results": [r.as_json() for r in results], "cost_usd": cost, "simulated": replay.simulated,
                   "retired": retired})
        return
    click.echo(table(["rule", "scenario", "verdict", "compliance", "evidence"],
                     [(r.rule_id, r.scenario, r.verdict, r.compliance or "", r.evidence) for r in results]))
    click.echo(f"cost ${cost:.4f}" + (" (simulated estimate)" if replay.simulated else
                                      f" ({replay.model_label}: tokens and CPU time)" if replay.model_label else ""))
    for rule_id in retired:
        click.echo(f"retired {rule_id} to {book.dir('archive')}/")
