"""Reads the server's settings (config/settings.toml)."""

import tomllib
from pathlib import Path

SETTINGS = Path(__file__).resolve().parent.parent / "config" / "settings.toml"


def port() -> int:
    return tomllib.loads(SETTINGS.read_text())["server"]["port"]


if __name__ == "__main__":
    print(f"listening on {port()}")
