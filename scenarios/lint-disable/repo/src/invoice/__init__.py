"""Supplier invoice parsing and totals."""
