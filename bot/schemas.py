"""JSON Schemas of the file formats, generated from the models."""

from __future__ import annotations

from typing import Any

from bot import yamlfile
from bot.config import Config
from bot.incident import Incident
from bot.rule import Rule
from bot.scenario import Scenario

KINDS = {"incident": Incident, "rule": Rule, "scenario": Scenario, "config": Config}


def schema(kind: str) -> dict[str, Any]:
    model = KINDS[kind]
    out = model.model_json_schema()
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$id"] = yamlfile.SCHEMA_URL.format(kind=kind)
    return out


def write_all(folder) -> None:
    """Write ``schemas/<kind>.schema.json``; a test keeps them in sync."""
    import json
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        (folder / f"{kind}.schema.json").write_text(json.dumps(schema(kind), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_all("schemas")
