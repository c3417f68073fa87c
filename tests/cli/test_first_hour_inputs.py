"""The first hour, again (issue 48): one bad file never stops the rules agents read, and every input
gets its exit code."""

from __future__ import annotations

from helpers import incident_yaml, rule_yaml, snapshot, write

THREE_SENTENCES = "Before running tests, read the config. Then run them. Then report."


def test_a_broken_candidate_is_named_and_skipped_and_the_admitted_rules_are_served(cli, seeded):
    write(seeded / "playbook" / "proposed" / "rule-0002.yaml", rule_yaml("rule-0002", text=THREE_SENTENCES))
    before = snapshot(seeded)
    for args in (["playbook", "inject", "--task-type", "api"], ["playbook", "list", "--all"],
                 ["playbook", "render"], ["report"]):
        result = cli(*args)
        assert result.code == 0, (args, result)
        assert "warning: skipped a candidate" in result.err, args
        assert "proposed/rule-0002.yaml:2: field `rule`: has 3 sentences" in result.err, args
        assert "fix it or delete it" in result.err, args
    assert "[rule-0001]" in cli("playbook", "inject", "--task-type", "api").out
    listed = cli("playbook", "list", "--all").out
    assert "rule-0001" in listed and "rule-0002" not in listed
    assert snapshot(seeded) == before


def test_playbook_check_lists_a_broken_candidate_once_and_claims_no_change(cli, seeded):
    write(seeded / "playbook" / "proposed" / "rule-0002.yaml", rule_yaml("rule-0002", text=THREE_SENTENCES))
    result = cli("playbook", "check")
    assert result.code == 1
    assert result.err.count("has 3 sentences") == 1, result.err
    assert "nothing was changed" not in result.err
    assert "invalid rule (1 problem(s))" not in result.err  # the header of a nested error is not a problem


def test_report_with_a_broken_incident_shows_the_rest_and_exits_2_like_incident_list(cli, seeded):
    write(seeded / "incidents" / "2026-08-01-0000.yaml", incident_yaml("2026-08-01-0000", failure_class="bogus"))
    for args in (["report"], ["incident", "list"]):
        result = cli(*args)
        assert result.code == 2, (args, result)
        assert "2026-08-01-0000.yaml" in result.err and "failure_class" in result.err, args
    assert "Playbook health" in cli("report").out


def test_a_rule_with_an_unknown_field_is_refused_with_the_nearest_name(cli, seeded):
    path = write(seeded / "incoming" / "rule-0002.yaml",
                 rule_yaml("rule-0002", task_types="[]").replace("task_types: []\n", "task_type: api\n"))
    before = snapshot(seeded)
    result = cli("rule", "validate", str(path))
    assert result.code == 2, result
    assert f"{path}:4: field `task_type`: is not a known field" in result.err
    assert "did you mean `task_types`?" in result.err
    assert snapshot(seeded) == before
    write(seeded / "playbook" / "proposed" / "rule-0002.yaml", path.read_text())
    assert "did you mean `task_types`?" in cli("playbook", "list", "--all").err  # a candidate: named and skipped


def test_a_new_incident_names_the_schema_of_the_installed_version_not_main(cli, root):
    import re

    result = cli("incident", "new", "--task", "t", "--trigger", "ci", "--failure-class", "env",
                 "--believed", "b", "--actual", "a")
    assert result.code == 0, result.err
    [path] = (root / "incidents").glob("*.yaml")
    first = path.read_text().splitlines()[0]
    # This checkout's commit (an editable install reads it live), or a release's tag; never `main`.
    assert re.fullmatch(r"# yaml-language-server: \$schema=https://raw\.githubusercontent\.com/replaybook/replaybook/"
                        r"(v[0-9][^/]*|[0-9a-f]{40})/schemas/incident\.schema\.json", first), first


def test_a_binary_file_is_refused_as_a_ci_log_and_as_an_incident(cli, root):
    binary = bytes(range(256)) * 12  # NUL bytes and every byte that is not UTF-8 text
    log = root / "ci.log"
    log.write_bytes(binary)
    for args, stdin in ((["capture", "log", str(log)], None), (["capture", "log", "-"], binary)):
        result = cli(*args, stdin=stdin)
        assert result.code == 2, (args, result)
        assert "not text" in result.err and "a binary file" in result.err, result.err
    assert not (root / "incidents").exists()
    no_nul = bytes(b for b in binary if b) * 2
    log.write_bytes(no_nul)
    result = cli("capture", "log", str(log))
    assert result.code == 2 and "not text" in result.err and "U+FFFD" in result.err, result
    garbage = "CI failed: " + "ve\ufffd\ufffd\ufffdH6\ufffd}\ufffd\ufffd" * 10  # as captured from random bytes before
    path = write(root / "incoming" / "2026-07-14-0932.yaml", incident_yaml("2026-07-14-0932", trigger=f'"{garbage}"'))
    result = cli("incident", "validate", str(path))
    assert result.code == 2, result
    assert "field `trigger`" in result.err and "U+FFFD" in result.err and "binary" in result.err


