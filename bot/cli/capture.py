"""``replaybook capture``: a failed run (CI log, agent transcript, pull request) becomes an incident."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import click
import yaml

from bot import config as config_mod
from bot.cli.output import emit_json, warn
from bot.incident import capture as capture_mod
from bot.incident.store import IncidentStore


def _common(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every capture command shares."""
    options = [
        click.option("--source-url", help="Link to the failed run, PR or review; stored as provenance."),
        click.option("--source-key", help="Idempotency key, e.g. run-123-attempt-1 (default: a hash of the input). "
                                          "A key already stored is not captured again."),
        click.option("--task", help="What the agent was asked to do (default: the model's reading, or the PR title)."),
        click.option("--task-type", help="Slug that scopes which rules a run gets, e.g. api."),
        click.option("--model", help="The model that states the belief delta: `local` (after `replaybook model "
                                     "install local`) or a hosted id (needs ANTHROPIC_API_KEY). "
                                     "Default: config models.capture."),
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
        click.option("--dry-run", is_flag=True, help="Print the incident that would be stored; store nothing."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _analyst(ctx: click.Context, model: str | None = None):
    """``model`` (default: config ``models.capture``) when it can answer (``local``, or a hosted id with
    ANTHROPIC_API_KEY set), else None (the incident is then marked for triage)."""
    env, model = ctx.obj.env, model or ctx.obj.settings.config.models.capture
    if not config_mod.has_model(env, model):
        return None
    return config_mod.llm(env, model)  # imports the adapter only when a model is used


def _admitted(ctx: click.Context) -> list:
    """The admitted rules the model may name in ``repeat_of``; a broken playbook only costs the link."""
    from bot.errors import BadInput
    from bot.playbook.store import Playbook

    settings = ctx.obj.settings
    try:
        return Playbook(settings.path("playbook"), root=settings.root, cap=settings.cap).admitted()
    except BadInput:
        return []


def _run(ctx: click.Context, evidence: capture_mod.Evidence, *, source_url: str | None, source_key: str | None,
         task: str | None, task_type: str | None, as_json: bool, dry_run: bool, model: str | None = None) -> None:
    store = IncidentStore(ctx.obj.settings.path("incidents"))
    analyst = _analyst(ctx, model)
    result = capture_mod.capture(evidence, store, analyst, dry_run=dry_run, task=task, task_type=task_type,
                                 source_url=source_url, key=source_key, rules=_admitted(ctx) if analyst else [])
    incident = result.incident
    if result.triage_reason and (result.created or dry_run):
        where = result.path or "the incident file"
        warn(f"captured without the model's belief delta: {result.triage_reason}. To finish it, edit {where}: "
             "fill in `task`, `believed` and `actual` (one line each), `failure_class` and `cost_minutes`, "
             "then set `triage: false` (distill skips it until then).")
    if as_json:
        emit_json({"created": result.created, "dry_run": dry_run, "path": str(result.path) if result.path else None,
                   "triage": incident.triage, "triage_reason": result.triage_reason,
                   "simulated": result.simulated, "incident": incident.to_yaml_data()})
        return
    if not result.created and result.path is not None:
        click.echo(f"already recorded as {result.path} (same source key); nothing written")
    elif dry_run:
        click.echo(yaml.safe_dump(incident.to_yaml_data(), sort_keys=False, allow_unicode=True), nl=False)
        click.echo("dry run: nothing stored")
    else:
        mark = "triage" if incident.triage else incident.failure_class
        click.echo(f"recorded {result.path} ({mark}): {incident.trigger}")
    if result.simulated:
        click.echo("note: the belief delta was written by the SIMULATED model", err=True)
    elif analyst is not None and getattr(analyst, "label", ""):
        click.echo(f"note: the belief delta was written by a {analyst.label}", err=True)


@click.group("capture")
def group() -> None:
    """Capture a failed run as an incident (incidents/<id>.yaml).

    Evidence (the failing step, error lines, test summaries, tracebacks) is
    extracted without a model, in bounded memory. With ANTHROPIC_API_KEY set,
    Claude states the belief delta; without it, or when the model fails, the
    incident is still stored and marked `triage: true`.
    """


@group.command("log")
@click.argument("file", type=click.Path(allow_dash=True))
@_common
@click.pass_context
def log(ctx: click.Context, file: str, **options: Any) -> None:
    """Capture from a CI job log FILE (any size), or - for stdin.

    Keeps the failing step, the lines around ##[error], pytest and jest
    summaries and the last Python traceback.
    """
    if file == "-":
        evidence = capture_mod.evidence_from_log(sys.stdin.buffer, name="stdin")
    else:
        evidence = capture_mod.evidence_from_log(Path(file))
    _run(ctx, evidence, **options)


@group.command("transcript")
@click.argument("file", type=click.Path(path_type=Path))
@_common
@click.pass_context
def transcript(ctx: click.Context, file: Path, **options: Any) -> None:
    """Capture from an agent transcript FILE.

    Reads Claude Code stream-json (claude -p … --output-format stream-json
    --verbose) or a Replaybook replay trace.jsonl: failing tool calls and
    commands, and how the run ended.
    """
    _run(ctx, capture_mod.evidence_from_transcript(file), **options)


@group.command("pr")
@click.option("--title", required=True, help="The pull request's title (used as the task).")
@click.option("--body", default="", help="The pull request's body.")
@click.option("--review", "review_file", type=click.Path(path_type=Path),
              help="File with the review text (e.g. the changes-requested review).")
@click.option("--diff", "diff_file", type=click.Path(path_type=Path),
              help="File with the diff stat (git diff --stat) or the full diff.")
@_common
@click.pass_context
def pr(ctx: click.Context, title: str, body: str, review_file: Path | None, diff_file: Path | None,
       **options: Any) -> None:
    """Capture from a pull request that was rejected or sent back in review."""
    review = capture_mod.read_bounded(review_file, "review") if review_file else None
    diff = capture_mod.read_bounded(diff_file, "diff", limit=512 * 1024) if diff_file else None
    _run(ctx, capture_mod.evidence_from_pr(title, body, review, diff), **options)

