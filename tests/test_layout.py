"""The layout of the tests: shared material lives in ``helpers``, ``support/`` and ``fakes/``, never in a test module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent

# The gate side, not yet moved: each still imports test_gate, test_gate_interrupt or test_redundancy.
# The next engineer moves their shared helpers into support/ and empties this list.
NOT_YET_MOVED = frozenset({
    "test_gate_agents",
    "test_gate_cache_trust",
    "test_gate_estimate",
    "test_gate_interrupt",
    "test_gate_jobs",
    "test_github_retest",  # imports test_redundancy
    "test_harness_trust_cli",
    "test_redundancy",
    "test_replay_interrupt",
    "test_report",
    "test_system_prompt",
})


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
    offenders = {name: sorted(others) for name, others in importers.items() if name not in NOT_YET_MOVED}
    assert not offenders, f"move what these import into tests/support/ (or helpers.py): {offenders}"


def test_the_allow_list_only_names_modules_that_still_import_a_test_module():
    still = set(importers_of_test_modules())
    assert sorted(NOT_YET_MOVED - still) == [], "these no longer import a test module: take them off NOT_YET_MOVED"


def test_the_check_sees_an_import_of_a_test_module(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text("def helper():\n    from test_gate import setup\n\nfrom . import test_other\n", encoding="utf-8")
    assert {"test_gate", "test_other"} <= imported_modules(planted)
