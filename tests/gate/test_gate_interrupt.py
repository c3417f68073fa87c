"""Ctrl-C stops a gate: a real `replaybook gate` subprocess, a real SIGINT, at once (the trials are killed), exit 130,
no sandbox process left behind."""

from __future__ import annotations

import subprocess
import time

import pytest
from helpers import incident_yaml, write
from support.gate import Running, candidate, hanging_scenario, sleepers, wait_for_sleepers


@pytest.mark.parametrize("cache", ["--cache-dir", "--no-cache"])
def test_sigint_stops_a_running_gate_at_once(tmp_path, cache):
    root = tmp_path / "repo"
    write(root / "incidents" / "inc-a.yaml", incident_yaml("inc-a"))
    write(root / "incidents" / "inc-b.yaml", incident_yaml("inc-b", created="2026-07-15T00:00:00Z"))
    hanging_scenario(root)
    rule = candidate(root)
    caching = [cache, str(tmp_path / "cache")] if cache == "--cache-dir" else [cache]
    with Running(root, "gate", str(rule), "--trials", "3", "--jobs", "2", *caching) as gate:
        gate.wait_for("without the rule", on="err")  # the trials are under way
        wait_for_sleepers()  # the agent is in its `sleep 60`, inside the sandbox
        took = gate.interrupt(within_s=50)
    err = gate.text()[1]
    assert gate.code == 130, err
    # Killed, not waited for: the agent sleeps 60 s. (It takes well under 2 s on an idle machine; a bound that
    # tight fails on a loaded one, and speed is not what this proves.)
    assert took < 50, f"took {took:.1f} s: the gate waited for the trials instead of killing them"
    assert "Traceback" not in err and "interrupted" in err
    if cache == "--no-cache":  # nothing was cached: the message must not say it was
        assert "in the cache" not in err and "no trial was kept" in err, err
    else:
        assert "Every finished trial is in the cache" in err, err
    time.sleep(0.5)
    assert not sleepers(), "a sandbox process outlived the gate"


def _ps() -> str:
    return subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout[-3000:]
