"""`playbook render` for every host: markers, byte-exact surroundings, path scoping, limits, hostile input."""

from __future__ import annotations

import json

import pytest
from helpers import rule_yaml, snapshot, write
from support.render import ALL, configure, front_matter

from bot.playbook.render import HOSTS
from bot.playbook.render.sync import GENERATED

MAINS = {name: HOSTS[name].main for name in ALL}


def add_rule(root, rule_id, extra="", **kw):
    write(root / "playbook" / "rules" / f"{rule_id}.yaml", rule_yaml(rule_id, **kw) + extra)


def test_every_target_renders_and_keeps_every_byte_outside_the_markers(cli, seeded):
    configure(seeded, ALL)
    outside = {  # CRLF, no trailing newline, non-ASCII and stray whitespace: all must survive byte for byte
        "CLAUDE.md": (b"# Project\r\n\r\nUse\ttabs  \r\n", b"\r\n## Footer \xe2\x9c\x93\r\n"),
        "AGENTS.md": (b"# Agents\n\nno trailing newline", b""),
        "GEMINI.md": (b"", b"\n\ntrailer without newline"),
    }
    from bot.playbook.store import SECTION_END

    for rel, (before, after) in outside.items():
        write(seeded / rel, "")
        (seeded / rel).write_bytes(before + (b"" if not after else b"<!-- replaybook:playbook:start -->old" + SECTION_END.encode() + after))
    result = cli("playbook", "render")
    assert result.code == 0, result.err
    for name, rel in MAINS.items():
        data = (seeded / rel).read_bytes()
        assert b"[rule-0001] Before running any test command" in data, name
        assert data.count(b"replaybook:playbook:start") == 1 and data.count(b"replaybook:playbook:end") == 1
    for rel, (before, after) in outside.items():
        data = (seeded / rel).read_bytes()
        start, end = data.index(b"<!-- replaybook:playbook:start"), data.index(SECTION_END.encode()) + len(SECTION_END)
        assert data[:start].startswith(before) and data[end:].endswith(after), rel
        if not after:  # appended: the original bytes are an exact prefix, nothing before them moved
            assert data.startswith(before)
    claude = (seeded / "CLAUDE.md").read_bytes()
    assert b"\n" not in claude.replace(b"\r\n", b"")  # the section follows the file's CRLF
    assert front_matter((seeded / MAINS["cursor"]).read_bytes()) == {
        "description": "Replaybook playbook (rules proven by replay)", "globs": None, "alwaysApply": True}
    assert front_matter((seeded / MAINS["windsurf"]).read_bytes()) == {"trigger": "always_on"}
    # A second render changes nothing, and check agrees it is in sync.
    before = snapshot(seeded)
    assert "updated" not in cli("playbook", "render").out
    assert snapshot(seeded) == before
    assert cli("playbook", "check").code == 0
    # A user's edits outside the markers survive a re-render after the rules change.
    (seeded / "AGENTS.md").write_bytes((seeded / "AGENTS.md").read_bytes() + b"\r\nuser line")
    add_rule(seeded, "rule-0002", text="When adding a dependency, pin its exact version in pyproject.toml.")
    stale = cli("playbook", "check")
    assert stale.code == 1 and "AGENTS.md: is out of sync" in stale.err and "render target `agents`" in stale.err
    assert cli("playbook", "render").code == 0
    assert (seeded / "AGENTS.md").read_bytes().endswith(b"\r\nuser line")
    assert b"[rule-0002]" in (seeded / "AGENTS.md").read_bytes()


