"""Read orders and shape them into rows every exporter understands."""

from __future__ import annotations

import json
from pathlib import Path


def load_orders(path: Path) -> list[dict]:
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    return sorted(rows, key=lambda r: r["id"])


def euros(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"
