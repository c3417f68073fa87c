"""actions/install.sh installs only what actions/requirements.lock pins, by version and sha256."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest
from helpers import REPO

LOCK = REPO / "actions" / "requirements.lock"


def _locked() -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^([a-z0-9-]+)==(\S+) \\\n    --hash=sha256:[0-9a-f]{64}$",
                                                        LOCK.read_text(), re.MULTILINE)}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_dependency_and_the_build_backend_are_pinned_with_a_hash():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    locked = _locked()
    assert LOCK.read_text().count("==") == len(locked)  # every entry has exactly one hash line
    for requirement in [*project["project"]["dependencies"], *project["build-system"]["requires"]]:
        assert _name(requirement) in locked, requirement
    script = (REPO / "actions" / "install.sh").read_text()
    assert "--require-hashes" in script and "--no-deps --no-build-isolation" in script


@pytest.mark.skipif(sys.version_info[:2] != (3, 11) or sys.platform != "linux", reason="the lock is for CPython 3.11")
def test_install_sh_installs_from_the_lock(tmp_path):
    env = {**os.environ, "RUNNER_TEMP": str(tmp_path), "GITHUB_WORKSPACE": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(REPO / "actions" / "install.sh")], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Installed replaybook" in done.stdout