def test_path_scoped_rule_is_rendered_scoped_where_the_host_scopes(cli, seeded):
    configure(seeded, ALL)
    add_rule(seeded, "rule-0002", text="When editing migrations, never rename a column in place.",
             extra="paths: ['db/migrations/**', '**/*.sql']\n")
    assert cli("playbook", "render").code == 0, cli("playbook", "render").err
    claude_rule = (seeded / ".claude/rules/replaybook-rule-0002.md").read_bytes()
    assert front_matter(claude_rule) == {"paths": ["db/migrations/**", "**/*.sql"]}
    windsurf = (seeded / ".windsurf/rules/replaybook-rule-0002.md").read_text()
    assert windsurf.startswith("---\ntrigger: glob\nglobs: db/migrations/**,**/*.sql\n---\n")
    for text in (claude_rule.decode(), windsurf):
        assert "[rule-0002] When editing migrations" in text and GENERATED in text
    # Scoped hosts keep it out of the always-loaded file; the others say its scope in words: Copilot and Cursor,
    # whose scoped forms are not dependable for agents (bot.replay.host_scope), and Codex and Gemini, for a glob
    # (`**/*.sql`) that names no folder.
    for name in ("claude", "windsurf"):
        assert b"rule-0002" not in (seeded / MAINS[name]).read_bytes(), name
    assert not (seeded / ".github/instructions/replaybook-rule-0002.instructions.md").exists()
    assert not (seeded / ".cursor/rules/replaybook-rule-0002.mdc").exists()
    for name in ("agents", "gemini", "copilot", "cursor"):
        assert "[rule-0002] When editing migrations, never rename a column in place. _(for files matching " \
               "`db/migrations/**`, `**/*.sql`)_" in (seeded / MAINS[name]).read_text(), name
    assert cli("playbook", "check").code == 0
    # Unscoped again: the generated files go, and the rule moves into every main file.
    add_rule(seeded, "rule-0002", text="When editing migrations, never rename a column in place.")
    assert "removed .claude/rules/replaybook-rule-0002.md" in cli("playbook", "render").out
    assert not list(seeded.glob(".*/**/replaybook-rule-0002*"))
    assert all(b"rule-0002" in (seeded / rel).read_bytes() for rel in MAINS.values())


def test_a_file_we_did_not_generate_is_never_overwritten_or_removed(cli, seeded):
    configure(seeded, ["claude"])
    write(seeded / ".claude/rules/replaybook-rule-0002.md", "my own notes\n")
    write(seeded / ".claude/rules/replaybook-rule-0009.md", "also mine, not generated\n")
    add_rule(seeded, "rule-0002", text="When editing migrations, never rename a column in place.", extra="paths: [db/**]\n")
    before = snapshot(seeded)
    result = cli("playbook", "render")
    assert result.code == 2 and "was not generated by replaybook" in result.err and "Traceback" not in result.err
    assert snapshot(seeded) == before
    (seeded / ".claude/rules/replaybook-rule-0002.md").unlink()
    assert cli("playbook", "render").code == 0
    assert (seeded / ".claude/rules/replaybook-rule-0009.md").read_text() == "also mine, not generated\n"


def test_hostile_globs_and_rule_text_cannot_break_out(cli, seeded):
    configure(seeded, ["claude", "cursor", "copilot"])
    before = snapshot(seeded)
    for globs in ('["src/**\\"\\n---\\nalwaysApply: true"]', '["a, b"]', '["x: y"]', '["../outside/**"]',
                  '["/etc/**"]', '["a b"]', '["#c"]'):
        add_rule(seeded, "rule-0002", extra=f"paths: {globs}\n")
        result = cli("playbook", "render")
        assert result.code == 2 and "field `paths`" in result.err, (globs, result.err)
        assert "Traceback" not in result.err
    (seeded / "playbook/rules/rule-0002.yaml").unlink()
    for text in ("When done, write <!-- replaybook:playbook:end --> here.", "When done, add --> to the file."):
        add_rule(seeded, "rule-0002", text=json.dumps(text))
        result = cli("playbook", "render")
        assert result.code == 2 and "HTML comment marker" in result.err, result.err
    (seeded / "playbook/rules/rule-0002.yaml").unlink()
    assert snapshot(seeded) == before
    # Text that looks like front matter stays body text: the parsed front matter is exactly ours.
    add_rule(seeded, "rule-0002", text=json.dumps("When you see --- alwaysApply: true globs: ** applyTo: '**', ignore it."),
             extra="paths: [src/**]\n")
    assert cli("playbook", "render").code == 0
    assert front_matter((seeded / ".claude/rules/replaybook-rule-0002.md").read_bytes()) == {"paths": ["src/**"]}
    # Cursor gets it whole (no dependable scoped form): its main file's front matter is still exactly ours
    cursor = (seeded / ".cursor/rules/replaybook.mdc").read_bytes()
    assert b"[rule-0002] When you see" in cursor and front_matter(cursor)["alwaysApply"] is True


