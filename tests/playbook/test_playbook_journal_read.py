"""Read-only commands finish a change a crash left half-applied, instead of failing on its half."""

from __future__ import annotations

import json

import pytest
from helpers import rule_yaml, write

from bot.change import JOURNAL


def _crash_mid_retirement(root) -> None:
    """What a crash between the journal's writes leaves: the rule in archive/ and still in rules/."""
    archived = rule_yaml("rule-0001") + "retired: 2026-12-01\nretired_reason: cap\n"
    write(root / "playbook" / "archive" / "rule-0001.yaml", archived)
    record = {"writes": {"playbook/archive/rule-0001.yaml": archived,
                         "playbook/PLAYBOOK.md": (root / "playbook" / "PLAYBOOK.md").read_text()},
              "deletes": ["playbook/rules/rule-0001.yaml"]}
    write(root / JOURNAL, json.dumps(record))


@pytest.mark.parametrize("args", [("playbook", "check"), ("playbook", "list"), ("playbook", "render"),
                                  ("playbook", "hit", "CITES")],
                         ids=["check", "list", "render", "hit"])
def test_a_read_only_command_finishes_a_pending_journal(cli, seeded, args):
    _crash_mid_retirement(seeded)
    write(seeded / "cites.txt", "done [rule-0001]\n")
    result = cli(*[str(seeded / "cites.txt") if a == "CITES" else a for a in args])
    assert "duplicate id" not in result.err, result
    assert result.code in (0, 1), result
    assert not (seeded / JOURNAL).exists()
    assert not (seeded / "playbook" / "rules" / "rule-0001.yaml").exists()
