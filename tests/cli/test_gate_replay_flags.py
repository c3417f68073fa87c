"""`gate --budget N` and `--max-turns N`, `replay --budget SECONDS` (issue 55): the flags reach the gate and the
replay as the config would (the SIMULATED model; the local model's gate is tests/gate/test_gate_on_local_model.py)."""

from __future__ import annotations

import json

import yaml

from support.gate import mini_scenario, setup


def test_gate_budget_flag_ends_the_gate_inconclusive_within_it(cli, root):
    path = setup(root)
    for i in range(3):
        mini_scenario(root, f"other{i}", branch_on="zzz no rule says this", inverse=True)
    cli("playbook", "render")
    result = cli("gate", str(path), "--json", "--trials", "3", "--budget", "4")
    data = json.loads(result.out)
    assert result.code == 1 and data["decision"] == "inconclusive", data["reason"]
    assert data["fresh_replays"] <= 4 and "4 replays" in data["reason"]


def test_gate_max_turns_flag_caps_every_replay(cli, root):
    path = setup(root)
    policy = root / "scenarios" / "own" / "policy.yaml"
    steps = yaml.safe_load(policy.read_text())
    steps["with_rule"] = [{"bash": "ls"}, *steps["with_rule"]]  # the fix now takes a second turn
    policy.write_text(yaml.safe_dump(steps))
    cli("playbook", "render")
    result = cli("gate", str(path), "--json", "--max-turns", "1")
    data = json.loads(result.out)
    # one turn is not enough for the scripted fix: the rule cannot win its own scenario
    assert data["decision"] != "admit", data["reason"]
    unbounded = json.loads(cli("gate", str(path), "--json", "--no-cache").out)
    assert unbounded["decision"] == "admit", unbounded["reason"]


def test_replay_budget_flag_ends_a_trial_at_that_many_seconds(cli, root):
    from support.gate import hanging_scenario

    hanging_scenario(root)  # its agent sleeps 60 s
    result = cli("replay", "run", "own", "--budget", "2", "--json")
    [trial] = json.loads(result.out)["trials"]
    assert trial["verdict"] == "unscored" and "timeout" in (trial["reason"] + trial.get("agent_status", "")), trial
