"""Fixtures of the gate page's tests: a real gate (the simulated model on two bundled scenarios, with hostile
text and a secret planted in the agent's words), headless Chromium, and where screenshots are kept."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.view import ARTIFACTS, REPO, SECRET_VAR, plant, require_chromium


@dataclass
class Gate:
    root: Path
    json: Path
    report: Path
    page_dir: Path
    code: int


@pytest.fixture(scope="session")
def gate(tmp_path_factory) -> Gate:
    """`replaybook gate` run for real (subprocess, simulated model) on monorepo-test-cwd's rule, with
    targeted-tests as the rest of the suite; its JSON, its markdown linked to the page's future URL."""
    root = tmp_path_factory.mktemp("view-gate")
    for sid in ("monorepo-test-cwd", "targeted-tests"):
        shutil.copytree(REPO / "scenarios" / sid, root / "scenarios" / sid)
        plant(root / "scenarios" / sid / "policy.yaml")
    shutil.copytree(REPO / "scenarios" / "monorepo-test-cwd" / "incidents", root / "incidents")
    rule = root / "playbook" / "proposed" / "rule-0001.yaml"
    rule.parent.mkdir(parents=True)
    shutil.copy(REPO / "scenarios" / "monorepo-test-cwd" / "rule.yaml", rule)
    (root / "playbook" / "rules").mkdir()
    page_dir = root / "page"
    env = {k: v for k, v in os.environ.items() if k != SECRET_VAR and "TOKEN" not in k and "KEY" not in k}
    env.update(HOME=str(tmp_path_factory.mktemp("view-home")),
               REPLAYBOOK_CACHE_DIR=str(tmp_path_factory.getbasetemp() / "replaybook-cache"))
    out = root / "gate.json"
    with out.open("w") as f:
        done = subprocess.run([sys.executable, "-m", "bot", "--root", str(root), "gate", str(rule), "--json",
                               "--trials", "2", "--report", str(root / "report.md"),
                               "--page-url", (page_dir / "index.html").as_uri()],
                              stdout=f, stderr=subprocess.PIPE, text=True, env=env, cwd=root, timeout=900)
    assert done.returncode in (0, 1), done.stderr
    return Gate(root, out, root / "report.md", page_dir, done.returncode)


@pytest.fixture(scope="session")
def chromium() -> str:
    return require_chromium()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where the screenshots are kept (tests/.artifacts/, gitignored), printed so a reviewer finds them."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the gate page: {ARTIFACTS}")
    return ARTIFACTS
