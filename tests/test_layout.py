"""The layout of the tests: shared material lives in ``helpers``, ``support/`` and ``fakes/``, never in a test module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent

def imported_modules(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level > 0:  # from . import test_x / from .test_x import y
            names.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
    return names


def importers_of_test_modules() -> dict[str, set[str]]:
    """Each test module that imports another, with what it imports (a helper of the test below)."""
    found = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        others = {n for n in imported_modules(path) if n.startswith("test_") and n != path.stem}
        if others:
            found[path.stem] = others
    return found


def test_no_test_module_imports_another():
    importers = importers_of_test_modules()
    offenders = {name: sorted(others) for name, others in importers.items()}
    assert not offenders, f"move what these import into tests/support/ (or helpers.py): {offenders}"


def test_the_check_sees_an_import_of_a_test_module(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text("def helper():\n    from test_gate import setup\n\nfrom . import test_other\n", encoding="utf-8")
    assert {"test_gate", "test_other"} <= imported_modules(planted)


def test_the_tests_mirror_the_packages():
    """A test folder is named for the package it tests (the tests of the house itself stay at the top)."""
    import bot

    packages = {p.name for p in Path(bot.__file__).parent.iterdir() if (p / "__init__.py").is_file()}
    shared = {"support", "fakes", "actsim", "data"}  # material, not tests
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders - shared <= packages, sorted(folders - shared - packages)
    assert not [p.name for p in TESTS.glob("test_*.py") if p.stem not in TOP_LEVEL], "move it into its package's folder"


TOP_LEVEL = {"test_layers", "test_layout", "test_settings", "test_similarity", "test_loop_bench", "test_loop_noisy",
             "test_loop_learning", "test_loop_scope"}