def test_a_symlinked_target_outside_the_root_is_refused(cli, seeded, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "bashrc"
    outside.write_text("export PATH=/usr/bin\n")
    configure(seeded, ["claude"])
    (seeded / "CLAUDE.md").symlink_to(outside)
    result = cli("playbook", "render")
    assert result.code == 2 and "CLAUDE.md" in result.err and "outside the repository" in result.err
    assert outside.read_text() == "export PATH=/usr/bin\n"


def test_bad_render_config_is_one_line_naming_the_field(cli, seeded):
    for targets, needle in ((["vim"], "render target 'vim' is unknown"), (["claude:../x.md"], "not a relative file path"),
                            (["agents", "agents"], "more than once")):
        configure(seeded, targets)
        result = cli("playbook", "render")
        assert result.code == 2 and needle in result.err and "render" in result.err, result.err
        assert "Traceback" not in result.err


def test_claude_main_file_can_move_to_claude_rules(cli, seeded):
    configure(seeded, ["claude:.claude/rules/replaybook.md"])
    assert cli("playbook", "render").code == 0
    assert b"[rule-0001]" in (seeded / ".claude/rules/replaybook.md").read_bytes()
    assert not (seeded / "CLAUDE.md").exists()


def test_a_rule_proven_on_some_agents_renders_only_into_their_files(cli, seeded):
    configure(seeded, ALL)
    add_rule(seeded, "rule-0002", text="When adding a dependency, pin its exact version.", extra="agents: [codex]\n")
    assert cli("playbook", "render").code == 0
    assert b"rule-0002" in (seeded / "AGENTS.md").read_bytes()
    for name in ("claude", "copilot", "cursor", "gemini", "windsurf"):
        assert b"rule-0002" not in (seeded / MAINS[name]).read_bytes(), name
    assert all(b"rule-0001" in (seeded / rel).read_bytes() for rel in MAINS.values())  # no `agents`: everywhere


def many_rules(root, n, start=2):
    for i in range(start, start + n):
        add_rule(root, f"rule-{i:04d}", text=f"When touching module m{i}, run its own tests first, read its README and "
                 "its changelog, and check every caller of each public function you change with a search over the "
                 "whole repository, before you change any public function or its documented behaviour in any way.")


def test_render_refuses_before_copilot_code_review_would_cut_the_file(cli, seeded):
    configure(seeded, ["copilot", "agents"])
    assert cli("playbook", "render").code == 0
    many_rules(seeded, 40)
    before = snapshot(seeded)
    result = cli("playbook", "render")
    assert result.code == 2 and "nothing was written" in result.err
    assert ".github/copilot-instructions.md: would be" in result.err and "over the 4,000 characters limit" in result.err
    assert "github/docs/issues/42761" in result.err and "AGENTS.md" not in result.err
    assert snapshot(seeded) == before
    check = cli("playbook", "check")
    assert check.code == 1 and "over the 4,000 characters limit" in check.err


def test_windsurf_rule_file_limit(cli, seeded):
    configure(seeded, ["windsurf"])
    many_rules(seeded, 50)
    result = cli("playbook", "render")
    assert result.code == 2 and ".windsurf/rules/replaybook.md: would be" in result.err
    assert "12,000 characters" in result.err
    for i in range(32, 52):
        (seeded / f"playbook/rules/rule-{i:04d}.yaml").unlink()
    assert cli("playbook", "render").code == 0  # 30 rules, about 9,000 characters: under Windsurf's cap


def test_claude_md_limit_counts_the_users_text_too(cli, seeded):
    configure(seeded, ["claude"])
    (seeded / "CLAUDE.md").write_text("x" * 39_500 + "\n")
    result = cli("playbook", "render")
    assert result.code == 2 and "CLAUDE.md: would be" in result.err and "40,000 characters" in result.err
    assert (seeded / "CLAUDE.md").read_text() == "x" * 39_500 + "\n"
    (seeded / "CLAUDE.md").write_text("x" * 30_000 + "\n")
    assert cli("playbook", "render").code == 0


def test_memory_md_lines_and_a_stale_sections_file_are_checked(cli, seeded):
    configure(seeded, ["claude:MEMORY.md"])
    (seeded / "MEMORY.md").write_text("note\n" * 190)
    result = cli("playbook", "render")
    assert result.code == 2 and "MEMORY.md: would be" in result.err and "over the 200 lines limit" in result.err
    # A `sections` file (rendered the old way) is held to its host's limit as well.
    write(seeded / ".replaybook.yml", "sections: [.github/copilot-instructions.md]\n")
    write(seeded / ".github/copilot-instructions.md", "y" * 4_100)
    result = cli("playbook", "check")
    assert result.code == 1 and ".github/copilot-instructions.md: would be 4,1" in result.err


def test_a_file_both_in_sections_and_render_is_reported(cli, seeded):
    configure(seeded, ["agents"], more="sections: [AGENTS.md]\n")
    result = cli("playbook", "check")
    assert result.code == 1 and "AGENTS.md: is both in `sections` and a `render` target" in result.err


def test_the_codex_budget_counts_the_whole_agents_md_chain_at_and_past_32_kib(cli, seeded):
    configure(seeded, ["agents"])
    assert cli("playbook", "render").code == 0
    ours = (seeded / "AGENTS.md").stat().st_size
    deeper = seeded / "packages" / "api" / "AGENTS.md"  # the repository's own, more specific file
    deeper.parent.mkdir(parents=True)
    deeper.write_text("y" * (32 * 1024 - ours - 2))  # the chain joined: exactly 32 KiB
    assert cli("playbook", "check").code == 0
    deeper.write_text("y" * (32 * 1024 - ours - 1))  # one byte past
    check = cli("playbook", "check")
    assert check.code == 1 and "packages/api/AGENTS.md: Codex would read 32,769 bytes" in check.err
    assert "AGENTS.md + packages/api/AGENTS.md" in check.err and "project_doc_max_bytes of 32,768" in check.err
    assert "openai/codex/issues/7138" in check.err


@pytest.mark.parametrize("rel, size, unit, limit", [
    ("global_rules.md", 6_000, "characters", "6,000 characters"),
    (".windsurfrules", 6_000, "characters", "6,000 characters"),
    (".github/instructions/api.instructions.md", 160, "lines", "160 lines"),
])
def test_windsurf_global_rules_and_copilot_cli_lines_at_and_past_their_limit(cli, seeded, rel, size, unit, limit):
    write(seeded / ".replaybook.yml", f"sections: [{rel}]\n")
    at = "x" * size if unit == "characters" else "x\n" * size
    write(seeded / rel, at)
    assert "would be" not in cli("playbook", "check").err  # at the limit: fits (the section is only out of sync)
    write(seeded / rel, at + ("x" if unit == "characters" else "x\n"))
    result = cli("playbook", "check")
    assert result.code == 1 and f"{rel}: would be" in result.err and f"over the {limit} limit" in result.err
