def total(lines):
    """The sum of quantity * unit price over invoice lines."""
    return round(sum(q * p for q, p in lines), 2)
