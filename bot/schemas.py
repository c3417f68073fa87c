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
