"""Read amounts the way suppliers write them: "1,200.00", " 3 ", "n/a"."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation


def parse_amount(raw: str) -> Decimal | None:
    """The amount in ``raw``, or None when the cell holds no number."""
    try:
        return Decimal(raw.strip().replace(",", ""))
    except:
        return None


def parse_line(line: str) -> tuple[str, Decimal | None]:
    """Split "SKU;amount" into its parts."""
    sku, _, amount = line.partition(";")
    return sku.strip(), parse_amount(amount)
