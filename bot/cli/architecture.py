"""Generate docs/architecture.md from the tree: ``python -m bot.cli.architecture > docs/architecture.md``.

The concept table is read from the packages themselves (each ``__init__`` docstring, each module's
first line, the imports between them), so a test that compares the file with :func:`render` keeps
the map true to the house.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # bot/

#: Bottom to top: a package imports only itself and the ones before it (tests/test_layers.py).
LAYERS = (
    "settings", "errors", "_util", "change", "model", "scenario", "replay", "incident", "playbook", "config",
    "gate", "view", "health", "distill", "hindsight", "github", "cli", "__main__",
)

INTRO = """\
# Architecture

Generated from the tree by `python -m bot.cli.architecture > docs/architecture.md`; do not edit by
hand (a test compares the two).

Replaybook is a small core with adapters around it. The core (everything under `bot/` but `bot/cli/`,
`bot/github/adapter.py` and `bot/github/refs.py`) imports no click, PyGithub or anthropic; the CLI, the
PyGithub adapter and the model adapter (`bot/model/llm.py`, loaded on demand) do.

```mermaid
flowchart LR
  E[event: failed run, rejected PR, issue form, trace] -->|capture| I[incident]
  I -->|distill: a separate model pass| R[proposed rule + scenario]
  R -->|replay: sandboxed trials| T[trials with and without the rule]
  T -->|gate: sequential tests, suite| D{admit?}
  D -->|Change| P[playbook: rules/, archive/, PLAYBOOK.md]
  P -->|render| A[CLAUDE.md, AGENTS.md …]
  A -.->|the next run| E
```

## Changes are values, written by two sinks

Every change to the playbook, the incidents or a rendered file is planned as a `Change`
(`bot/change.py`): relative path → new text, or `None` for a deletion. Planners read and write
nothing; two sinks write:

| planner | local sink | GitHub sink |
|---|---|---|
| `playbook.transitions.admission` (rule in, coldest out past the cap, re-render, incidents resolved, `agents:` of a per-agent gate) | `Playbook.admit` | the rule PR (`bot/github/distill.py`) |
| `retirement`, `over_cap`, `hits`, `rendering`, `sections`, `maintenance` | `Playbook.retire`, `hit`, `render`, `sync_section` | the maintenance and hits PRs |
| `playbook.render.change` (every host's files) | `playbook render` | the maintenance PR |
| `distill.plan.plan` (proposals and their scenarios) | `distill.plan.distill` | one PR per proposal |
| `health.escalation.plan` (guards of an ignored rule) | `playbook escalate --write` | the dashboard's guard PR |
| `IncidentStore.resolution` | within an admission | within the rule PR |
| `github.init.Plan.change` (workflows, config, `.gitignore`) | `replaybook init` | — |

The local sink is `change.apply_local` (one journal commit under the playbook's lock: all of it or,
after a crash, none); the GitHub sink is `pulls.commit_change` (one commit on the PR's branch). The one
other door is a new incident's exclusive create (`IncidentStore.add`, `O_EXCL`: two captures never
clobber each other). `tests/playbook/test_sinks.py` runs the whole local loop under an audit hook and fails on
any other writer. Readers take a `Tree` (a checkout, `DiskTree`; a commit, `playbook_diff.GitTree`; a
change not yet written, `OverlayTree`).

The environment is read in one module, `bot/settings.py` (its table is `docs/settings.md`); what is
built from it and the config (replay options, the model adapter) is built in `bot/config.py`.

## The gate has one front door

The command line (`bot/cli/`) and GitHub (`bot/github/`) are adapters: they read their input, call a use
case, and show or post what it returns. A rule PR is judged by `bot/gate/pull_request.py` (what the PR
changes, `gate/playbook_diff.py` and `gate/instructions.py`, then the replay) into one verdict
(`gate/verdict.py`) that `bot/github/gate.py` only posts: a check run or a status, one comment, the job
summary. Both build the gate's options in `gate/options.py`; the default agent is a parameter. Neither
imports the replay's engine or its scenario validation: they go through `bot/gate/`, `playbook/check.py` and
the replay's public entry points (`bot/replay/__init__.py`; `tests/test_layers.py` checks it).
"""

OUTRO = """\
"Trace" names two things, kept apart by their packages: a replay's trial log (`bot/replay/trace/events.py`,
`trace.jsonl` in a run folder under `paths.traces`) and hindsight's store of any agent's events
(`bot/hindsight/traces/`).

