"""Invoice totals."""

from __future__ import annotations

from decimal import Decimal

from invoice.parse import parse_line


def invoice_total(lines: list[str]) -> Decimal:
    """Sum of the amounts on ``lines``; lines without a number count as zero."""
    amounts = (parse_line(line)[1] for line in lines if line.strip())
    return sum((a for a in amounts if a is not None), Decimal("0"))
