"""Ctrl-C stops a gate: a real `replaybook gate` subprocess, a real SIGINT, within 2 s, exit 130,
no sandbox process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from helpers import incident_yaml, write
from support.gate import (
    SCRIPT,
    candidate,
    hanging_scenario,
    sleepers,
    wait_for_sleepers,
)


def test_sigint_stops_a_running_gate_within_two_seconds(tmp_path):
    root = tmp_path / "repo"
    write(root / "incidents" / "inc-a.yaml", incident_yaml("inc-a"))
    write(root / "incidents" / "inc-b.yaml", incident_yaml("inc-b", created="2026-07-15T00:00:00Z"))
    hanging_scenario(root)
    rule = candidate(root)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([str(SCRIPT), "--root", str(root), "gate", str(rule), "--trials", "3", "--jobs", "2",
                             "--cache-dir", str(tmp_path / "cache")],
                            cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any("without the rule" in line for line in lines):  # the trials are under way
            assert proc.poll() is None, lines
            assert time.monotonic() < deadline, ("the gate did not reach its trials", lines)
            time.sleep(0.1)
        wait_for_sleepers()  # the agent is in its `sleep 60`, inside the sandbox
        assert proc.poll() is None, lines
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        took = time.monotonic() - sent
        reader.join(timeout=5)
        err = "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert took < 2.0, f"took {took:.1f} s"
    assert "Traceback" not in err and "interrupted" in err and "in the cache" in err
    time.sleep(0.5)
    assert not sleepers(), "a sandbox process outlived the gate"


def _ps() -> str:
    return subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout[-3000:]
