"""`replaybook gate --estimate`: the plan before a gate, read back against the gate it plans."""

from __future__ import annotations

import json

from support.gate import mini_scenario, setup


def _estimate(cli, rule, *extra):
    result = cli("gate", str(rule), "--estimate", "--json", "--trials", "3", "--cache-dir", str(cli.root / ".cache"),
                 *extra)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_an_estimate_replays_nothing_and_bounds_the_gate(cli, root):
    rule = setup(root)
    mini_scenario(root, "other")
    first = _estimate(cli, rule)
    assert not (root / ".cache").exists() or not any((root / ".cache").rglob("*.json"))  # nothing was replayed
    assert first["cached"] == 0 and first["simulated"] is True
    assert 0 < first["replays"] <= first["most"]
    assert first["seconds"] > 0 and first["timing"] == "default"
    gate = cli("gate", str(rule), "--json", "--trials", "3", "--cache-dir", str(root / ".cache"))
    ran = json.loads(gate.out)
    assert ran["decision"] == "admit"
    assert ran["replays"] <= first["most"]  # the gate ran no more than the plan's bound
    second = _estimate(cli, rule)
    assert second["replays"] == 0 and second["most"] == 0  # every trial the gate reads is cached now
    assert second["cached"] == ran["replays"] + ran["cache_hits"]
    assert second["seconds"] == 0 and second["model_calls"] == 0 and second["cost_usd"] == 0


def test_an_estimate_learns_per_replay_figures_from_the_cache(cli, root):
    rule = setup(root)
    cli("gate", str(rule), "--json", "--trials", "3", "--cache-dir", str(root / ".cache"))
    mini_scenario(root, "later")  # a new suite scenario: its trials are not cached
    plan = _estimate(cli, rule)
    assert plan["replays"] >= 3  # at least the new scenario's baseline
    assert plan["timing"] == "past replays"
    assert plan["model_calls"] > 0 and plan["cost_usd"] > 0


def test_the_text_estimate_says_the_model_is_simulated_and_exits_0(cli, root):
    rule = setup(root)
    result = cli("gate", str(rule), "--estimate", "--trials", "3", "--cache-dir", str(root / ".cache"))
    assert result.code == 0, result.err
    assert "replays to run" in result.out and "simulated" in result.out and "wall time" in result.out


def test_the_gate_progress_shows_an_eta(cli, root):
    rule = setup(root)
    result = cli("gate", str(rule), "--trials", "3", "--cache-dir", str(root / ".cache"))
    progress = [line for line in result.err.splitlines() if line.startswith("…")]
    assert progress and all("ETA" in line for line in progress), result.err


def test_the_estimate_of_a_scoped_rule_gives_its_scope_beside_the_same_rule_global(cli, root):
    """Issue 54 item 4, before the gate: a rule scoped to web/** on builtin (Claude Code's read trigger) costs at
    least as much as global until a scenario's baseline is cached (reach reads the whole baseline's footprints, where
    global runs the on-demand test); after one gate, `api` (never opens a web file) costs nothing scoped and its
    full test global."""
    import yaml
    from helpers import write
    from support.gate import own_reads

    rule = setup(root)
    rule.write_text(yaml.safe_dump({**yaml.safe_load(rule.read_text()), "paths": ["web/**"]}))
    own_reads(root)
    api = mini_scenario(root, "api", branch_on="zzz no rule says this", inverse=True)  # passes whatever it is told
    write(api / "repo" / "api" / "server.py", "print('api')\n")
    first = _estimate(cli, rule)["scope"]
    assert first["scoped_replays"] >= first["global_replays"] > 0 and first["counts"] == "replays to run"
    assert "claude delivers it by `read` for web/**" in first["reason"]
    gate = cli("gate", str(rule), "--json", "--trials", "3", "--cache-dir", str(root / ".cache"))
    ran = json.loads(gate.out)
    assert ran["not_replayed_by_reach"][0]["scenario"] == "api", ran["reason"]
    assert ran["scope_cost"]["global_replays"] > ran["scope_cost"]["scoped_replays"]
    after = _estimate(cli, rule)["scope"]
    assert after["scoped_replays"] == 0 < after["global_replays"], after
    text = cli("gate", str(rule), "--estimate", "--trials", "3", "--cache-dir", str(root / ".cache")).out
    assert "if it were global" in text and "replays to run as scoped" in text
