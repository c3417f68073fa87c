"""``replaybook demo``: the loop, offline, on bundled material."""

from __future__ import annotations

import click


@click.command("demo")
def command() -> None:
    """Run the loop offline on the bundled scenarios (simulated model)."""
    raise NotImplementedError
