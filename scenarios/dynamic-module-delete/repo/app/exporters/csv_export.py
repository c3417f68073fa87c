"""Comma-separated export for the ops spreadsheet."""

from __future__ import annotations

import csv
import io

from app.report import euros


class CsvExporter:
    def render(self, orders: list[dict]) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", "customer", "total", "currency"])
        for o in orders:
            writer.writerow([o["id"], o["customer"], euros(o["total_cents"]), o["currency"]])
        return out.getvalue()
