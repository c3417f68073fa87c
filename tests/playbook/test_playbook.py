"""`replaybook playbook`: check, render, sections, hit, retire, inject."""

from __future__ import annotations

import json

from helpers import make_scenario, rule_yaml, snapshot, write

from bot.playbook.rule import Rule, sentences
from bot.playbook.store import SECTION_END, SECTION_START


def add_rule(root, rule_id, **kw):
    write(root / "playbook" / "rules" / f"{rule_id}.yaml", rule_yaml(rule_id, **kw))


def test_a_sound_playbook_checks_ok(cli, seeded):
    result = cli("playbook", "check")
    assert result.code == 0, result.err
    assert "playbook ok" in result.out


def test_check_lists_every_broken_invariant(cli, seeded):
    write(seeded / ".replaybook.yml", "cap: 1\n")
    add_rule(seeded, "rule-0002", scenario="nowhere")
    write(seeded / "playbook" / "archive" / "rule-0001.yaml", rule_yaml("rule-0001"))
    result = cli("playbook", "check")
    assert result.code == 1
    err = result.err
    assert "duplicate id rule-0001" in err
    assert "2 admitted rules exceed the cap of 1" in err
    assert "rule-0002.yaml: field `replay`" in err and "no such scenario" in err


def test_check_reports_a_stale_render(cli, seeded):
    add_rule(seeded, "rule-0002", task_types="[testing]")
    result = cli("playbook", "check")
    assert result.code == 1 and "PLAYBOOK.md is out of sync" in result.err
    assert cli("playbook", "render").code == 0
    assert cli("playbook", "check").code == 0


def test_render_groups_rules_and_explains_citations(cli, seeded):
    add_rule(seeded, "rule-0002", task_types="[testing]", cites=("2026-07-14-0932",))
    cli("playbook", "render")
    text = (seeded / "playbook" / "PLAYBOOK.md").read_text()
    assert "cite its id in square brackets, e.g. [rule-0001]" in text
    assert "## Every task\n\n- [rule-0001] Before running any test command" in text
    assert "## Task types: `testing`\n\n- [rule-0002]" in text
    assert "(provisional: one incident so far)" in text
    # Volatile fields stay out, so a hit never makes the render stale.
    assert "last_hit" not in text and "2026-08-03" not in text


def test_section_sync_touches_nothing_outside_the_markers(cli, seeded):
    claude = seeded / "CLAUDE.md"
    outside_before = b"# Project\r\n\r\nUse   tabs\there.\r\n"
    outside_after = b"\n## Footer\xe2\x9c\x93\n"
    claude.write_bytes(outside_before)
    assert cli("playbook", "render", "--section", str(claude)).code == 0
    first = claude.read_bytes()
    assert first.startswith(outside_before) and SECTION_START.encode() in first
    claude.write_bytes(first + outside_after)
    add_rule(seeded, "rule-0002", task_types="[testing]")
    assert cli("playbook", "render", "--section", str(claude)).code == 0
    second = claude.read_bytes()
    assert second.startswith(outside_before) and second.endswith(outside_after)
    assert b"[rule-0002]" in second
    assert cli("playbook", "check", "--section", str(claude)).code == 0
    claude.write_bytes(second.replace(b"[rule-0002]", b"[rule-9999]"))
    assert cli("playbook", "check", "--section", str(claude)).code == 1


def test_section_with_two_start_markers_is_refused(cli, seeded):
    claude = seeded / "CLAUDE.md"
    claude.write_text(f"{SECTION_START} -->\n{SECTION_START} -->\n{SECTION_END}\n")
    before = claude.read_bytes()
    result = cli("playbook", "render", "--section", str(claude))
    assert result.code == 2 and "more than one playbook section marker" in result.err
    assert claude.read_bytes() == before


def test_hit_updates_last_hit_of_cited_admitted_rules(cli, seeded):
    path = seeded / "playbook" / "rules" / "rule-0001.yaml"
    path.write_text("# kept comment\n" + path.read_text())
    result = cli("playbook", "hit", "--date", "2026-08-20", "--json",
                 stdin="Ran pytest from packages/api [rule-0001]; also [rule-0042] and [rule-0001] again.")
    assert result.code == 0
    assert json.loads(result.out) == {"hit": ["rule-0001"], "not_admitted": ["rule-0042"]}
    text = path.read_text()
    assert "last_hit: 2026-08-20" in text and "# kept comment" in text
    # An older hit never moves last_hit back.
    cli("playbook", "hit", "--date", "2026-08-01", stdin="[rule-0001]")
    assert "last_hit: 2026-08-20" in path.read_text()
    assert cli("playbook", "check").code == 0


def test_hit_reads_a_file(cli, seeded, tmp_path):
    transcript = tmp_path / "out.txt"
    transcript.write_text("applied [rule-0001]")
    assert cli("playbook", "hit", str(transcript), "--date", "2026-09-01").code == 0
    assert "last_hit: 2026-09-01" in (seeded / "playbook" / "rules" / "rule-0001.yaml").read_text()


def test_retire_over_cap_takes_provisional_then_oldest_hit_then_oldest_created(cli, seeded):
    write(seeded / ".replaybook.yml", "cap: 2\n")
    add_rule(seeded, "rule-0002", last_hit="2026-09-01", created="2026-08-01")
    add_rule(seeded, "rule-0003", last_hit="2026-09-01", created="2026-07-01")
    add_rule(seeded, "rule-0004", cites=("2026-07-14-0932",), last_hit="2026-10-01")  # provisional
    # rule-0001: never hit. Order: 0004 (provisional), 0001 (never hit), 0003 (older created), 0002.
    dry = cli("playbook", "retire", "--dry-run")
    assert "would retire: rule-0004, rule-0001" in dry.out
    result = cli("playbook", "retire", "--date", "2026-11-30")
    assert result.code == 0
    assert sorted(p.name for p in (seeded / "playbook" / "rules").iterdir()) == ["rule-0002.yaml", "rule-0003.yaml"]
    archived = (seeded / "playbook" / "archive" / "rule-0004.yaml").read_text()
    assert "retired: 2026-11-30" in archived and "retired_reason: cap" in archived
    assert cli("playbook", "check").code == 0  # re-rendered, ids still unique


