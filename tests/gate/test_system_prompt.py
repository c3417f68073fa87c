"""`replay --rule` and the gate give the replayed agent one system prompt (bot/playbook/render/system_prompt.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from support.gate import book, gate, setup

from bot.playbook import rule as rules_mod
from bot.playbook.render.system_prompt import baseline_prompt, system_prompt


def _prompt_hashes(runs: Path) -> set[str]:
    """The playbook_sha256 of every trial recorded under ``runs``."""
    hashes = set()
    for trace in runs.rglob("trace.jsonl"):
        start = json.loads(trace.read_text(encoding="utf-8").splitlines()[0])
        hashes.add(start["meta"]["playbook_sha256"])
    return hashes


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_replay_rule_and_the_gate_give_the_agent_the_same_prompt_for_the_same_rule(root, cli):
    path = setup(root)
    candidate = rules_mod.load(path, named_by_id=False)
    with_rule, without = system_prompt(book(root), candidate), baseline_prompt(book(root), candidate)
    assert f"- [{candidate.id}] {candidate.rule}" in with_rule and candidate.rule not in without

    result = gate(root, path, runs_dir=root / "gate-runs")
    assert result.decision == "admit", result.reason
    assert _prompt_hashes(root / "gate-runs") == {_sha(without), _sha(with_rule)}

    done = cli("replay", str(root / "scenarios" / "own"), "--rule", str(path), "--runs-dir", str(root / "replay-runs"))
    assert done.code == 0, done.out + done.err
    assert _prompt_hashes(root / "replay-runs") == {_sha(with_rule)}
