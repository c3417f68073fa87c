"""Ctrl-C stops a single `replaybook replay`: a real subprocess, a real SIGINT, at once (the trial is killed),
a partial report, exit 130, no sandbox process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from support.gate import SCRIPT, hanging_scenario, sleepers, wait_for_sleepers


def test_sigint_stops_a_running_replay_at_once(tmp_path):
    root = tmp_path / "repo"
    hanging_scenario(root)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([str(SCRIPT), "--root", str(root), "replay", "own", "--trials", "3", "--jobs", "2"],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    readers = [threading.Thread(target=lambda s=s, d=d: d.extend(iter(s.readline, "")), daemon=True)
               for s, d in ((proc.stdout, out), (proc.stderr, err))]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any("# Replay" in line for line in out):  # the trials are under way
            assert proc.poll() is None, (out, err)
            assert time.monotonic() < deadline, ("the replay did not start", out, err)
            time.sleep(0.1)
        wait_for_sleepers()  # the agent is in its `sleep 60`, inside the sandbox
        assert proc.poll() is None, (out, err)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=50)
        took = time.monotonic() - sent
        for reader in readers:
            reader.join(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
    text_out, text_err = "".join(out), "".join(err)
    assert proc.returncode == 130, (text_out, text_err)
    # Killed, not waited for: the agent sleeps 60 s. (Well under 2 s on an idle machine; a bound that tight
    # fails on a loaded one, and speed is not what this proves.)
    assert took < 50, f"took {took:.1f} s: the replay waited for the trial instead of killing it"
    assert "Traceback" not in text_err and "interrupted" in text_err
    assert "0 of 3 trial(s) finished" in text_err
    assert "# Replay `own`" in text_out  # the report so far
    time.sleep(0.5)
    assert not sleepers(), "a sandbox process outlived the replay"
