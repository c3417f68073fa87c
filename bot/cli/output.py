"""Short markdown for people, JSON for programs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from bot._util import records
from bot._util.credentials import host_redactor
from bot._util.markdown import table  # noqa: F401  (re-exported for the commands)
from bot.errors import BadInput

T = TypeVar("T")


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def warn(message: str) -> None:
    click.echo(f"warning: {host_redactor().text(message)}", err=True)


def report(text: str, **kw: Any) -> None:
    """A report for people: redacted of every secret this process holds, whatever wrote it."""
    click.echo(host_redactor().text(text), **kw)


def each_valid(paths: Iterable[Path], load: Callable[[Path], T], problems: list[str]) -> Iterator[tuple[Path, T]]:
    """``(path, record)`` for each file ``load`` accepts, its warnings shown; the rest go to ``problems``."""
    for path in paths:
        try:
            record = load(path)
        except BadInput as exc:
            problems.append(exc.render())
            continue
        for w in records.warnings_for(record, path):
            warn(w)
        yield path, record
