"""``replaybook schema``: JSON Schemas so editors validate the files."""

from __future__ import annotations

import click

from bot import schemas
from bot.cli.output import emit_json


@click.command("schema")
@click.argument("kind", type=click.Choice(sorted(schemas.KINDS)))
def command(kind: str) -> None:
    """Print the JSON Schema of an incident, rule or scenario file.

    Editors that run yaml-language-server validate our files with it; the
    files Replaybook writes carry the schema comment on their first line.
    """
    emit_json(schemas.schema(kind))
