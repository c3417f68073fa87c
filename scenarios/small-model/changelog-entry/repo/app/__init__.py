"""A small invoicing library."""


def parse(text: str) -> list[str]:
    """Split an invoice's lines; empty input gives no lines."""
    return [line for line in text.splitlines() if line.strip()] if text else []
