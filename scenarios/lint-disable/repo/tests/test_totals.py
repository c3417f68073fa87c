from decimal import Decimal

from invoice.totals import invoice_total


def test_total_skips_blank_and_unpriced_lines():
    lines = ["MUG-01;12.90", "", "TEE-BLK-M;n/a", "TOTE-02;1,000.10"]
    assert invoice_total(lines) == Decimal("1013.00")
