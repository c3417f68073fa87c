"""Plain helpers the tests import (fixtures live in conftest.py)."""

from __future__ import annotations

import base64
import hashlib
import os
import textwrap
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

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
    write(folder / "policy.yaml", 'branch_on: "package-local test config"\n'
                                  'with_rule: [{bash: "cd packages/api && python -m pytest -q"}]\n'
                                  'without_rule: [{bash: "python -m pytest -q"}]\n')
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


def processes_with(text: str, within: float = 2.0) -> list[int]:
    """Live host pids whose command line holds ``text``, after giving the killed a moment to go."""
    end = time.monotonic() + within
    while True:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if text in cmd and state != "Z":
                pids.append(int(entry))
        if not pids or time.monotonic() > end:
            return pids
        time.sleep(0.05)


def hand_made_wheel(folder: Path, name: str = "rbprobe", version: str = "1.0") -> Path:
    """A pure-Python wheel (``import NAME; NAME.VALUE == 42``) in ``folder``, and a PEP 503 ``simple/`` index of it."""
    files = {f"{name}/__init__.py": "VALUE = 42\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join([*record, f"{name}-{version}.dist-info/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as out:
        for path, text in files.items():
            out.writestr(path, text)
    (folder / "simple" / name).mkdir(parents=True)
    (folder / "simple" / name / "index.html").write_text(f'<a href="/{wheel.name}">{wheel.name}</a>\n')
    return wheel
