"""Once its toolchains are built, Replaybook replays with no network at all.

The first run of the real ``replaybook demo`` builds the bundled scenarios'
environment (pytest) into a cache. The second run, with a fresh workspace
(so no replay comes from the replay cache) and the same toolchain cache,
runs in a network namespace of its own that has only a loopback interface:
nothing off the machine can be reached, and a build, a download or a version
check would fail. So do the bundled scenarios replayed one by one with
their rule.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SCRIPT = BIN / "replaybook"


def _no_network_prefix() -> list[str] | None:
    """A command prefix that runs its command with loopback only (``unshare -rn``), or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return None
    probe = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]


OFFLINE = _no_network_prefix()
pytestmark = [pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed `replaybook` script"),
              pytest.mark.skipif(OFFLINE is None, reason="needs `unshare -rn` (a network namespace) and `ip`")]


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env["REPLAYBOOK_CACHE_DIR"] = str(cache)
    return env


def _demo(argv_prefix: list[str], workspace: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*argv_prefix, str(SCRIPT), "demo", "--workspace", str(workspace)], env=_env(cache),
                          cwd=workspace.parent, capture_output=True, text=True, timeout=900)


def _rows(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("| rule-")]


def test_the_demo_and_every_bundled_scenario_replay_with_no_network_once_built(tmp_path):
    cache = tmp_path / "cache"
    warm = _demo([], tmp_path / "online", cache)  # builds the toolchain (this one may use the network)
    assert warm.returncode == 0, warm.stderr[-2000:]

    offline = _demo(OFFLINE, tmp_path / "offline", cache)
    assert offline.returncode == 0, offline.stderr[-3000:]
    assert "Traceback" not in offline.stderr
    assert "(offline, SIMULATED model)" in offline.stdout
    assert _rows(offline.stdout) and _rows(offline.stdout) == _rows(warm.stdout)

    names = sorted(p.parent.name for p in (Path(__file__).parents[2] / "scenarios").glob("*/scenario.yaml"))
    assert len(names) >= 4
    for name in names:
        done = subprocess.run([*OFFLINE, str(SCRIPT), "replay", f"bundled:{name}", "--rule", f"bundled:{name}",
                               "--json", "--runs-dir", str(tmp_path / "runs")], env=_env(cache), cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}"
        report = json.loads(done.stdout)
        assert report["simulated"] is True
        assert [(t["verdict"], t["simulated"], t["sandbox"]) for t in report["trials"]] == [("passed", True, "bwrap")]
