"""Shared fixtures: a scratch repository root and a way to run the real CLI."""

from __future__ import annotations

import hashlib
import io
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli.main import run

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption("--live", action="store_true", help="run tests that talk to real external services")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--live"):
        return
    skip = pytest.mark.skip(reason="live test: pass --live to run")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path_factory):
    """Keep tests off the user's home, config and network credentials."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    # One shim cache for the session: building shims costs ~0.5 s, reusing them ~1 ms.
    monkeypatch.setenv("REPLAYBOOK_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "replaybook-cache"))
    for name in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "REPLAYBOOK_CONFIG"):
        monkeypatch.delenv(name, raising=False)


@dataclass
class Result:
    code: int
    out: str
    err: str


class CLI:
    """Runs ``replaybook`` in-process through the real error boundary."""

    def __init__(self, root: Path, capsys, monkeypatch):
        self.root = root
        self.capsys = capsys
        self.monkeypatch = monkeypatch

    def __call__(self, *args: str, stdin: str | bytes | None = None) -> Result:
        self.capsys.readouterr()
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        fake = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        self.monkeypatch.setattr(sys, "stdin", fake)
        code = run(["--root", str(self.root), *args])
        captured = self.capsys.readouterr()
        assert "Traceback" not in captured.err, captured.err
        return Result(code, captured.out, captured.err)


@pytest.fixture
def root(tmp_path) -> Path:
    """An empty repository root."""
    r = tmp_path / "repo"
    r.mkdir()
    return r


@pytest.fixture
def cli(root, capsys, monkeypatch) -> CLI:
    return CLI(root, capsys, monkeypatch)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def incident_yaml(incident_id: str, **over) -> str:
    fields = {
        "id": incident_id,
        "task": '"Add rate limiting to /v1/upload"',
        "task_type": "api",
        "failure_class": "wrong_assumption",
        "trigger": '"CI failed: 14 import errors after agent moved tests"',
        "believed": '"Tests are run from repo root with `pytest`"',
        "actual": '"Each package has its own pytest.ini; must cd into packages/api first"',
        "cost_minutes": "22",
        "resolved_by": "unresolved",
        "created": "2026-07-14T09:32:00Z",
    }
    fields.update({k: v for k, v in over.items()})
    return "".join(f"{k}: {v}\n" for k, v in fields.items() if v is not None)


def make_scenario(root: Path, scenario_id: str = "monorepo-test-cwd") -> Path:
    folder = root / "scenarios" / scenario_id
    write(folder / "repo" / "README.md", "fixture\n")
    write(
        folder / "scenario.yaml",
        f"""
        id: {scenario_id}
        task: "Fix the failing test in packages/api/tests/test_limits.py"
        repo: repo
        task_type: testing
        pass_if:
          - ran: {{command: pytest, cwd: packages/api}}
          - not_ran: {{command: pytest, cwd: .}}
          - succeeds: {{run: python -m pytest -q, cwd: packages/api}}
        budget: {{max_turns: 30, timeout_s: 600, max_cost_usd: 0.50}}
        """,
    )
    return folder


def rule_yaml(rule_id: str, *, cites=("2026-07-14-0932", "2026-07-21-1105"), scenario="monorepo-test-cwd",
              task_types="[]", created="2026-08-03", last_hit=None, text=None) -> str:
    body = text or "Before running any test command, check for a package-local test config and run from that directory."
    lines = [
        f"id: {rule_id}",
        f"rule: {body}",
        f"cites: [{', '.join(cites)}]",
        f"task_types: {task_types}",
        f"replay: scenarios/{scenario}",
        f"created: {created}",
    ]
    if last_hit:
        lines.append(f"last_hit: {last_hit}")
    return "\n".join(lines) + "\n"


def snapshot(folder: Path) -> dict[str, str]:
    """Content hash of every file under ``folder``: proves nothing changed."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != "playbook.lock":  # an empty lock file holds no data
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def seeded(root) -> Path:
    """A root with two incidents, one scenario and one admitted rule, rendered."""
    write(root / "incidents" / "2026-07-14-0932.yaml", incident_yaml("2026-07-14-0932"))
    write(root / "incidents" / "2026-07-21-1105.yaml", incident_yaml("2026-07-21-1105", created="2026-07-21T11:05:00Z"))
    make_scenario(root)
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    from bot.playbook import Playbook

    Playbook(root / "playbook", root=root).render()
    return root
