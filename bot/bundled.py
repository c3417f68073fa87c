"""Where the bundled scenarios are: inside the wheel, or in a checkout."""

from __future__ import annotations

from pathlib import Path

from bot.errors import BadInput


def scenarios_dir() -> Path:
    """The four bundled scenarios (``scenarios/`` of the source tree)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_bundled" / "scenarios", here.parent / "scenarios"):
        if (candidate / "monorepo-test-cwd" / "scenario.yaml").is_file():
            return candidate
    raise BadInput("the bundled scenarios are missing from this install; reinstall replaybook")
