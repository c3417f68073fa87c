"""Short markdown for reviewers: tables."""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, width: int = 90) -> str:
    """A markdown table; cells are one line, escaped, and cut at ``width``."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v, width) for v in row) + " |" for row in rows]
    return "\n".join(out)


def cell(value: Any, width: int = 90) -> str:
    if value is None:
        return ""
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
