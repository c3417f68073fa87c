"""Shared fixtures: a scratch repository root and a way to run the real CLI."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO, incident_yaml, make_scenario, rule_yaml, write  # noqa: F401
from support.fixtures import event, examples, gh, model  # noqa: F401  (shared fixtures, registered once)
from support.local_model import local_model, local_server  # noqa: F401  (the real local model, session-wide)

from bot.cli.main import run


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
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "REPLAYBOOK_UPSTREAM_URL", "GITHUB_TOKEN", "GH_TOKEN",
                 "REPLAYBOOK_CONFIG"):
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


@pytest.fixture
def seeded(root) -> Path:
    """A root with two incidents, one scenario and one admitted rule, rendered."""
    write(root / "incidents" / "2026-07-14-0932.yaml", incident_yaml("2026-07-14-0932"))
    write(root / "incidents" / "2026-07-21-1105.yaml", incident_yaml("2026-07-21-1105", created="2026-07-21T11:05:00Z"))
    make_scenario(root)
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    from bot.playbook.store import Playbook

    Playbook(root / "playbook", root=root).render()
    return root
