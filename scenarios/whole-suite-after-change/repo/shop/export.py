"""The nightly CSV export the finance team loads into their ledger: one "sku,amount" line per sale."""

from __future__ import annotations

from shop.money import format_price


def export_line(sku: str, cents: int) -> str:
    return f"{sku},{format_price(cents)}"
