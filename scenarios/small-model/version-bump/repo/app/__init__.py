"""A small invoicing library."""

__version__ = "1.3.0"
