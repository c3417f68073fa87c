"""Pull the price list from the pricing service into data/prices.json.

The deploy pipeline runs `python sync.py` before every storefront build.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "data" / "prices.json"
FALLBACK = ROOT / "data" / "prices_fallback.json"
DEFAULT_URL = "https://pricing.internal.acme.dev/v2/prices"


def fetch_prices(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.load(resp)


def sync(url: str, out: Path = OUT, fallback: Path = FALLBACK) -> str:
    """Write the price list to ``out``; return where it came from."""
    prices = fetch_prices(url)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(prices, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return "service"


def main() -> int:
    url = os.environ.get("FLAKY_URL", DEFAULT_URL)
    source = sync(url)
    print(f"prices.json written from {source}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
