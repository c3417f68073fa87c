"""``replaybook lessons``: what hindsight learned — list, inject, confirm, expire."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import click

from bot.cli.output import emit_json, table
from bot.errors import BadInput
from bot.hindsight.lesson import DB_FILE, MAX_INJECTED, Lesson, LessonStore, check_task_type, render_injection, utc_now


def _db_option(command: Callable) -> Callable:
    return click.option(
        "--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help=f"The hindsight database (default: {DB_FILE} under the root).",
    )(command)


def _path(ctx: click.Context, db: Path | None) -> Path:
    return db or Path(ctx.obj.settings.root) / DB_FILE


def _open(ctx: click.Context, db: Path | None) -> LessonStore:
    path = _path(ctx, db)
    if not path.exists():
        raise BadInput(f"{path}: no hindsight database here, so no lessons; hindsight runs store them "
                       "(or pass --db)")
    return LessonStore(path)


@click.group("lessons")
def group() -> None:
    """Lessons hindsight drew from past runs: list, inject, confirm, expire.

    A lesson is valid for 30 days; an expired one is kept and injected again only if
    confirmed. A lesson that duplicates or contradicts another is flagged and not
    injected until it is confirmed.
    """


@group.command("list")
@click.option("--task-type", help="Only lessons of this task type.")
@click.option("--active", is_flag=True, help="Leave out expired lessons that are not confirmed.")
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def list_(ctx: click.Context, task_type: str | None, active: bool, db: Path | None, as_json: bool) -> None:
    """List lessons, oldest first, with their state: active, expired, confirmed, conflict or doubtful."""
    now = utc_now()
    if not _path(ctx, db).exists():
        lessons = []
    else:
        with _open(ctx, db) as store:
            lessons = store.list(task_type, include_expired=not active, now=now)
    if as_json:
        emit_json([{**x.to_dict(), "state": x.state(now)} for x in lessons])
        return
    if not lessons:
        click.echo("no lessons")
        return
    click.echo(table(
        ["id", "task type", "state", "hits", "value", "valid until", "conflicts with", "lesson"],
        [(x.id, x.task_type, x.state(now), x.hit_count, f"{x.value:.2f}", x.to_dict()["valid_until"][:10],
          ", ".join(x.conflicts_with), x.content) for x in lessons],
    ))


@group.command("inject")
@click.option("--task-type", required=True, help="The task's type; only lessons of this type are given.")
@click.option("--max", "max_lessons", type=click.IntRange(min=1), default=MAX_INJECTED, show_default=True,
              help="Most lessons to inject.")
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print the chosen lessons as JSON.")
@click.pass_context
def inject(ctx: click.Context, task_type: str, max_lessons: int, db: Path | None, as_json: bool) -> None:
    """Print the lessons for one task as text for a prompt, and count a hit on each.

    Unexpired (or confirmed) lessons of the task type, most hit and most valuable first;
    the text ends with the reminder that the facts of the current task come first.
    """
    if not _path(ctx, db).exists():
        check_task_type(task_type)
        chosen = []
    else:
        with _open(ctx, db) as store:
            chosen = store.take(task_type, max_lessons)
    if as_json:
        emit_json([x.to_dict() for x in chosen])
        return
    click.echo(render_injection(chosen), nl=False)


def _marking(name: str, doc: str, said: Callable[[Lesson], str]) -> None:
    """``lessons confirm`` and ``lessons expire``: one store call on LESSON_ID, one line said."""

    @group.command(name, help=doc)
    @click.argument("lesson_id")
    @_db_option
    @click.pass_context
    def mark(ctx: click.Context, lesson_id: str, db: Path | None) -> None:
        with _open(ctx, db) as store:
            lesson = getattr(store, name)(lesson_id)
        click.echo(said(lesson))


_marking("confirm", "Vouch for LESSON_ID: it is injected even after it expires, and wins the conflicts it is in.",
         lambda lesson: f"confirmed {lesson.id}: {lesson.content}")
_marking("expire", "Stop injecting LESSON_ID now, even if confirmed. It is kept; `confirm` brings it back.",
         lambda lesson: f"expired {lesson.id}; it is kept but no longer injected")


@group.command("reflect")
@click.argument("task_id")
@click.option("--model", default="local", show_default=True,
              help="The model that reflects: `local` (the model `replaybook model install local` installs, offline) "
                   "or a hosted model id (needs ANTHROPIC_API_KEY).")
@click.option("--task-type", default="unknown", show_default=True, help="The task type the lesson is stored under.")
@click.option("--trace-db", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The trace database TASK_ID is recorded in (default: the one `replaybook trace` reads).")
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print the reflection and the stored lesson as JSON.")
@click.pass_context
def reflect(ctx: click.Context, task_id: str, model: str, task_type: str, trace_db: Path | None, db: Path | None,
            as_json: bool) -> None:
    """Reflect on the recorded task TASK_ID (hindsight): its chronicle goes to the model, which names the root
    cause and a general rule; the rule is stored as a lesson (flagged when doubtful or in conflict).

    Exit 0 when a lesson was stored, 1 when the reflection gave no rule, 2 on bad input.
    """
    from bot import config as config_mod
    from bot.errors import CheckFailed
    from bot.hindsight import chronicle as chronicle_mod
    from bot.hindsight import reflection as reflection_mod
    from bot.hindsight import traces as trace_store

    check_task_type(task_type)
    store_path = trace_db or trace_store.default_path(ctx.obj.settings.root)
    if not Path(store_path).exists():
        raise BadInput(f"{store_path}: no trace database here; `replaybook trace import` records a run (or pass --trace-db)")
    with trace_store.TraceStore(store_path) as traces:
        found = chronicle_mod.build(traces, task_id)
    llm = config_mod.llm(ctx.obj.env, model)
    click.echo(f"… reflecting on {task_id} ({len(found.nodes)} key nodes) with {getattr(llm, 'label', model)}", err=True)
    got = reflection_mod.reflect(llm, [n.to_dict() for n in found.nodes], task_id, task_type=task_type)
    if not got.general_rule:
        raise CheckFailed(f"{task_id}: the reflection gave no rule ({got.reason or 'no answer'}); nothing stored")
    with LessonStore(_path(ctx, db)) as lessons:
        added = lessons.add(Lesson.new(task_type, got.general_rule, source_task=task_id, value=got.value,
                                       doubtful=got.doubtful))
    if as_json:
        emit_json({"reflection": got.to_dict(), "lesson": added.lesson.to_dict(),
                   "conflicts": [c.id for c in added.conflicts]})
        return
    click.echo(f"root cause: {got.root_cause}")
    for suggestion in got.suggestions:
        click.echo(f"- {suggestion}")
    flags = (" (doubtful: " + got.reason + ")" if got.doubtful else "") + \
        "".join(f" ({c.kind} of {c.id}: not injected until confirmed)" for c in added.conflicts)
    click.echo(f"stored {added.lesson.id}: {added.lesson.content}{flags}")
