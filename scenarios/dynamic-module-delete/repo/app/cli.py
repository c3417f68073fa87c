"""python -m app.cli --format NAME --orders FILE: print the export to stdout."""

from __future__ import annotations

import argparse
import sys

from app import registry
from app.report import load_orders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="app.cli")
    parser.add_argument("--format", required=True, help="a name from config/exporters.ini")
    parser.add_argument("--orders", required=True, help="orders JSON file")
    args = parser.parse_args(argv)
    try:
        exporter = registry.load(args.format)
    except KeyError:
        known = ", ".join(sorted(registry.formats()))
        parser.error(f"unknown format {args.format!r}; configured: {known}")
    sys.stdout.write(exporter.render(load_orders(args.orders)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
