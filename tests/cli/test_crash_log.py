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
    # pre-commit's layout: two markdown sections, each fact on a line of its own, ready for an issue
    version, error = text.split("### error information")
    assert version.startswith("### version information\n\n```\n")
    assert f"replaybook version: {bot.__version__}\nsys.version:\n    3." in version
    for line in (f"sys.executable: {sys.executable}", "os.name: posix", f"sys.platform: {sys.platform}", "platform: "):
        assert f"\n{line}" in version
    assert "```\nRuntimeError: boom\n```" in error
    assert "Traceback (most recent call last):" in error and error.rstrip().endswith("RuntimeError: boom\n```")
