"""A bug's report goes to a private file of its own, with what is needed to reproduce it."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
from pathlib import Path

import bot

SCRIPT = """
from bot.cli.main import _report_bug
try:
    raise RuntimeError("boom")
except RuntimeError:
    raise SystemExit(_report_bug())
"""


def _crash(tmp: Path) -> tuple[int, Path]:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env={"TMPDIR": str(tmp)})
    (path,) = re.findall(r"The full report is in (\S+);", done.stderr)
    return done.returncode, Path(path)


def test_each_crash_gets_a_private_unique_report_with_version_python_and_platform(tmp_path):
    planted = tmp_path / "replaybook-crash.log"
    planted.symlink_to(tmp_path / "victim")  # a fixed name could be planted by another user
    code, first = _crash(tmp_path)
    _, second = _crash(tmp_path)
    assert code == 3 and first != second and first.parent == tmp_path
    assert not (tmp_path / "victim").exists()
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    text = first.read_text()
    assert f"replaybook {bot.__version__}" in text and "python 3." in text and "platform " in text
    assert "RuntimeError: boom" in text
