"""``replaybook demo``: the loop, offline, on bundled material."""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path

import click

from bot.cli import demo_loop as demo
from bot.errors import BadInput, CheckFailed


@click.command("demo")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Empty or new folder to build the demo repository in (default: a temporary folder, kept).")
@click.option("--org", "org", is_flag=True,
              help="Show the organisation's tier instead: three member repositories, one org rule admitted, one "
                   "refused because it regresses one member (SIMULATED model).")
@click.option("--model", type=click.Choice(["scripted", "local"]), default=None,
              help="`local`: the real model `replaybook model install local` installs answers capture, distill and "
                   "the replays, offline. `scripted`: the SIMULATED model. "
                   "Default: Claude with ANTHROPIC_API_KEY, else scripted.")
@click.pass_context
def command(ctx: click.Context, workspace: Path | None, org: bool, model: str | None) -> None:
    """Run the whole loop on bundled material: capture, distill, admit.

    It builds a scratch repository from the six seed failures, captures
    incidents from their CI logs and PR exports, distills rules, gates each by
    replay (the builtin agent) and admits what is proven, under a cap of 3
    (small on purpose, to show a retirement). Two proposals are made to be
    refused: one the agent already follows, one that breaks another scenario.
    Exit 1 when no rule was admitted.
    Offline it uses the SIMULATED model throughout; with ANTHROPIC_API_KEY set
    it uses Claude; with `--model local` the local model (slow on a CPU: minutes).
    """
    if workspace is None:
        workspace = Path(tempfile.mkdtemp(prefix="replaybook-demo-"))
    elif workspace.exists() and any(workspace.iterdir()):
        raise BadInput(f"{workspace}: --workspace must be empty or new; the demo never writes over files")
    workspace.mkdir(parents=True, exist_ok=True)
    if org:
        if model == "local":
            raise BadInput("--org shows the org tier on the SIMULATED model only; drop --model local")
        _org(workspace)
        return
    env = ctx.obj.env
    who = ("offline, local model" if model == "local" else "Claude" if env.api_key and model != "scripted"
           else "offline, SIMULATED model")
    click.echo(f"# Replaybook demo ({who})\n\nWorkspace: `{workspace}`\n")
    outcome = demo.run(workspace, click.echo, datetime.now(timezone.utc).date(), env=env,
                       progress=lambda msg: click.echo(msg, err=True), model=model)
    click.echo(f"Look around: `cd {workspace}` then `replaybook playbook list --all`, "
               f"or read `{outcome.playbook / 'PLAYBOOK.md'}`.")
    if not outcome.admitted:
        raise CheckFailed("the gate admitted no rule in this run",
                          problems=[f"{rule}: {why}" for rule, why in outcome.refused.items()])


def _org(workspace: Path) -> None:
    from bot.cli import demo_org

    click.echo(f"# Replaybook demo: the organisation's tier (offline, SIMULATED model)\n\nWorkspace: `{workspace}`\n")
    outcome = demo_org.run(workspace, click.echo, datetime.now(timezone.utc).date(),
                           progress=lambda msg: click.echo(msg, err=True))
    click.echo(f"\nAdmitted into the org tier: {', '.join(outcome.admitted) or 'none'}; refused: "
               + ("; ".join(f"{r} ({why})" for r, why in outcome.refused.items()) or "none") + ".")
    if not outcome.admitted:
        raise CheckFailed("the org gate admitted no rule in this run",
                          problems=[f"{rule}: {why}" for rule, why in outcome.refused.items()])
