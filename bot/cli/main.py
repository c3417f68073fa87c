"""``replaybook``: the command groups, wired into one error boundary.

Exit codes: 0 ok; 1 a failed check or a reject decision; 2 bad input or
usage; 3 a bug in Replaybook (the report is written to a file); 130 Ctrl-C.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from bot import config as config_mod
from bot._util.build_info import VERSION as __version__
from bot._util.credentials import host_redactor
from bot.cli import (
    agent,
    capture,
    crash_log,
    demo,
    distill,
    doctor,
    gate,
    github,
    incident,
    init,
    lessons,
    model,
    org,
    playbook,
    replay,
    report,
    rule,
    scenario,
    schema,
    trace,
    view,
)
from bot.errors import ReplaybookError
from bot.replay.sandbox import host_tools  # noqa: F401  (first: the harness's own tools are found from the PATH at start)
from bot.settings import Environment


def _print_version(ctx: click.Context) -> None:
    from bot._util.build_info import describe

    click.echo(f"replaybook {describe()}")
    ctx.exit()


class Context:
    """Per-invocation state: the root folder, its lazily loaded settings, and the environment read once."""

    def __init__(self, root: Path | None):
        self._root = root
        self._settings: config_mod.Settings | None = None
        self._env: Environment | None = None

    @property
    def env(self) -> Environment:
        if self._env is None:
            self._env = Environment.read()
            for warning in self._env.warnings():
                click.echo(f"warning: {warning}", err=True)
        return self._env

    @property
    def settings(self) -> config_mod.Settings:
        if self._settings is None:
            self._settings = config_mod.load(self._root)
        return self._settings


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _, value: _print_version(ctx) if value else None,
              help="Show the version and the commit it was built from (`0.1.0 (fd0a01d, untagged)`), and exit.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository root (default: the folder of the nearest .replaybook.yml, else the current folder).",
)
@click.pass_context
def cli(ctx: click.Context, root: Path | None) -> None:
    """Replaybook turns a coding agent's failures into a tested, capped playbook of rules.

    Capture incidents, distill rules, and admit only what replay proves.
    """
    ctx.obj = Context(root)


cli.add_command(incident.group)
cli.add_command(playbook.group)
cli.add_command(rule.group)
cli.add_command(replay.command)
cli.add_command(scenario.group)
cli.add_command(gate.command)
cli.add_command(distill.command)
cli.add_command(capture.group)
cli.add_command(trace.group)
cli.add_command(lessons.group)
cli.add_command(schema.command)
cli.add_command(demo.command)
cli.add_command(github.group)
cli.add_command(init.command)
cli.add_command(doctor.command)
cli.add_command(agent.group)
cli.add_command(model.group)
cli.add_command(report.command)
cli.add_command(org.group)
cli.add_command(view.command)


def _same_help_everywhere(command: click.Command) -> None:
    """`-h` works on every command, even one invoked on its own (tests, CliRunner)."""
    command.context_settings.setdefault("help_option_names", ["-h", "--help"])
    for sub in getattr(command, "commands", {}).values():
        _same_help_everywhere(sub)


_same_help_everywhere(cli)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; the one place errors become exit codes."""
    try:
        result = cli.main(args=argv, prog_name="replaybook", standalone_mode=False)
    except ReplaybookError as exc:
        click.echo(f"error: {host_redactor().text(exc.render())}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:
        return _report_bug()
    return result if isinstance(result, int) else 0


def _report_bug() -> int:
    exc = sys.exc_info()[1]
    redact = host_redactor()
    report = crash_log.write(exc, redact.text(traceback.format_exc()))
    click.echo(
        f"internal error: {type(exc).__name__}: {redact.text(str(exc))}\n"
        f"This is a bug in Replaybook, not in your input. The full report is in {report}; please attach it to an issue.",
        err=True,
    )
    return 3


def main() -> None:
    sys.exit(run())