def test_retire_a_named_rule_and_refuse_an_unknown_one(cli, seeded):
    before = snapshot(seeded)
    assert cli("playbook", "retire", "rule-0099").code == 2
    assert snapshot(seeded) == before
    assert cli("playbook", "retire", "rule-0001", "--reason", "superseded").code == 0
    assert "retired_reason: superseded" in (seeded / "playbook" / "archive" / "rule-0001.yaml").read_text()
    assert "No rules yet" in (seeded / "playbook" / "PLAYBOOK.md").read_text()


def test_next_id_is_never_reused(seeded):
    from bot.playbook.store import Playbook

    write(seeded / "playbook" / "archive" / "rule-0007.yaml", rule_yaml("rule-0007"))
    assert Playbook(seeded / "playbook", root=seeded).next_id() == "rule-0008"


def test_inject_scopes_by_task_type_and_caps(cli, seeded):
    make_scenario(seeded, "other")
    add_rule(seeded, "rule-0002", task_types="[api]", scenario="other")
    add_rule(seeded, "rule-0003", task_types="[docs]", scenario="other")
    text = cli("playbook", "inject", "--task-type", "api").out
    assert "[rule-0001]" in text and "[rule-0002]" in text and "[rule-0003]" not in text
    assert "cite its id in square brackets" in text
    only = json.loads(cli("playbook", "inject", "--task-type", "api", "--max", "1", "--json").out)
    assert [r["id"] for r in only] == ["rule-0002"]  # scoped rules win a tight budget
    assert cli("playbook", "inject", "--task-type", "docs").out.count("[rule-") == 3  # 2 rules + example


def test_list_json_and_all_states(cli, seeded):
    write(seeded / "playbook" / "proposed" / "rule-0005.yaml", rule_yaml("rule-0005"))
    admitted = json.loads(cli("playbook", "list", "--json").out)
    assert [r["id"] for r in admitted] == ["rule-0001"]
    everything = json.loads(cli("playbook", "list", "--all", "--json").out)
    assert {(r["id"], r["state"]) for r in everything} == {("rule-0001", "rules"), ("rule-0005", "proposed")}
    assert "1 admitted of a cap of 60" in cli("playbook", "list").out


def test_provisional_is_derived_and_checked():
    base = dict(id="rule-0001", rule="When x, do y.", replay="scenarios/x", created="2026-08-03")
    assert Rule.model_validate({**base, "cites": ["a"]}).provisional is True
    assert Rule.model_validate({**base, "cites": ["a", "b"]}).provisional is False
    try:
        Rule.model_validate({**base, "cites": ["a"], "provisional": False})
    except Exception as exc:
        assert "set `provisional: true`" in str(exc)
    else:
        raise AssertionError("inconsistent provisional accepted")


def test_sentence_counting_ignores_dots_inside_names():
    assert len(sentences("Before running tests, look for pytest.ini or jest.config.* first, e.g. in packages/api.")) == 1
    assert len(sentences("When a lint rule fails, fix the code. Never disable the rule.")) == 2


def test_admit_is_one_change_moving_retiring_rendering_and_resolving(seeded):
    from datetime import date

    from bot.incident.store import IncidentStore
    from bot.playbook.store import Playbook

    write(seeded / ".replaybook.yml", "cap: 1\n")
    candidate = write(seeded / "playbook" / "proposed" / "rule-0002.yaml",
                      rule_yaml("rule-0002", created="2026-11-01", text="When a test imports fail, run it from its package."))
    book = Playbook(seeded / "playbook", root=seeded, cap=1, incidents=IncidentStore(seeded / "incidents"))
    admission = book.admit(candidate, on=date(2026, 11, 30))
    assert [r.id for r in admission.retired] == ["rule-0001"]  # older activity than the new rule
    assert not candidate.exists()
    assert [r.id for r in book.admitted()] == ["rule-0002"]
    assert (seeded / "playbook" / "archive" / "rule-0001.yaml").exists()
    assert sorted(admission.resolved_incidents) == ["2026-07-14-0932", "2026-07-21-1105"]
    assert all(i.resolved_by == "rule" for i in IncidentStore(seeded / "incidents").all())
    assert book.check() == []
    assert not (seeded / ".replaybook" / "journal.json").exists()


def test_an_interrupted_change_is_finished_by_the_next_one(seeded):
    """A journal left by a crash is applied before anything else changes."""
    import json
    from datetime import date

    from bot.playbook.store import Playbook

    rules = seeded / "playbook" / "rules"
    journal = seeded / ".replaybook" / "journal.json"
    journal.parent.mkdir(parents=True, exist_ok=True)
    moved = (rules / "rule-0001.yaml").read_text() + "retired: 2026-11-30\nretired_reason: manual\n"
    journal.write_text(json.dumps({"writes": {"playbook/archive/rule-0001.yaml": moved},
                                   "deletes": ["playbook/rules/rule-0001.yaml"]}))
    book = Playbook(seeded / "playbook", root=seeded)
    assert book.retire_over_cap(on=date(2026, 11, 30)) == []  # any change recovers first
    assert not journal.exists() and not (rules / "rule-0001.yaml").exists()
    assert "retired_reason: manual" in (seeded / "playbook" / "archive" / "rule-0001.yaml").read_text()
