"""``replaybook incident``: the local incident store."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click
from pydantic import ValidationError

from bot._util import records
from bot.cli.output import each_valid, emit_json, table
from bot.errors import BadInput
from bot.incident import store as incident_mod
from bot.incident.capture import read_bounded
from bot.incident.store import Incident, IncidentStore

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
@click.option("--from-file", "answers_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Read the answers to the questions from this file, one a line, as a pipe would give them.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored incident as JSON.")
@click.pass_context
def new(ctx: click.Context, as_json: bool, incident_id: str | None, created: str | None,
        answers_file: Path | None, **flags) -> None:
    """Record a new incident. Fields not given as flags are asked for.

    In a terminal each is prompted. From a pipe (or --from-file) the answers
    are read one a line, in the order asked: task, trigger, believed, actual,
    failure class (blank: wrong_assumption), cost in minutes (blank: 0).
    The file is written atomically and never overwrites an existing incident.
    """
    _ask_missing(flags, _answers(answers_file))
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


def _answers(answers_file: Path | None) -> list[str] | None:
    """The piped or filed answers, one a line; None in a terminal (prompt instead)."""
    if answers_file is not None:
        return read_bounded(answers_file, "answers file").splitlines()
    if sys.stdin.isatty():
        return None
    return sys.stdin.read(64 * 1024).splitlines()


def _ask_missing(flags: dict, answers: list[str] | None) -> None:
    """Fill the fields no flag gave: prompted in a terminal, else the next answer line."""
    questions = [(name, prompt, None) for name, (prompt, _) in _FIELDS.items()]
    questions += [("failure_class", "Failure class", "wrong_assumption"),
                  ("cost_minutes", "Minutes of human review and cleanup it cost", "0")]
    missing, piped = [], bool(answers)
    for name, prompt, default in questions:
        if flags.get(name) is not None:
            continue
        if answers is None:
            kind = (click.Choice(incident_mod.FAILURE_CLASSES) if name == "failure_class"
                    else click.IntRange(min=0) if name == "cost_minutes" else str)
            flags[name] = click.prompt(prompt, type=kind, default=default)
            continue
        answer = answers.pop(0).strip() if answers else ""
        if answer or (default is not None and (piped or name == "cost_minutes")):
            flags[name] = _typed(name, answer or default)
        else:
            missing.append(f"--{name.replace('_', '-')}")
    if missing:
        raise BadInput(f"incident new: missing {', '.join(missing)}; pass the flags, or pipe the answers "
                       "one a line (task, trigger, believed, actual, failure class, cost minutes)")


def _typed(name: str, answer: str):
    if name == "cost_minutes":
        if not answer.isdigit():
            raise BadInput(f"incident new: cost minutes {answer!r} is not a whole number of minutes (e.g. 20)")
        return int(answer)
    if name == "failure_class" and answer not in incident_mod.FAILURE_CLASSES:
        raise BadInput(f"incident new: failure class {answer!r} is not one of {', '.join(incident_mod.FAILURE_CLASSES)}")
    return answer


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
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...]) -> None:
    """Validate incident files or folders of them (default: the incidents folder). Exit 2 if any is invalid."""
    s = store(ctx)
    files = []
    for path in paths or (s.folder,):
        files += sorted(path.glob("*.yaml")) if path.is_dir() or not paths else [path]
    if not files and not paths:
        click.echo(f"no incidents yet in {s.folder}/; nothing to validate")
        return
    if not files:
        raise BadInput(f"no incident files (*.yaml) in {', '.join(map(str, paths))}; pass incident files or their folder")
    problems: list[str] = []
    for _ in each_valid(files, s.load, problems):
        pass
    if problems:
        raise BadInput(f"{len(problems)} of {len(files)} incident file(s) are invalid", problems=problems)
    click.echo(f"{len(files)} incident file(s) valid")


@group.command("list")
@click.option("--unresolved", is_flag=True, help="Only incidents no rule, agent or human has resolved.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def list_(ctx: click.Context, unresolved: bool, as_json: bool) -> None:
    """List incidents, oldest first. A bad file is named on stderr and the rest are listed (exit 2)."""
    s = store(ctx)
    reading = s.read()
    incidents = [i for i in reading.incidents if i.unresolved or not unresolved]
    if as_json:
        emit_json([i.to_yaml_data() for i in incidents])
    elif incidents:
        click.echo(
            table(
                ["id", "class", "resolved by", "believed", "actual"],
                [(i.id, i.failure_class, i.resolved_by, i.believed, i.actual) for i in incidents],
            )
        )
    elif not reading.problems:
        what = "no unresolved incidents" if reading.incidents else "no incidents yet"
        click.echo(f"{what} in {s.folder}/ (record one with `replaybook incident new` or `replaybook capture log`)")
    reading.raise_if_bad(s.folder)