def test_a_log_with_a_few_bytes_that_are_not_utf8_is_still_a_log(cli, root):
    log = root / "ci.log"
    log.write_bytes(b"Run pytest\nE   AssertionError: caf\xe9 != caf\xc3\xa9\nError: Process completed with exit code 1.\n")
    result = cli("capture", "log", str(log))
    assert result.code == 0, result


def _gate_ledger(root):
    from bot.gate import ledger

    return ledger.read(root)[0]


def test_the_gate_refuses_bad_input_before_the_ledger_and_counts_one_admission_per_rule(cli, root):
    import json

    from support.gate import candidate, mini_scenario, setup

    path = setup(root)
    cli("playbook", "render")
    broken = write(root / "playbook" / "proposed" / "rule-0002.yaml",
                   "id: rule-0002\nrule: When a task says so, do it. Then more. And more.\nreplay: scenarios/own\n"
                   "cites: [inc-a, inc-b]\ncreated: 2026-11-01\n")
    mini_scenario(root, "misspelt")
    scenario = root / "scenarios" / "misspelt" / "scenario.yaml"
    scenario.write_text(scenario.read_text().replace("budget:", "budgett:"))
    misspelt = candidate(root, "rule-0003", text="When a task says make it so, write right.txt.", sid="misspelt")
    for bad, expected in ((broken, "has 3 sentences"), (misspelt, "did you mean `budget`?")):
        result = cli("gate", str(bad))
        assert result.code == 2, result
        assert "not a candidate the gate can replay" in result.err and expected in result.err, result.err
        assert "\n>\n" not in result.out and not result.out
    assert _gate_ledger(root) == []  # bad input is no decision
    import shutil

    shutil.rmtree(root / "scenarios" / "misspelt")
    for done in (broken, misspelt):
        done.unlink()
    plain = cli("gate", str(path), "--json")
    assert plain.code == 0, plain.err
    assert "no other scenario was checked" in json.loads(plain.out)["reason"]
    assert "suite does not regress" not in plain.out
    assert cli("gate", str(path), "--admit").code == 0
    admitted = root / "playbook" / "rules" / "rule-0001.yaml"
    again = cli("gate", str(admitted))
    assert again.code == 2 and "already admitted" in again.err and "playbook retest rule-0001" in again.err
    assert [r.decision for r in _gate_ledger(root)] == ["admit", "admit"]
    report = json.loads(cli("report", "--json").out)
    assert report["gates"]["admitted"] == 1 and report["gates"]["gates"] == 2


def test_a_reject_report_never_quotes_an_empty_rule():
    from bot.gate import report, stats
    from bot.gate.decision import GateResult

    text = report.markdown(GateResult(rule_id="rule-0002", rule_text="", decision="reject",
                                      reason="cheap checks failed: the rule does not load"), stats.SequentialTest())
    assert "reject `rule-0002`" in text
    assert not [line for line in text.splitlines() if line.strip() == ">"], text


def test_check_finds_a_stale_section_in_any_agent_file_that_carries_the_markers(cli, seeded):
    assert cli("playbook", "render", "--section", "CLAUDE.md").code == 0
    assert cli("playbook", "render", "--target", "agents").code == 0
    assert cli("playbook", "check").code == 0  # one-off renderings, in sync
    assert cli("playbook", "retire", "rule-0001").code == 0
    assert cli("playbook", "render").code == 0
    assert "[rule-0001]" in (seeded / "CLAUDE.md").read_text() and "[rule-0001]" in (seeded / "AGENTS.md").read_text()
    result = cli("playbook", "check")
    assert result.code == 1, result
    assert "CLAUDE.md: holds a playbook section that is out of sync" in result.err
    assert "AGENTS.md: holds a playbook section that is out of sync" in result.err
    assert "render --target agents" in result.err and "render:" in result.err


def test_init_records_the_agent_files_it_finds_to_keep_them_rendered(cli, root, monkeypatch):
    import yaml

    monkeypatch.setenv("REPLAYBOOK_ACTIONS_SHA", "0123456789abcdef0123456789abcdef01234567")
    write(root / "CLAUDE.md", "# Notes for Claude\n")
    write(root / "AGENTS.md", "# Notes for agents\n")
    result = cli("init")
    assert result.code == 0, result.err
    assert yaml.safe_load((root / ".replaybook.yml").read_text())["render"] == ["claude", "agents"]
    assert "render: ['claude', 'agents']" in result.out
    assert cli("playbook", "render").code == 0
    assert "Replaybook playbook" in (root / "CLAUDE.md").read_text()
    assert (root / "CLAUDE.md").read_text().startswith("# Notes for Claude\n")
    assert cli("playbook", "check").code == 0
