"""Short markdown for people, JSON for programs."""

from __future__ import annotations

import json
from typing import Any

import click

from bot.markdown import table  # noqa: F401  (re-exported for the commands)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)
