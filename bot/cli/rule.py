"""``replaybook rule``: validate rule files against the playbook."""

from __future__ import annotations

from pathlib import Path

import click

from bot.cli.output import each_valid
from bot.cli.playbook import open_playbook
from bot.errors import BadInput, CheckFailed
from bot.gate import decision as gate_mod
from bot.playbook.check import rule_scenario_problems


@click.group("rule")
def group() -> None:
    """Validate rule files (a candidate, or a hand-written rule in a PR)."""


@group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...]) -> None:
    """Check rule files as the gate's cheap checks do: the format, an unused id, cited incidents that exist, a
    scenario that is sound, and no twin of an admitted rule (the same advice in other words).

    The scenario is validated as `replaybook scenario validate` does: the do-nothing control must fail and the
    reference solution (`solution:`) must pass every check (cached replays, no model). Exit 2 when any file is
    invalid, 1 when a valid one is a twin (the gate would reject it before any replay); nothing is changed either
    way.
    """
    book = open_playbook(ctx)
    problems: list[str] = []
    twins: list[str] = []
    repeating = 0
    for path, rule in each_valid(paths, book.vet, problems):
        found = gate_mod.twins(book, rule)  # the gate's own check, first as in the gate: no replay for a twin
        twins += [f"{path}: {why}; the gate rejects it before any replay" for why in found]
        repeating += bool(found)
        if found:
            continue
        unsound = rule_scenario_problems(book, rule, ctx.obj.settings.path("cache"))
        if unsound:
            problems += [f"{path}: its scenario {rule.replay} cannot prove it: {line}" for line in unsound]
        else:
            click.echo(f"{path}: ok{' (provisional: cites fewer than two incidents)' if rule.provisional else ''}")
    if problems:
        raise BadInput(f"{len(problems)} of {len(paths)} rule file(s) are invalid", problems=problems + twins)
    if twins:
        raise CheckFailed(f"{repeating} of {len(paths)} rule file(s) repeat an admitted rule", problems=twins)
