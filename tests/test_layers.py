"""The replay engine is a clean hub: it imports nothing of the bot but these modules."""

from __future__ import annotations

import ast
from pathlib import Path

import bot

REPLAY = Path(bot.__file__).parent / "replay"
ALLOWED = ("bot.replay", "bot.errors", "bot.scenario", "bot.credentials", "bot.model")


def _bot_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bot":
            names |= {node.module} if node.module != "bot" else {f"bot.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.split(".")[0] == "bot"}
    return names


def test_the_replay_engine_imports_only_errors_scenario_credentials_and_the_model_package():
    outside = {f"{p.relative_to(REPLAY.parent.parent)}: {name}" for p in sorted(REPLAY.rglob("*.py"))
               for name in _bot_imports(p) if not any(name == a or name.startswith(f"{a}.") for a in ALLOWED)}
    assert not outside, sorted(outside)
