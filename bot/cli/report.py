"""``replaybook report``: the playbook's health, as markdown or JSON."""

from __future__ import annotations

from pathlib import Path

import click

from bot.cli.output import emit_json
from bot.cli.playbook import _today, open_playbook


@click.command("report")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of markdown.")
@click.option("--date", "on", help="The day the report is for (default: today, UTC); scores cool from it.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="Also write the markdown to this file.")
@click.pass_context
def command(ctx: click.Context, as_json: bool, on: str | None, output: Path | None) -> None:
    """Report the playbook's health: repeat share per week (a mermaid chart), rules proposed, admitted
    and rejected by reason, cost per admission from the gate ledger, each rule's hits, repeats,
    compliance, score and cost prevented, and the triage queue.

    A repeat is an incident with `repeat_of` set, or cited by a rule admitted
    before it; a rule with `health.ignored_after` (default 2) repeats after
    its admission is `ignored`. See docs/playbook.md.
    """
    from bot.health import report as report_mod

    settings = ctx.obj.settings
    result = report_mod.build(open_playbook(ctx), _today(on), ignored_after=settings.config.health.ignored_after)
    text = report_mod.markdown(result)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(text)
