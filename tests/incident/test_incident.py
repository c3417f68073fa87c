"""The local incident store and `replaybook incident`."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone

import pytest
from helpers import incident_yaml, snapshot, write

from bot.change import apply_local
from bot.errors import BadInput
from bot.incident.store import Incident, IncidentStore

NEW = ["incident", "new", "--task", "Add rate limiting", "--failure-class", "wrong_assumption",
       "--trigger", "CI failed", "--believed", "Tests run from the root", "--actual", "Each package has its own pytest.ini"]


def test_new_writes_a_valid_file_with_the_schema_comment(cli, root):
    result = cli(*NEW, "--created", "2026-07-14T09:32:00Z", "--cost-minutes", "22")
    assert result.code == 0, result.err
    path = root / "incidents" / "2026-07-14-0932.yaml"
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=") and "incident.schema.json" in text
    assert "created: '2026-07-14T09:32:00Z'" in text or "created: 2026-07-14T09:32:00Z" in text
    loaded = IncidentStore(root / "incidents").get("2026-07-14-0932")
    assert loaded.cost_minutes == 22 and loaded.resolved_by == "unresolved"
    assert cli("incident", "validate", str(path)).code == 0


def test_generated_ids_never_clobber(cli, root):
    for _ in range(3):
        assert cli(*NEW, "--created", "2026-07-14T09:32:00Z").code == 0
    names = sorted(p.name for p in (root / "incidents").iterdir())
    assert names == ["2026-07-14-0932-2.yaml", "2026-07-14-0932-3.yaml", "2026-07-14-0932.yaml"]


def test_an_explicit_id_that_exists_is_refused_and_the_file_kept(cli, root):
    assert cli(*NEW, "--id", "inc-1").code == 0
    before = snapshot(root)
    result = cli(*NEW[:3], "Other task", *NEW[4:], "--id", "inc-1")
    assert result.code == 2 and "already exists" in result.err
    assert snapshot(root) == before


def test_the_same_source_key_is_stored_once(cli, root):
    first = cli(*NEW, "--source-key", "run-123-attempt-1", "--json")
    second = cli(*NEW, "--source-key", "run-123-attempt-1", "--json")
    assert json.loads(first.out)["created"] is True
    assert json.loads(second.out)["created"] is False
    assert len(list((root / "incidents").iterdir())) == 1


def test_non_terminal_new_names_every_missing_flag(cli):
    result = cli("incident", "new", "--task", "t")
    assert result.code == 2
    for flag in ("--trigger", "--believed", "--actual", "--failure-class"):
        assert flag in result.err


def test_new_prompts_in_a_terminal(cli, root, monkeypatch):
    answers = "\n".join(["Fix login", "CI red", "The cache is warm", "The cache is cold on a new runner", "env", "12"]) + "\n"
    import io
    import sys

    class TTY(io.StringIO):
        def isatty(self):
            return True

    tty = TTY(answers)
    monkeypatch.setattr(sys, "stdin", tty)
    from bot.cli.main import run

    code = run(["--root", str(root), "incident", "new", "--id", "prompted"])
    assert code == 0
    incident = IncidentStore(root / "incidents").get("prompted")
    assert incident.believed == "The cache is warm" and incident.failure_class == "env"
    assert incident.cost_minutes == 12


def test_list_and_unresolved_filter(cli, root):
    write(root / "incidents" / "a-1.yaml", incident_yaml("a-1"))
    write(root / "incidents" / "a-2.yaml", incident_yaml("a-2", resolved_by="human", created="2026-07-15T00:00:00Z"))
    table = cli("incident", "list")
    assert table.code == 0 and "| a-1 |" in table.out and "| a-2 |" in table.out
    data = json.loads(cli("incident", "list", "--unresolved", "--json").out)
    assert [i["id"] for i in data] == ["a-1"]


def test_validate_accepts_folders_and_warns_on_unknown_keys(cli, root):
    write(root / "incidents" / "a-1.yaml", incident_yaml("a-1", severity="high"))
    result = cli("incident", "validate", str(root / "incidents"))
    assert result.code == 0
    assert "unknown field `severity`" in result.err


def test_unknown_keys_survive_a_rewrite(root):
    write(root / "incidents" / "a-1.yaml", "# a person's comment\n" + incident_yaml("a-1", severity="high"))
    store = IncidentStore(root / "incidents")
    apply_local(store.resolution(["a-1"], "rule", root=root), root)
    text = (root / "incidents" / "a-1.yaml").read_text()
    assert store.get("a-1").resolved_by == "rule"
    assert "severity: high" in text and "# a person's comment" in text and "resolved_by: rule" in text


def test_a_resolution_never_plans_a_broken_file_and_writes_nothing_then(root):
    write(root / "incidents" / "a-1.yaml", incident_yaml("a-1"))
    write(root / "incidents" / "a-2.yaml", incident_yaml("a-2") + "believed: twice\n")
    before = snapshot(root)
    with pytest.raises(BadInput):
        IncidentStore(root / "incidents").resolution(["a-1", "a-2"], "rule", root=root)
    assert snapshot(root) == before


def test_concurrent_writers_never_lose_an_incident(root):
    store = IncidentStore(root / "incidents")
    made = []
    when = datetime(2026, 7, 14, 9, 32, tzinfo=timezone.utc)

    def add(n):
        incident = Incident(id="2026-07-14-0932", task=f"task {n}", failure_class="env", trigger="t",
                            believed="b", actual="a", created=when)
        made.append(store.add(incident, explicit_id=False)[0].id)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8
    assert sorted(i.task for i in store.all()) == sorted(f"task {n}" for n in range(8))
    assert not [p for p in (root / "incidents").iterdir() if p.name.startswith(".")]  # no temp files left


def test_a_broken_incident_elsewhere_never_stops_a_capture(root):
    """A person's bad edit to one file must not lose the next captured event."""
    write(root / "incidents" / "a-1.yaml", incident_yaml("a-1", failure_class="bogus"))
    store = IncidentStore(root / "incidents")
    when = datetime(2026, 7, 14, 9, 32, tzinfo=timezone.utc)
    incident = Incident(id="b-1", task="t", failure_class="env", trigger="t", believed="b", actual="a",
                        created=when, source={"kind": "manual", "key": "k-1"}, evidence="line one\nline two\n")
    stored, created = store.add(incident)
    assert created and store.add(incident)[1] is False  # the key is found without parsing the broken file
    text = store.path_of("b-1").read_text()
    assert "evidence: |" in text  # multi-line evidence reads as a block in a diff
    assert store.load(store.path_of("b-1")).evidence == "line one\nline two"


