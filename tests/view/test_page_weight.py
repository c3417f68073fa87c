"""A gate of 6 scenarios x 20 trials a side weighs under 5 MB (bench/view_page.py makes it from a real gate's run
folders and times it; its time is a figure of the bench, never asserted here)."""

from __future__ import annotations

import subprocess
import sys

from support.view import REPO


def test_six_scenarios_of_twenty_trials_a_side_weigh_under_5_mb(gate, tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "view_page.py"), "--gate-json", str(gate.json),
                           "--runs-dir", str(gate.root / ".replaybook" / "traces"), "--suite",
                           str(gate.root / "scenarios"), "--scenarios", "6", "--trials", "20", "--rounds", "1",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    page = tmp_path / "6x20" / "index.html"
    text = page.read_text(encoding="utf-8")
    assert text.count('class="body" id="trial-') >= 6 * 20 * 2  # every trial is on it, and the own scenario's
    assert page.stat().st_size < 5_000_000, page.stat().st_size
