"""Fixed-width ledger lines, the layout finance's import job expects.

Layout (v1): id (10) | customer (24) | amount in cents, zero-padded (12) | currency (3)
"""

from __future__ import annotations


class LedgerExporter:
    def render(self, orders: list[dict]) -> str:
        lines = [
            f"{o['id']:<10}{o['customer'][:24]:<24}{o['total_cents']:012d}{o['currency']:>3}"
            for o in orders
        ]
        return "\n".join(lines) + "\n"