# -- incidents as people write them -------------------------------------------------------------

SEED = ('task: "Add rate limiting to /v1/upload"\n'
        "failure_class: wrong_assumption   # wrong_assumption | bad_tool_use | scope_creep | env | unknown\n"
        'trigger: "CI failed: 14 import errors after agent moved tests"\n'
        'believed: "Tests are run from repo root with `pytest`"\n'
        'actual: "Each package has its own pytest.ini; must cd into packages/api first"\n'
        "cost_minutes: 22\n"
        "resolved_by: human\n")


@pytest.mark.parametrize("variant", ["plain", "crlf", "bom", "bom+crlf"])
def test_the_seed_articles_own_incident_validates(cli, root, variant):
    text = SEED.replace("\n", "\r\n") if "crlf" in variant else SEED
    data = ("\ufeff" + text if "bom" in variant else text).encode("utf-8")
    path = root / "incidents" / "2026-07-14-0932.yaml"
    path.parent.mkdir()
    path.write_bytes(data)
    result = cli("incident", "validate")
    assert result.code == 0, result.err
    incident = IncidentStore(root / "incidents").get("2026-07-14-0932")
    assert incident.id == "2026-07-14-0932" and incident.created == datetime(2026, 7, 14, 9, 32, tzinfo=timezone.utc)
    assert incident.believed == "Tests are run from repo root with `pytest`" and incident.cost_minutes == 22
    apply_local(IncidentStore(root / "incidents").resolution(["2026-07-14-0932"], "rule", root=root), root)
    assert IncidentStore(root / "incidents").get("2026-07-14-0932").resolved_by == "rule"