## Tests and fakes

Fakes implement the real interfaces. `tests/fakes/port.py` is an in-memory `GitHubPort` for what lies
above the port; `tests/fakes/github.py` serves GitHub's REST shapes over HTTP so PyGithub runs for real
(adapter, workflow simulations and end-to-end tests); `bot/replay/gateway/server.py` serves the Messages and
Responses APIs so the anthropic SDK and the agent CLIs run for real.
"""


def _doc(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _first_sentence(text: str) -> str:
    """The docstring's first sentence, its Sphinx roles as plain code."""
    flat = " ".join(text.split("\n\n", 1)[0].split())
    flat = re.sub(r":(?:mod|class|func|meth|data):`~?([^`]+)`", lambda m: f"`{m.group(1).split('.')[-1]}`", flat)
    flat = flat.replace("``", "`")
    return flat.split(". ", 1)[0].rstrip(".") + "."


def module_imports(path: Path) -> set[str]:
    """The ``bot`` modules ``path`` imports, at any depth (a function's own import counts), but not under
    ``if TYPE_CHECKING:`` (it never runs)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for n in ast.walk(node)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bot":
            names |= {node.module} if node.module != "bot" else {f"bot.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.split(".")[0] == "bot"}
    return names


def _imports(path: Path) -> set[str]:
    return {n.split(".")[1] for n in module_imports(path) if "." in n}


def concepts() -> list[dict]:
    """One row per top-level name, bottom layer first: what it is, what it imports, its modules."""
    rows = []
    for name in LAYERS:
        package = ROOT / name
        files = sorted(package.rglob("*.py")) if package.is_dir() else [ROOT / f"{name}.py"]
        init = package / "__init__.py" if package.is_dir() else files[0]
        modules = [f for f in files if f.name != "__init__.py"]
        uses = set().union(*(_imports(f) for f in files)) - {name}
        rows.append({"name": name, "path": f"bot/{name}/" if package.is_dir() else f"bot/{name}.py",
                     "what": _first_sentence(_doc(init)),
                     "imports": [n for n in LAYERS if n in uses],
                     "modules": [f.relative_to(package).with_suffix("").as_posix() for f in modules]
                     if package.is_dir() else []})
    return rows


def sub_packages() -> list[dict]:
    """One row per package inside a concept (``bot/replay/sandbox/``…), in layer order: what it is, its modules."""
    rows = []
    for name in LAYERS:
        package = ROOT / name
        if not package.is_dir():
            continue
        for init in sorted(package.rglob("*/__init__.py")):
            folder = init.parent
            rows.append({"path": f"bot/{folder.relative_to(ROOT).as_posix()}/", "what": _first_sentence(_doc(init)),
                         "modules": sorted(f.relative_to(folder).with_suffix("").as_posix() for f in folder.rglob("*.py")
                                           if f.name != "__init__.py")})
    return rows


def _top_modules(modules: list[str]) -> list[str]:
    """A concept's modules, each sub-package's shown once as ``name/`` (the table below lists what is in it)."""
    return list(dict.fromkeys(m if "/" not in m else m.split("/", 1)[0] + "/" for m in modules))


def render() -> str:
    lines = [INTRO, "## Where each concept lives", "",
             "Bottom layer first: each imports only the rows above it (`tests/test_layers.py` checks it). A module "
             "ending in `/` is a sub-package (next table).", "",
             "| concept | what it is | imports | modules |", "|---|---|---|---|"]
    for row in concepts():
        modules = ", ".join(f"`{m}`" for m in _top_modules(row["modules"])) or "—"
        imports = ", ".join(row["imports"]) or "—"
        lines.append(f"| `{row['path']}` | {row['what'].replace('|', '/')} | {imports} | {modules} |")
    lines += ["", "## Sub-packages", "", "Inside a concept, a few modules that belong together are a package of "
              "their own.", "", "| sub-package | what it is | modules |", "|---|---|---|"]
    for row in sub_packages():
        modules = ", ".join(f"`{m}`" for m in row["modules"]) or "—"
        lines.append(f"| `{row['path']}` | {row['what'].replace('|', '/')} | {modules} |")
    return "\n".join(lines) + "\n\n" + OUTRO


if __name__ == "__main__":
    print(render(), end="")
