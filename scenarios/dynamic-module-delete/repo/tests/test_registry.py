import pytest

from app import registry
from app.report import load_orders

ORDERS = [{"id": "A-1", "customer": "Acme", "total_cents": 1234, "currency": "EUR"}]


@pytest.mark.parametrize("name", sorted(registry.formats()))
def test_every_configured_format_loads_and_renders(name):
    out = registry.load(name).render(ORDERS)
    assert "A-1" in out


def test_unknown_format_is_a_key_error():
    with pytest.raises(KeyError):
        registry.load("pdf")


def test_csv_amounts_are_in_euros():
    assert "A-1,Acme,12.34,EUR" in registry.load("csv").render(ORDERS)


def test_orders_are_sorted_by_id(tmp_path):
    path = tmp_path / "orders.json"
    path.write_text('[{"id": "B"}, {"id": "A"}]')
    assert [o["id"] for o in load_orders(path)] == ["A", "B"]
