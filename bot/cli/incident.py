"""``replaybook incident``: the local incident store."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click
from pydantic import ValidationError

from bot import incident as incident_mod
from bot import records
from bot.cli.output import emit_json, table, warn
from bot.errors import BadInput
from bot.incident import Incident, IncidentStore

# Flag -> (prompt text, required)
_FIELDS = {
    "task": ("Task the agent was given", True),
    "trigger": ("What made the failure visible (CI, review, a person)", True),
    "believed": ("What the agent BELIEVED (one line)", True),
    "actual": ("What was ACTUALLY true (one line)", True),
}


def store(ctx: click.Context) -> IncidentStore:
    return IncidentStore(ctx.obj.settings.path("incidents"))


@click.group("incident")
def group() -> None:
    """Record, validate and list incidents (incidents/<id>.yaml)."""


@group.command("new")
@click.option("--task", help="What the agent was asked to do.")
@click.option("--task-type", help="Slug that scopes which rules a run gets, e.g. api.")
@click.option("--failure-class", type=click.Choice(incident_mod.FAILURE_CLASSES), help="Kind of failure.")
@click.option("--trigger", help="What made the failure visible.")
@click.option("--believed", help="ONE line: what the agent assumed.")
@click.option("--actual", help="ONE line: what was true.")
@click.option("--cost-minutes", type=click.IntRange(min=0), default=None, help="Minutes of human cleanup.")
@click.option("--resolved-by", type=click.Choice(incident_mod.RESOLVERS), default="unresolved", show_default=True,
              help="Who resolved it, if anyone already has.")
@click.option("--source-kind", type=click.Choice(incident_mod.SOURCE_KINDS), default="manual", show_default=True,
              help="Where the incident came from.")
@click.option("--source-url", help="Link to the run, PR or issue.")
@click.option("--source-key", help="Idempotency key: a second incident with the same key is not stored.")
@click.option("--id", "incident_id", help="Explicit id (default: YYYY-MM-DD-HHMM of --created).")
@click.option("--created", help="UTC time, e.g. 2026-07-14T09:32:00Z (default: now).")
@click.option("--json", "as_json", is_flag=True, help="Print the stored incident as JSON.")
@click.pass_context
def new(ctx: click.Context, as_json: bool, incident_id: str | None, created: str | None, **flags) -> None:
    """Record a new incident. Missing fields are prompted for in a terminal.

    The file is written atomically and never overwrites an existing incident.
    """
    interactive = sys.stdin.isatty()
    missing = []
    for name, (prompt, _required) in _FIELDS.items():
        if not flags.get(name):
            if interactive:
                flags[name] = click.prompt(prompt)
            else:
                missing.append(f"--{name.replace('_', '-')}")
    if not flags.get("failure_class"):
        if interactive:
            flags["failure_class"] = click.prompt(
                "Failure class", type=click.Choice(incident_mod.FAILURE_CLASSES), default="wrong_assumption"
            )
        else:
            missing.append("--failure-class")
    if missing:
        raise BadInput(f"incident new: missing {', '.join(missing)} (not a terminal, so nothing can be asked)")
    when = _parse_time(created) if created else datetime.now(timezone.utc).replace(second=0, microsecond=0)
    data = {
        "id": incident_id or incident_mod.id_for(when),
        "task": flags["task"],
        "task_type": flags.get("task_type"),
        "failure_class": flags["failure_class"],
        "trigger": flags["trigger"],
        "believed": flags["believed"],
        "actual": flags["actual"],
        "cost_minutes": flags.get("cost_minutes") or 0,
        "resolved_by": flags["resolved_by"],
        "source": {"kind": flags["source_kind"], "url": flags.get("source_url"), "key": flags.get("source_key")},
        "created": when,
    }
    incident = _validate_flags(data)
    stored, created_new = store(ctx).add(incident, explicit_id=incident_id is not None)
    path = store(ctx).path_of(stored.id)
    if as_json:
        emit_json({"created": created_new, "path": str(path), "incident": stored.to_yaml_data()})
    elif created_new:
        click.echo(f"recorded {path}")
    else:
        click.echo(f"already recorded as {path} (same source key); nothing written")


def _parse_time(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"--created {text!r} is not an ISO 8601 time; write e.g. 2026-07-14T09:32:00Z") from None
    if value.tzinfo is None:
        raise BadInput(f"--created {text!r} has no time zone; add Z for UTC")
    return value.astimezone(timezone.utc)


def _validate_flags(data: dict) -> Incident:
    try:
        return Incident.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            flag = "--" + "-".join(str(p) for p in err["loc"]).replace("_", "-")
            problems.append(f"{flag}: {records.error_message(err)}")
        raise BadInput("incident new: invalid input; nothing was written", problems=problems) from None


@group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...]) -> None:
    """Validate incident files (or folders of them). Exit 2 if any is invalid."""
    s = store(ctx)
    files = []
    for path in paths:
        files += sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    if not files:
        raise BadInput(f"no incident files (*.yaml) in {', '.join(map(str, paths))}; pass incident files or their folder")
    problems = []
    for file in files:
        try:
            incident = s.load(file)
        except BadInput as exc:
            problems.append(exc.render())
            continue
        for w in records.warnings_for(incident, file):
            warn(w)
    if problems:
        raise BadInput(f"{len(problems)} of {len(files)} incident file(s) are invalid", problems=problems)
    click.echo(f"{len(files)} incident file(s) valid")


@group.command("list")
@click.option("--unresolved", is_flag=True, help="Only incidents no rule, agent or human has resolved.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def list_(ctx: click.Context, unresolved: bool, as_json: bool) -> None:
    """List incidents, oldest first."""
    incidents = [i for i in store(ctx).all() if i.unresolved or not unresolved]
    if as_json:
        emit_json([i.to_yaml_data() for i in incidents])
        return
    if not incidents:
        click.echo("no incidents")
        return
    click.echo(
        table(
            ["id", "class", "resolved by", "believed", "actual"],
            [(i.id, i.failure_class, i.resolved_by, i.believed, i.actual) for i in incidents],
        )
    )
