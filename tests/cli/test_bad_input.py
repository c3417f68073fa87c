"""Bad input: a clear message naming file, field and fix; exit 2; nothing stored changes."""

from __future__ import annotations

import time

import pytest
from helpers import incident_yaml, rule_yaml, snapshot, write


def validate(cli, root, name, content):
    path = root / "incoming" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return cli("incident", "validate", str(path)), path


CASES = {
    "missing field": (incident_yaml("a-1", believed=None), ["field `believed`", "required"]),
    "wrong enum": (incident_yaml("a-1", failure_class="oops"), ["field `failure_class`", "'oops'", "wrong_assumption"]),
    "multi-line believed": (
        incident_yaml("a-1", believed='"line one\\nline two\\nline three"'),
        ["field `believed`", "3 lines", "ONE line"],
    ),
    "stack trace believed": (
        incident_yaml("a-1", believed='"Traceback (most recent call last): boom"'),
        ["field `believed`", "stack trace"],
    ),
    "non-UTF-8": (b"id: a-1\ntask: caf\xe9\n", ["a-1.yaml:2", "0xe9", "UTF-8"]),
    "empty": ("", ["empty"]),
    "only a comment": ("# nothing here\n", ["no YAML value"]),
    "alias bomb": (
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
        ["anchors", "not allowed"],
    ),
    "tabs": ("id: a-1\ntask: x\nsource:\n\tkind: manual\n", ["a-1.yaml:4", "tab"]),
    "list not mapping": ("- a\n- b\n", ["expected a YAML mapping"]),
    "broken YAML": ("id: [a-1\n", ["not valid YAML"]),
    "duplicate key": (incident_yaml("a-1") + "task: again\n", ["duplicate key `task`"]),
    "negative cost": (incident_yaml("a-1", cost_minutes="-5"), ["field `cost_minutes`", "greater than or equal to 0"]),
    "naive time": (incident_yaml("a-1", created="2026-07-14T09:32:00"), ["field `created`", "time zone"]),
    "id/file mismatch": (incident_yaml("other-id"), ["`id` is 'other-id'", "a-1.yaml"]),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_incident_is_refused_clearly(cli, root, case):
    content, expected = CASES[case]
    result, path = validate(cli, root, "a-1.yaml", content)
    assert result.code == 2, result
    assert str(path) in result.err
    for fragment in expected:
        assert fragment in result.err, (fragment, result.err)


def test_field_errors_carry_the_yaml_line(cli, root):
    result, path = validate(cli, root, "a-1.yaml", incident_yaml("a-1", failure_class="oops"))
    line = [i for i, l in enumerate(path.read_text().splitlines(), 1) if l.startswith("failure_class")][0]
    assert f"{path}:{line}: field `failure_class`" in result.err


def test_fifty_megabytes_are_refused_fast_without_parsing(cli, root):
    path = root / "incoming" / "big.yaml"
    path.parent.mkdir(parents=True)
    with path.open("wb") as handle:
        handle.write(b"id: big\n")
        handle.truncate(50 * 1024 * 1024)
    started = time.perf_counter()
    result = cli("incident", "validate", str(path))
    elapsed = time.perf_counter() - started
    assert result.code == 2
    assert "too large" in result.err and "52,428,800 bytes" in result.err
    # Not a timing test: parsing 50 MB takes many seconds, a stat takes microseconds; 30 s is far from both.
    assert elapsed < 30


def test_bad_incident_files_in_the_store_stop_listing_and_change_nothing(cli, seeded):
    write(seeded / "incidents" / "2026-08-01-0000.yaml", incident_yaml("2026-08-01-0000", failure_class="bogus"))
    before = snapshot(seeded)
    result = cli("incident", "list")
    assert result.code == 2
    assert "2026-08-01-0000.yaml" in result.err and "failure_class" in result.err
    assert snapshot(seeded) == before


def test_new_incident_with_multi_line_believed_writes_nothing(cli, root):
    result = cli(
        "incident", "new", "--task", "t", "--trigger", "ci", "--failure-class", "env",
        "--believed", "one\ntwo", "--actual", "a",
    )
    assert result.code == 2
    assert "--believed" in result.err and "2 lines" in result.err
    assert not (root / "incidents").exists() or not list((root / "incidents").iterdir())


def test_duplicate_rule_ids_are_refused_by_every_changing_command(cli, seeded):
    write(seeded / "playbook" / "archive" / "rule-0001.yaml", rule_yaml("rule-0001"))
    before = snapshot(seeded)
    for args in (["playbook", "render"], ["playbook", "retire", "rule-0001"], ["playbook", "list"],
                 ["playbook", "inject", "--task-type", "api"]):
        result = cli(*args)
        assert result.code == 2, (args, result)
        assert "duplicate id rule-0001" in result.err and "never reused" in result.err
    assert cli("playbook", "hit", stdin="[rule-0001]").code == 2
    assert snapshot(seeded) == before


def test_citation_of_missing_incident_is_named(cli, seeded):
    write(seeded / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002", cites=("2026-07-14-0932", "1999-01-01-0000")))
    result = cli("playbook", "check")
    assert result.code == 1
    assert "rule-0002.yaml: field `cites`: incident '1999-01-01-0000' does not exist" in result.err


def test_rule_with_three_sentences_is_refused(cli, seeded):
    text = "Before running tests, read the config. Then run them. Then report."
    write(seeded / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002", text=text))
    before = snapshot(seeded)
    result = cli("playbook", "render")
    assert result.code == 2
    assert "field `rule`: has 3 sentences; a rule is at most two" in result.err
    assert snapshot(seeded) == before


def test_bad_config_is_refused_with_its_field(cli, root):
    write(root / ".replaybook.yml", "cap: many\n")
    result = cli("playbook", "list")
    assert result.code == 2
    assert ".replaybook.yml:1: field `cap`" in result.err


@pytest.mark.parametrize("where", ["/tmp", "../outside", ".replaybook/../../x"])
def test_a_config_path_outside_the_repository_is_refused(cli, root, where):
    """A checkout under test cannot point the gate's run folders (pruned by keep_runs) or caches elsewhere."""
    write(root / ".replaybook.yml", f"paths:\n  traces: {where}\n")
    result = cli("playbook", "list")
    assert result.code == 2
    assert "field `paths.traces`: must be a folder inside the repository" in result.err


def test_unknown_config_key_is_refused(cli, root):
    write(root / ".replaybook.yml", "capp: 40\n")
    result = cli("playbook", "list")
    assert result.code == 2
    assert "field `capp`: is not a known field" in result.err


def test_usage_errors_exit_2(cli):
    assert cli("playbook", "inject").code == 2  # --task-type missing
    assert cli("no-such-command").code == 2
    assert cli("schema", "nonsense").code == 2


def test_rule_validate_names_missing_incidents_and_reused_ids(cli, seeded):
    candidate = write(seeded / "playbook" / "proposed" / "rule-0001.yaml",
                      rule_yaml("rule-0001", cites=("2026-07-14-0932", "1999-01-01-0000")))
    before = snapshot(seeded)
    result = cli("rule", "validate", str(candidate))
    assert result.code == 2
    assert "field `cites`: incident '1999-01-01-0000' does not exist" in result.err
    assert "rule-0001 is already used by" in result.err and "use rule-0002" in result.err
    assert snapshot(seeded) == before


def test_rule_validate_accepts_a_sound_candidate(cli, seeded):
    candidate = write(seeded / "playbook" / "proposed" / "rule-0002.yaml", rule_yaml(
        "rule-0002", cites=("2026-07-14-0932",),  # not admitted rule-0001's text: that is a twin (exit 1)
        text="When a linter reports an error, change the code so the check passes and leave the rule enabled."))
    result = cli("rule", "validate", str(candidate))
    assert result.code == 0, result.err
    assert "provisional" in result.out


def test_rule_without_a_condition_is_refused(cli, seeded):
    candidate = write(seeded / "playbook" / "proposed" / "rule-0002.yaml", rule_yaml("rule-0002", text="Be careful with monorepos."))
    result = cli("rule", "validate", str(candidate))
    assert result.code == 2 and "states no condition" in result.err


def test_validating_a_folder_with_no_incidents_is_not_a_pass(cli, root):
    (root / "empty").mkdir()
    result = cli("incident", "validate", str(root / "empty"))
    assert result.code == 2 and "no incident files" in result.err


def test_an_unquoted_bot_login_gets_the_fix_in_the_message(cli):
    (cli.root / ".replaybook.yml").write_text("github:\n  agent_logins: [copilot-swe-agent[bot]]\n", encoding="utf-8")
    result = cli("playbook", "list")
    assert result.code == 2
    assert ".replaybook.yml:2: not valid YAML" in result.err and '["copilot-swe-agent[bot]"]' in result.err
