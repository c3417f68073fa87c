"""A small invoicing library."""

__version__ = "2.1.0.dev0"
