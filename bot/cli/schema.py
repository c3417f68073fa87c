"""``replaybook schema``: JSON Schemas of the file formats, generated from the models, so editors validate the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from bot._util import yamlfile
from bot.cli.output import emit_json
from bot.config import Config
from bot.incident.store import Incident
from bot.playbook.rule import Rule
from bot.scenario.spec import Scenario

KINDS = {"incident": Incident, "rule": Rule, "scenario": Scenario, "config": Config}

def schema(kind: str) -> dict[str, Any]:
    model = KINDS[kind]
    out = model.model_json_schema()
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$id"] = yamlfile.SCHEMA_URL.format(kind=kind)
    return out

def write_all(folder) -> None:
    """Write ``schemas/<kind>.schema.json``; a test keeps them in sync."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        (folder / f"{kind}.schema.json").write_text(json.dumps(schema(kind), indent=2) + "\n", encoding="utf-8")

@click.command("schema")
@click.argument("kind", type=click.Choice(sorted(KINDS)))
def command(kind: str) -> None:
    """Print the JSON Schema of an incident, rule or scenario file.

    Editors that run yaml-language-server validate our files with it; the
    files Replaybook writes carry the schema comment on their first line.
    """
    emit_json(schema(kind))

if __name__ == "__main__":
    write_all("schemas")
