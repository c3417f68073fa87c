"""A verdict never depends on the host: the demo decides the same under three PATHs.

The bundled scenarios declare their toolchain (pytest), so the gate's
decisions are the same with the venv activated, with it not activated, and
with a stock ``/usr/bin:/bin`` PATH that has no pytest (and perhaps no
``python`` at all).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SCRIPT = BIN / "replaybook"


def _paths() -> dict[str, dict[str, str]]:
    host = os.environ.get("PATH", "")
    without_venv = os.pathsep.join(p for p in host.split(os.pathsep) if Path(p) != BIN)
    return {
        "venv activated": {"PATH": f"{BIN}{os.pathsep}{without_venv}", "VIRTUAL_ENV": str(BIN.parent)},
        "venv not activated": {"PATH": without_venv},
        "stock /usr/bin:/bin": {"PATH": "/usr/bin:/bin"},
    }


def _decisions(output: str) -> list[str]:
    """The gate's rows: rule, decision, and the counts without and with it."""
    return [" | ".join(cell.strip() for cell in line.split("|")[1:5])
            for line in output.splitlines() if line.startswith("| rule-") and ("admit" in line or "reject" in line)]


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed `replaybook` script beside the interpreter")
def test_the_demo_decides_the_same_under_every_path(tmp_path):
    cache = tmp_path / "cache"  # one scenario environment for all three runs
    outputs = {}
    for name, env in _paths().items():
        run_env = {k: v for k, v in os.environ.items() if k not in ("PATH", "VIRTUAL_ENV")}
        run_env.update(env, REPLAYBOOK_CACHE_DIR=str(cache))
        workspace = tmp_path / name.replace(" ", "-").replace("/", "")
        done = subprocess.run([str(SCRIPT), "demo", "--workspace", str(workspace)], env=run_env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode in (0, 1), f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, f"{name}:\n{done.stderr[-2000:]}"
        outputs[name] = _decisions(done.stdout)
        assert outputs[name], f"{name}: the demo gated nothing\n{done.stdout[-2000:]}"
    first = next(iter(outputs.values()))
    assert all(rows == first for rows in outputs.values()), outputs
    assert any("admit" in row for row in first)
