from decimal import Decimal

import pytest

from invoice.parse import parse_amount, parse_line


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("12.50", Decimal("12.50")), ("1,200.00", Decimal("1200.00")), (" 3 ", Decimal("3"))],
)
def test_numbers(raw, expected):
    assert parse_amount(raw) == expected


@pytest.mark.parametrize("raw", ["", "n/a", "--"])
def test_cells_without_a_number(raw):
    assert parse_amount(raw) is None


def test_parse_line():
    assert parse_line("MUG-01; 12.90") == ("MUG-01", Decimal("12.90"))
