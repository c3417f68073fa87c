"""``replaybook scenario validate``: is each scenario sound enough to prove a rule?"""

from __future__ import annotations

from pathlib import Path

import click

from bot.cli.output import emit_json
from bot.errors import BadInput, ReplaybookError
from bot.playbook import rule as rules_mod
from bot.playbook.check import exit_code, validate_folders
from bot.playbook.store import Playbook
from bot.replay.cache import ReplayCache
from bot.scenario import suite as suite_mod


@click.group("scenario")
def group() -> None:
    """Replay scenarios: validate them."""


class Unsound(ReplaybookError):
    """A scenario loads but cannot prove a rule (exit 1)."""

    exit_code = 1


@group.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--no-control", is_flag=True, help="Skip the do-nothing control replay (only the files are checked).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Replay cache for the control (default: config paths.cache).")
@click.option("--no-cache", is_flag=True, help="Replay the control even when a cached result exists.")
@click.option("--rule", "rule_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A rule file (rule.yaml) to look for leakage of, beside the rules that replay each scenario.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...], no_control: bool, cache_dir: Path | None,
             no_cache: bool, rule_file: Path | None, as_json: bool) -> None:
    """Check each scenario in PATHS (default: the whole suite) can prove a rule.

    The schema (every unknown key named), the fixture (symlinks, size), the
    simulated model's policy (each step and key, and that its branch text is
    in the rule), the do-nothing control: a replay in which the agent
    changes nothing must fail, and the reference solution (`solution:`): a
    replay that runs it must pass every check (none: a warning). Leakage is a warning (exit unchanged): the task
    or the fixture's README, CONTRIBUTING, AGENTS.md or CLAUDE.md already says
    what the rule says (its commands, its operative terms, or its meaning), or
    the task states a rule check (`ran`, `not_ran`, `diff_excludes` ...). Exit
    0 when all are sound, 1 when one is unsound, 2 when one is bad input.
    """
    settings = ctx.obj.settings
    folders = [_folder(p) for p in paths] or suite_mod.folders(settings.path("scenarios"))
    cache = None if no_cache else ReplayCache(cache_dir or settings.path("cache"))
    rule = rules_mod.load(rule_file, named_by_id=False).rule if rule_file else None
    findings = validate_folders(folders, playbook_for(ctx), control=not no_control, cache=cache, rule=rule)
    if as_json:
        emit_json([{"scenario": f.scenario, "folder": str(f.folder), "ok": f.ok, "problems": f.problems,
                    "unsound": f.unsound, "warnings": f.warnings, "control": f.control.verdict if f.control else None,
                    "solution": f.solution.verdict if f.solution else None}
                   for f in findings])
    else:
        for f in findings:
            click.echo(f"{'ok' if f.ok else 'bad input' if f.problems else 'unsound'}: {f.scenario}")
            for line in f.lines():
                click.echo(f"  - {line}")
            for line in f.warnings:
                click.echo(f"  - warning: {line}")
    code = exit_code(findings)
    if code:
        bad = [f.scenario for f in findings if not f.ok]
        error = BadInput if code == 2 else Unsound
        raise error(f"{len(bad)} of {len(findings)} scenario(s) cannot prove a rule: {', '.join(bad)}")
    if not findings:
        click.echo(f"no scenarios in {settings.path('scenarios')}")


def _folder(path: Path) -> Path:
    folder = path.parent if path.name == "scenario.yaml" else path
    if not (folder / "scenario.yaml").is_file():
        raise BadInput(f"{path}: no scenario here; a scenario is a folder holding scenario.yaml and its fixture")
    return folder


def playbook_for(ctx: click.Context) -> Playbook:
    from bot.cli.playbook import open_playbook

    return open_playbook(ctx)

