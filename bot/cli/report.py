"""``replaybook report``: the playbook's health, as markdown or JSON."""

from __future__ import annotations

from pathlib import Path

import click

from bot.cli.output import emit_json
from bot.cli.playbook import _today, open_playbook, warn_skipped
from bot.errors import BadInput


@click.command("report")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of markdown.")
@click.option("--date", "on", help="The day the report is for (default: today, UTC); scores cool from it.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="Also write the markdown to this file.")
@click.option("--github", "on_github", is_flag=True,
              help="Read the gate ledger from the rule PRs' gate comments on GitHub (GITHUB_TOKEN, GITHUB_REPOSITORY), "
                   "not .replaybook/gates.jsonl, and list the open rule PRs with their gate's state.")
@click.pass_context
def command(ctx: click.Context, as_json: bool, on: str | None, output: Path | None, on_github: bool) -> None:
    """Report the playbook's health: repeat share per week (a mermaid chart), rules proposed, admitted
    and rejected by reason, cost per admission from the gate ledger, each rule's hits, repeats,
    compliance, score and cost prevented, and the triage queue.

    A repeat is an incident with `repeat_of` set, or cited by a rule admitted
    before it; a rule with `health.ignored_after` (default 2) repeats after
    its admission is `ignored`. See docs/playbook.md. With `--github` the
    cost per admission is GitHub's: every gate's records, kept in the bot's
    gate comment on each rule PR (one search request; see docs/github.md).
    """
    from bot.health import report as report_mod

    settings = ctx.obj.settings
    extra = _from_github(settings) if on_github else {}
    book = open_playbook(ctx)
    result = report_mod.build(book, _today(on), ignored_after=settings.config.health.ignored_after, **extra)
    warn_skipped(book)
    text = report_mod.markdown(result)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(text)
    if result.unreadable:  # as `incident list`: what loads is shown, a broken incident is bad input
        raise BadInput(f"{len(result.unreadable)} incident file(s) could not be read and were left out of the report; "
                       "fix them (`replaybook incident validate FILE`)", problems=result.unreadable)


def _from_github(settings) -> dict:
    """The gate ledger and the open rule PRs, read from GitHub with one search."""
    from bot import settings as settings_mod
    from bot.errors import BadInput
    from bot.github import ledger
    from bot.github import pulls as prs
    from bot.github.adapter import PyGithubAdapter
    from bot.github.gate import GATE_CONTEXT, GATE_MARKER
    from bot.health import report as report_mod

    token, repo = settings_mod.get("GITHUB_TOKEN"), settings_mod.get("GITHUB_REPOSITORY")
    if not token:
        raise BadInput("--github needs GITHUB_TOKEN (a token that can read the repository's pull requests)")
    if not repo or "/" not in repo:
        raise BadInput(f"--github needs GITHUB_REPOSITORY as owner/name, got {repo!r}")
    logins = tuple(dict.fromkeys([*settings.config.github.bot_logins,
                                  *(settings_mod.get("REPLAYBOOK_BOT_LOGINS") or "").split()]))
    port = PyGithubAdapter(repo, token, settings_mod.get("GITHUB_API_URL"), bot_logins=logins,
                           seconds_between_requests=0, seconds_between_writes=0)
    try:
        found = port.search_pulls(ledger.RULE_PRS, GATE_CONTEXT)
    finally:
        port.close()
    rows = [report_mod.PrRow(number=g.pull.number, rule_id=prs.rule_id_of(g.pull, logins), title=g.pull.title,
                             gate=g.gate, url=g.pull.url)
            for g in found if g.pull.state == "open" and prs.is_rule_pr(g.pull, logins)]
    return {"gate_records": ledger.collect(found, GATE_MARKER, logins), "open_prs": rows}
