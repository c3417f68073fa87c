"""`playbook check` warns before a host limit and fails past it: every limit at, near and past its value."""

from __future__ import annotations

import pytest
from helpers import write

from bot.playbook.render import limits

CASES = [(limit, unit, cap) for limit in limits.LIMITS
         for unit, cap in (("chars", limit.chars), ("bytes", limit.bytes), ("lines", limit.lines)) if cap]


def _file(limit) -> str:
    return limit.files[0].replace("*", "x")


def _content(unit: str, n: int) -> bytes:
    return (b"a\n" * n) if unit == "lines" else b"a" * n


@pytest.mark.parametrize("limit,unit,cap", CASES, ids=[f"{c[0].host}-{c[1]}" for c in CASES])
def test_each_limit_warns_near_it_holds_at_it_and_fails_past_it(limit, unit, cap):
    rel = _file(limit)
    if unit == "lines":
        at, near, past = _content(unit, cap), _content(unit, int(cap * 0.95)), _content(unit, cap + 1)
    else:
        at, near, past = _content(unit, cap), _content(unit, int(cap * 0.95)), _content(unit, cap + 1)
    assert not limits.over(rel, near) and not limits.over(rel, at)
    for data in (near, at):
        warned = [w for w in limits.near(rel, data) if limit.source in w]
        assert warned and rel in warned[0] and f"{cap:,}" in warned[0], limits.near(rel, data)
    failed = [p for p in limits.over(rel, past) if limit.source in p]
    assert failed and rel in failed[0] and f"{cap:,}" in failed[0]
    assert not limits.near(rel, _content(unit, int(cap * 0.5)))


def test_the_codex_chain_warns_near_its_budget_and_fails_past_it(tmp_path):
    write(tmp_path / "AGENTS.md", "x" * int(limits.CODEX_MAX_BYTES * 0.5))
    write(tmp_path / "pkg" / "AGENTS.md", "y" * int(limits.CODEX_MAX_BYTES * 0.45))
    assert not limits.agents_chains(tmp_path, {})
    warned = limits.agents_chains_near(tmp_path, {})
    assert warned and "pkg/AGENTS.md" in warned[0] and f"{limits.CODEX_MAX_BYTES:,}" in warned[0]
    assert limits.CODEX_SOURCE in warned[0]
    write(tmp_path / "pkg" / "AGENTS.md", "y" * int(limits.CODEX_MAX_BYTES * 0.6))
    assert limits.agents_chains(tmp_path, {}) and not limits.agents_chains_near(tmp_path, {})


def test_playbook_check_prints_the_warning_and_still_passes(cli, seeded):
    assert cli("playbook", "render", "--target", "agents").code == 0
    write(seeded / "pkg" / "AGENTS.md", "y" * int(limits.CODEX_MAX_BYTES * 0.93))
    result = cli("playbook", "check", "--target", "agents")
    assert result.code == 0, result.err
    assert "warning:" in result.err and "pkg/AGENTS.md" in result.err and "project_doc_max_bytes" in result.err
    write(seeded / "pkg" / "AGENTS.md", "y" * (limits.CODEX_MAX_BYTES + 1))
    assert cli("playbook", "check", "--target", "agents").code == 1


def test_an_agents_override_takes_the_place_of_the_rendered_agents_md(tmp_path):
    write(tmp_path / "AGENTS.md", "x" * int(limits.CODEX_MAX_BYTES * 0.5))
    write(tmp_path / "pkg" / "AGENTS.md", "y" * 100)
    write(tmp_path / "pkg" / "AGENTS.override.md", "z" * int(limits.CODEX_MAX_BYTES * 0.6))
    over = limits.agents_chains(tmp_path, {})  # Codex reads the override, not pkg/AGENTS.md: past the budget
    assert over and "pkg/AGENTS.override.md" in over[0] and "AGENTS.md + pkg/AGENTS.override.md" in over[0]
    warned = limits.agents_overridden(tmp_path, {"pkg/AGENTS.md": b"# Playbook\n"})
    assert warned and warned[0].startswith("pkg/AGENTS.md: Codex reads pkg/AGENTS.override.md")
    assert not limits.agents_overridden(tmp_path, {"AGENTS.md": b"# Playbook\n"})


def test_playbook_check_warns_when_an_override_hides_the_rendered_agents_md(cli, seeded):
    assert cli("playbook", "render", "--target", "agents").code == 0
    write(seeded / "AGENTS.override.md", "Local notes.\n")
    result = cli("playbook", "check", "--target", "agents")
    assert result.code == 0 and "AGENTS.md: Codex reads AGENTS.override.md in that folder instead" in result.err
