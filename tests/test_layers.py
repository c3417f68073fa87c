"""The packages are layers: each imports only the ones below it, so a newcomer reads the house bottom up.

Imports under ``if TYPE_CHECKING:`` do not count (they never run); a function's own import does.
Where a lower layer reads a higher one's record, it says what it reads as a ``Protocol``.
"""

from __future__ import annotations

from pathlib import Path

import bot
from bot.cli.architecture import (  # bottom to top, the one list docs/architecture.md is made from
    LAYERS,
    module_imports,
)

ROOT = Path(bot.__file__).parent



def _concept(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "bot"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_top_level_name_is_a_layer():
    names = {p.stem if p.suffix == ".py" else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))} - {"__init__"}
    assert names == set(LAYERS)


def test_each_package_imports_only_the_layers_below_it():
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        module = _module(path)
        here = _concept(module)
        if here == "bot":  # bot/__init__.py: the public API, re-exported from every layer
            continue
        for name in module_imports(path):
            there = _concept(name)
            if there == "bot" or rank[there] > rank[here]:
                upward.append(f"{module} imports {name}")
    assert not upward, upward


def test_the_public_api_is_importable_from_bot():
    for name in bot.__all__:
        assert getattr(bot, name) is not None


def test_docs_architecture_is_the_tree_as_it_is():
    from bot.cli import architecture

    doc = ROOT.parent / "docs" / "architecture.md"
    assert doc.read_text(encoding="utf-8") == architecture.render(), "run: python -m bot.cli.architecture > docs/architecture.md"


def test_the_concept_table_names_every_package_and_module():
    from bot.cli import architecture

    rows = {r["name"]: r for r in architecture.concepts()}
    assert set(rows) == set(LAYERS)
    for name, row in rows.items():
        package = ROOT / name
        if package.is_dir():
            on_disk = {p.relative_to(package).with_suffix("").as_posix() for p in package.rglob("*.py")
                       if p.name != "__init__.py"}
            assert set(row["modules"]) == on_disk, name
        assert row["what"].strip(". "), f"{name}: its docstring says what it is"


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, long


def _imported(path: Path) -> set[str]:
    """What ``path`` imports, each ``from a.b import c`` also as ``a.b.c`` (``c`` may be a module)."""
    import ast

    names = set(module_imports(path))
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bot."):
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_adapters_reach_replay_only_through_the_use_cases():
    """The CLI and GitHub go through ``gate/`` (and what owns validation) to replay: never into the engine."""
    internals = ("bot.replay.engine", "bot.replay.validate")
    reached = [f"{path.relative_to(ROOT.parent)} imports {name}"
               for package in ("github", "cli") for path in sorted((ROOT / package).rglob("*.py"))
               for name in sorted(_imported(path)) if name in internals or name.startswith(tuple(i + "." for i in internals))]
    assert not reached, reached
