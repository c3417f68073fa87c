"""``replaybook demo``: the loop, offline, on bundled material."""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path

import click

from bot import demo
from bot.errors import BadInput


@click.command("demo")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Empty or new folder to build the demo repository in (default: a temporary folder, kept).")
def command(workspace: Path | None) -> None:
    """Run the loop offline on the bundled scenarios and print a short report.

    It builds a scratch repository from the four bundled scenarios and walks
    it through the incident store, proposal checks, replays of each proposal
    without and with its rule (the builtin agent against the SIMULATED model),
    the capped playbook, citation hits, rendering and injection. It needs no
    network and no key.
    """
    if workspace is None:
        workspace = Path(tempfile.mkdtemp(prefix="replaybook-demo-"))
    elif workspace.exists() and any(workspace.iterdir()):
        raise BadInput(f"{workspace}: --workspace must be empty or new; the demo never writes over files")
    workspace.mkdir(parents=True, exist_ok=True)
    click.echo(f"# Replaybook demo (offline; agents run against the SIMULATED model)\n\nWorkspace: `{workspace}`\n")
    folder = demo.run(workspace, click.echo, datetime.now(timezone.utc).date())
    click.echo(f"Look around: `cd {workspace}` then `replaybook playbook list --all`, or read `{folder / 'PLAYBOOK.md'}`.")
