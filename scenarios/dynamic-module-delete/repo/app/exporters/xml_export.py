"""XML order feed for the old marketplace integration."""

from __future__ import annotations

from app.exporters.xml_escape import escape
from app.xml_schema import ORDER_XSD_URL


class XmlExporter:
    def render(self, orders: list[dict]) -> str:
        items = "".join(
            f'<order id="{escape(o["id"])}"><customer>{escape(o["customer"])}</customer>'
            f'<total currency="{o["currency"]}">{o["total_cents"]}</total></order>'
            for o in orders
        )
        return f'<orders xmlns="{ORDER_XSD_URL}">{items}</orders>\n'
