"""Daily order digest e-mails."""

from __future__ import annotations


def digest_subject(shop: str, orders: int) -> str:
    noun = "order" if orders == 1 else "orders"
    return f"[{shop}] {orders} new {noun} today"
