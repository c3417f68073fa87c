"""``replaybook trace``: the hindsight event store — list tasks, show events, chronicle, import replays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import click

from bot.cli.output import emit_json, table
from bot.errors import BadInput
from bot.hindsight import chronicle as chronicle_mod
from bot.hindsight import traces as trace_store


def _db_option(command: Callable) -> Callable:
    return click.option(
        "--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help=f"The trace database (default: {trace_store.DB_RELPATH} under the root).",
    )(command)


def _open(ctx: click.Context, db: Path | None, *, create: bool = False) -> trace_store.TraceStore:
    return trace_store.TraceStore(db or trace_store.default_path(ctx.obj.settings.root), create=create)


def _task_command(name: str, json_help: str) -> Callable:
    """A ``trace`` command about one recorded task: TASK_ID, ``--db`` and ``--json``."""
    def decorate(command: Callable) -> Callable:
        for option in (click.pass_context, click.option("--json", "as_json", is_flag=True, help=json_help),
                       _db_option, click.argument("task_id"), group.command(name)):
            command = option(command)
        return command
    return decorate


@click.group("trace")
def group() -> None:
    """The hindsight event store: what agents did, step by step, and the key nodes of each task."""


@group.command("list")
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_(ctx: click.Context, db: Path | None, as_json: bool) -> None:
    """List recorded tasks: events kept, first and last time, failures, and what the volume controls removed."""
    path = db or trace_store.default_path(ctx.obj.settings.root)
    if not path.exists():  # nothing recorded yet is an empty store, not bad input
        tasks = []
    else:
        with _open(ctx, db) as store:
            tasks = store.tasks()
    if as_json:
        emit_json([t.to_dict() for t in tasks])
        return
    if not tasks:
        click.echo(f"no tasks recorded yet in {path} (the store is empty; `replaybook trace import` adds a run)")
        return
    click.echo(table(
        ["task", "events", "first", "last", "failures", "received", "dropped", "sampled out"],
        [(t.task_id, t.events, t.first, t.last, t.failures, t.received, t.dropped, t.sampled_out) for t in tasks],
    ))


@_task_command("show", "Print every event as JSON.")
def show(ctx: click.Context, task_id: str, db: Path | None, as_json: bool) -> None:
    """Show TASK_ID's events in time order: type, chosen action and result status."""
    with _open(ctx, db) as store:
        events = store.events(task_id)
    if not events:
        raise BadInput(f"no events for task {task_id!r}; `replaybook trace list` shows the recorded tasks")
    if as_json:
        emit_json([e.to_dict() for e in events])
        return
    click.echo(table(
        ["#", "time", "type", "decision", "result"],
        [(i, e.timestamp, e.event_type, _brief(e.decision, "chosen_action"), _brief(e.result, "status"))
         for i, e in enumerate(events)],
        width=60,
    ))


@_task_command("chronicle", "Print JSON.")
def chronicle(ctx: click.Context, task_id: str, db: Path | None, as_json: bool) -> None:
    """The key nodes of TASK_ID in order: the first failure, hesitations and anomalies, 50 characters each."""
    with _open(ctx, db) as store:
        result = chronicle_mod.build(store, task_id)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(result.to_text())


@group.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--task-id", help="Task id to store it under (default: the run folder's name).")
@_db_option
@click.pass_context
def import_(ctx: click.Context, path: Path, task_id: str | None, db: Path | None) -> None:
    """Import a replay run (its folder or trace.jsonl) as one task; re-importing replaces it."""
    with _open(ctx, db, create=True) as store:
        count = trace_store.import_trace(store, path, task_id)
    click.echo(f"imported {count} events as task {task_id or trace_store.replay_task_id(path)}")


def _brief(section: object, key: str) -> str:
    if isinstance(section, dict) and key in section:
        return str(section[key])
    return "" if section is None else json.dumps(section, ensure_ascii=False)[:60]
