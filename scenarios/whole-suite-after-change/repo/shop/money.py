"""Money is kept in whole cents; these turn cents into text."""

from __future__ import annotations


def format_price(cents: int) -> str:
    """Cents as a price for people, e.g. 123456 -> "1234.56"."""
    return f"{cents // 100}.{cents % 100:02d}"
