"""A small stdlib linter: python tools/lint.py [PATH ...]

Rules:
  L001  import that is never used
  L002  bare `except:` (also swallows KeyboardInterrupt and real bugs)

A line ending in `# lint: disable=L001,L002` is not checked for those codes,
and `disable = L001, L002` in lint.cfg turns codes off everywhere.
"""

from __future__ import annotations

import ast
import configparser
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INLINE = re.compile(r"#\s*lint:\s*disable=([A-Z0-9, ]+)")


def load_config(path: Path = ROOT / "lint.cfg") -> tuple[list[str], set[str]]:
    parser = configparser.ConfigParser()
    parser.read(path, encoding="utf-8")
    section = parser["lint"] if parser.has_section("lint") else {}
    paths = section.get("paths", "src").split()
    disabled = {c.strip() for c in section.get("disable", "").split(",") if c.strip()}
    return paths, disabled


def unused_imports(tree: ast.Module) -> list[tuple[int, str]]:
    imported: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported[(alias.asname or alias.name).split(".")[0]] = node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                imported[alias.asname or alias.name] = node.lineno
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return [(line, f"L001 '{name}' imported but unused")
            for name, line in imported.items() if name not in used]


def bare_excepts(tree: ast.Module) -> list[tuple[int, str]]:
    return [(n.lineno, "L002 bare 'except:'; name the exceptions you expect")
            for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.type is None]


def lint_file(path: Path, disabled: set[str]) -> list[str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    problems = []
    for line, message in sorted(unused_imports(ast.parse(source)) + bare_excepts(ast.parse(source))):
        code = message.split()[0]
        inline = INLINE.search(lines[line - 1])
        if code in disabled or (inline and code in inline.group(1).replace(" ", "").split(",")):
            continue
        problems.append(f"{path.relative_to(ROOT)}:{line}: {message}")
    return problems


def main(argv: list[str]) -> int:
    paths, disabled = load_config()
    targets = [Path(p).resolve() for p in argv] or [ROOT / p for p in paths]
    files = sorted(f for t in targets for f in ([t] if t.is_file() else t.rglob("*.py")))
    problems = [p for f in files for p in lint_file(f, disabled)]
    print("\n".join(problems) or f"lint: {len(files)} files clean")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
