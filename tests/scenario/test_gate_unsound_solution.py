"""The gate refuses a rule whose scenario its own reference solution cannot pass, before any replay of an agent
(simulated model; real sandboxed replays of the control and the solution)."""

from __future__ import annotations

import yaml
from helpers import write
from support.gate import gate, setup


def test_the_gate_refuses_a_scenario_its_solution_cannot_pass_before_the_first_replay(root):
    path = setup(root)
    folder = root / "scenarios" / "own"
    data = yaml.safe_load((folder / "scenario.yaml").read_text())
    data["pass_if"] = [*data["pass_if"], {"fails": {"run": "test -f right.txt"}}]  # contradicts the succeeds check
    data["solution"] = ["echo ok > right.txt"]
    write(folder / "scenario.yaml", yaml.safe_dump(data))
    result = gate(root, path)
    assert result.decision == "reject" and result.reason.startswith("unsound scenario `own`: ")
    assert "check `fails test -f right.txt` fails even with the reference solution" in result.reason
    assert result.before is None and result.after is None  # no replay of the agent was spent on it


def test_the_gate_goes_on_when_the_solution_passes(root):
    path = setup(root)
    folder = root / "scenarios" / "own"
    data = yaml.safe_load((folder / "scenario.yaml").read_text())
    data["solution"] = ["echo ok > right.txt"]
    write(folder / "scenario.yaml", yaml.safe_dump(data))
    result = gate(root, path)
    assert result.decision == "admit", result.reason
