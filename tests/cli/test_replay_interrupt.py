"""Ctrl-C stops a single `replaybook replay`: a real subprocess, a real SIGINT, at once (the trial is killed),
a partial report, exit 130, no sandbox process left behind."""

from __future__ import annotations

import os
import time

import pytest
import yaml
from helpers import write
from support.gate import Running, hanging_scenario, sleepers, wait_for_sleepers


def test_sigint_stops_a_running_replay_at_once(tmp_path):
    root = tmp_path / "repo"
    hanging_scenario(root)
    with Running(root, "replay", "own", "--trials", "3", "--jobs", "2") as replay:
        replay.wait_for("# Replay")  # the trials are under way
        wait_for_sleepers()  # the agent is in its `sleep 60`, inside the sandbox
        took = replay.interrupt(within_s=50)
    text_out, text_err = replay.text()
    assert replay.code == 130, (text_out, text_err)
    # Killed, not waited for: the agent sleeps 60 s. (Well under 2 s on an idle machine; a bound that tight
    # fails on a loaded one, and speed is not what this proves.)
    assert took < 50, f"took {took:.1f} s: the replay waited for the trial instead of killing it"
    assert "Traceback" not in text_err and "interrupted" in text_err
    assert "0 of 3 trial(s) finished" in text_err
    assert "# Replay `own`" in text_out  # the report so far
    time.sleep(0.5)
    assert not sleepers(), "a sandbox process outlived the replay"


def _descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    """Still running: a zombie (killed, its parent gone before it was reaped) holds no memory and runs nothing."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _engines(pid: int) -> set[int]:
    out = set()
    for child in _descendants(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                if b"engine.mjs" in cmdline.read():
                    out.add(child)
        except OSError:
            continue
    return out


@pytest.mark.local_model
def test_sigint_stops_a_replay_waiting_on_the_local_models_answer(local_model, tmp_path):
    """The trial is inside a model call (the REAL local model writing a long answer), not a sandboxed command:
    Ctrl-C ends the engine, the call fails at once, and the replay exits 130 with its partial report."""
    root = tmp_path / "repo"
    folder = root / "scenarios" / "long"
    write(folder / "repo" / "README.md", "fixture\n")
    write(folder / "scenario.yaml", yaml.safe_dump({
        "id": "long", "repo": "repo", "pass_if": [{"succeeds": {"run": "test -f numbers.txt"}}],
        "task": "Use the write tool to create numbers.txt holding every number from 1 to 2000, one a line.",
        "budget": {"max_turns": 3, "timeout_s": 900}}))
    with Running(root, "replay", "run", "long", "--model", "local",
                 env={"XDG_CACHE_HOME": str(local_model.gguf.parents[3])}) as replay:
        replay.wait_for("# Replay", within_s=300)  # the model is loaded; the trial is starting
        engines = _engines(replay.proc.pid)
        assert engines, "the local model's engine runs under the replay"
        time.sleep(5)  # into the first answer (2,000 lines: far longer than this)
        took = replay.interrupt(within_s=120)
    err = replay.text()[1]
    assert replay.code == 130, err
    # Not a timing test: the answer alone would run for minutes; a bound this loose only says it was not awaited.
    assert took < 60, f"took {took:.1f} s: the replay waited for the model's answer"
    assert "Traceback" not in err and "interrupted" in err
    time.sleep(0.5)
    assert not {pid for pid in engines if _alive(pid)}, "the engine outlived the replay"
