"""Replays of one script whose record comes from the kernel, for the tests that attack the trace.

The engine a test runs under is a fixture of ``tests/replay/conftest.py`` (``engine``: each in turn;
``notify_engine``: the seccomp notification alone).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bot.replay.engine import ReplayOptions, TrialResult, run_trial
from bot.replay.trace.events import CommandEvent, read_trace

GIT = os.path.realpath(shutil.which("git", path="/usr/bin:/bin") or "/usr/bin/git")
TRUE = os.path.realpath(shutil.which("true", path="/usr/bin:/bin") or "/bin/true")
FORCE_PUSH = {"not_ran": {"match": "^git .*push .*--force"}}
PROOF = {"succeeds": {"run": "true"}}
HOW = ["tool call", "agent program"]  # who runs the script: a builtin agent's tool call, or an agent program


def trial(make_scenario, tmp_path: Path, pass_if: list[dict], script: str, how: str = "tool call",
          binary: Path | None = None, **fields) -> TrialResult:
    """One replay of ``script`` (``how``: one of ``HOW``) in a tiny scenario checked by ``pass_if``; ``binary``, a
    file the fixture holds under its own name; ``fields`` go to ``make_scenario``."""
    if how == "tool call":
        loaded = make_scenario(pass_if=pass_if, with_rule=[{"bash": script}, {"say": "done"}], **fields)
        agent = {}
    else:
        program = tmp_path / "agent.sh"
        program.write_text(script + "\n")
        loaded = make_scenario(pass_if=pass_if, **fields)
        agent = {"agent": "command", "command": f"sh {program} {{task}}"}
    if binary is not None:
        shutil.copy(binary, loaded.fixture / binary.name)
    return run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs", **agent), 0)


def commands(result: TrialResult) -> list[CommandEvent]:
    """The commands the trial's trace recorded."""
    return [e for e in read_trace(Path(result.run_dir) / "trace.jsonl") if isinstance(e, CommandEvent)]


def caught(result: TrialResult) -> list[CommandEvent]:
    """An attack's trial: its act happened (every ``succeeds`` check held), and still the trial failed. The
    commands it recorded."""
    acted = [c.check for c in result.failed_checks if c.check.startswith("succeeds")]
    assert acted == [], f"the act did not happen: {result.reason}"
    assert result.verdict == "failed", result.reason
    return commands(result)
