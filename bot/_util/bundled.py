"""Where the bundled scenarios are: inside the wheel, or in a checkout."""

from __future__ import annotations

from pathlib import Path

from bot.errors import BadInput


def scenarios_dir() -> Path:
    """The four bundled scenarios (``scenarios/`` of the source tree)."""
    here = Path(__file__).resolve().parents[1]  # bot/
    for candidate in (here / "_bundled" / "scenarios", here.parent / "scenarios"):
        if (candidate / "monorepo-test-cwd" / "scenario.yaml").is_file():
            return candidate
    raise BadInput("the bundled scenarios are missing from this install; reinstall replaybook")


PREFIX = "bundled:"


def named(value: str | Path) -> str | None:
    """NAME of a ``bundled:NAME`` reference, else None."""
    text = str(value)
    return text[len(PREFIX):] if text.startswith(PREFIX) else None


def scenario_folder(name: str) -> Path:
    """The bundled scenario ``name``'s folder, or ``BadInput`` listing the ones there are."""
    folder = scenarios_dir() / name
    if name and "/" not in name and (folder / "scenario.yaml").is_file():
        return folder
    raise BadInput(f"{PREFIX}{name}: no bundled scenario of that name; "
                   f"bundled are {', '.join(PREFIX + n for n in names())}")


def rule_file(name: str) -> Path:
    """The rule that fixes bundled scenario ``name`` (``bundled:NAME`` given as ``--rule``)."""
    return scenario_folder(name) / "rule.yaml"


def names() -> list[str]:
    return sorted(p.parent.name for p in scenarios_dir().glob("*/scenario.yaml"))
