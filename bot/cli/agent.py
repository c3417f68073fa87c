"""``replaybook agent``: install and list the pinned agent CLIs replays run."""

from __future__ import annotations

import click

from bot.cli.output import emit_json, table


@click.group("agent")
def group() -> None:
    """The real agent CLIs replays run (claude-code, codex, mini-swe-agent, opencode), each pinned to one version."""


@group.command("install")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
def install_(names: tuple[str, ...]) -> None:
    """Install the pinned version of each agent into the cache (from npm or PyPI); installed ones are kept."""
    from bot.replay.agents import install

    pins = [install.pin(n) for n in names]  # every name is checked before anything installs
    for p in pins:
        already = install.installed_version(p.agent) is not None
        binary = install.install(p.agent)
        click.echo(f"{'already installed' if already else 'installed'} {p.spec}: {binary}")


@group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(as_json: bool) -> None:
    """Show each agent's pinned version, what is installed in the cache, and what replays would run."""
    from bot.replay.agents import install

    rows = []
    for p in install.PINS.values():
        rows.append({"agent": p.agent, "package": p.package, "registry": p.registry, "pinned": p.version,
                     "installed": install.installed_version(p.agent), "runs": install.find(p.agent)})
    if as_json:
        emit_json(rows)
        return
    click.echo(table(["agent", "package", "pinned", "installed in cache", "replays run"],
                     [(r["agent"], f"{r['registry']}:{r['package']}", r["pinned"], r["installed"] or "no",
                       r["runs"] or "not found") for r in rows]))