def test_created_is_required_when_the_stem_names_no_time_and_the_message_says_how(cli, root):
    write(root / "incidents" / "login-cache.yaml", SEED)
    result = cli("incident", "validate")
    assert result.code == 2
    assert "login-cache.yaml" in result.err and "field `created` is required" in result.err
    assert "created: 2026-07-14T09:32:00Z" in result.err and "YYYY-MM-DD-HHMM" in result.err


def test_the_schema_lets_a_file_leave_out_id_and_created(cli):
    schema = json.loads(cli("schema", "incident").out)
    assert "id" not in schema["required"] and "created" not in schema["required"]
    assert "believed" in schema["required"]


def test_one_bad_file_does_not_hide_the_store(cli, root):
    write(root / "incidents" / "a-1.yaml", incident_yaml("a-1"))
    write(root / "incidents" / "a-2.yaml", incident_yaml("a-2", failure_class="bogus"))
    write(root / "incidents" / "a-3.yaml", incident_yaml("a-3", created="2026-07-16T00:00:00Z"))
    result = cli("incident", "list")
    assert result.code == 2
    assert "| a-1 |" in result.out and "| a-3 |" in result.out and "a-2" not in result.out
    assert "a-2.yaml" in result.err and "failure_class" in result.err and "1 incident file(s) are invalid" in result.err


def test_an_empty_store_lists_as_empty_and_exits_0(cli, root):
    result = cli("incident", "list")
    assert result.code == 0 and "no incidents yet" in result.out
    assert cli("incident", "validate").code == 0


def test_new_reads_piped_answers_and_asks_for_cost_minutes(cli, root):
    answers = "Fix login\nCI red\nThe cache is warm\nThe cache is cold on a new runner\nenv\n15\n"
    result = cli("incident", "new", "--id", "piped", stdin=answers)
    assert result.code == 0, result.err
    incident = IncidentStore(root / "incidents").get("piped")
    assert (incident.task, incident.failure_class, incident.cost_minutes) == ("Fix login", "env", 15)


def test_new_reads_answers_from_a_file_with_defaults_for_blank_lines(cli, root, tmp_path):
    answers = tmp_path / "answers.txt"
    answers.write_text("Fix login\nCI red\nThe cache is warm\nThe cache is cold\n\n\n")
    result = cli("incident", "new", "--id", "filed", "--from-file", str(answers))
    assert result.code == 0, result.err
    incident = IncidentStore(root / "incidents").get("filed")
    assert (incident.failure_class, incident.cost_minutes) == ("wrong_assumption", 0)


def test_new_with_a_bad_piped_cost_writes_nothing(cli, root):
    result = cli("incident", "new", "--id", "x", stdin="t\ntr\nb\na\nenv\nlots\n")
    assert result.code == 2 and "cost minutes 'lots'" in result.err
    assert not (root / "incidents").exists()


def test_a_file_named_not_for_a_time_reports_every_problem_not_only_created(cli, root):
    bad = SEED.replace("failure_class: wrong_assumption", "failure_class: guessing").replace(
        "cost_minutes: 22", "cost_minutes: lots")
    write(root / "incidents" / "login-cache.yaml", bad)
    result = cli("incident", "validate")
    assert result.code == 2 and "Traceback" not in result.err
    assert "field `created` is required" in result.err and "YYYY-MM-DD-HHMM" in result.err
    assert "field `failure_class`" in result.err and "'guessing'" in result.err
    assert "field `cost_minutes`" in result.err and "'lots'" in result.err
    assert "login-cache.yaml:2:" in result.err  # each problem with its line


def test_an_unknown_key_in_a_strict_record_is_named_with_the_nearest_known_one(cli, root):
    from pydantic import BaseModel, ConfigDict

    from bot._util import records

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        stdout_contains: str = ""

    from bot._util import yamlfile
    path = root / "x.yaml"
    write(path, "stdout_contain: ok\n")
    with pytest.raises(BadInput) as err:
        records.from_document(Strict, yamlfile.load(path), what="check")
    [problem] = err.value.problems
    assert "`stdout_contain`" in problem and "did you mean `stdout_contains`" in problem and ":1:" in problem
