"""Lessons: scoped, capped, ranked injection; expiry; conflict flags; the CLI."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from bot.cli import lessons as lessons_cli
from bot.cli.main import Context
from bot.errors import BadInput, ReplaybookError
from bot.hindsight.lesson import (
    DB_FILE,
    MIGRATIONS_TABLE,
    REMINDER,
    Lesson,
    LessonStore,
    find_conflicts,
)

T0 = datetime(2026, 7, 1, 9, 0, tzinfo=timezone.utc)
DISTINCT = [
    "When a CSV fails to decode, prefer utf-8-sig.",
    "When rows are ragged, read with the python engine.",
    "When numbers use commas, set the decimal option.",
    "Before a batch starts, count the input files.",
    "When a header repeats mid-file, split the file there.",
]


@pytest.fixture
def store(tmp_path):
    with LessonStore(tmp_path / "hindsight.db") as s:
        yield s


def add(store, content, task_type="csv", *, at=T0, **kw):
    return store.add(Lesson.new(task_type, content, now=at, **kw), now=at)


def hits(store, lesson_id):
    return store.get(lesson_id).hit_count


# --- injection -----------------------------------------------------------------------------------


def test_inject_gives_at_most_three_lessons_of_the_task_type_and_ends_with_the_reminder(store):
    for text in DISTINCT:
        assert add(store, text).conflicts == []
    add(store, "When scraping pages, wait for the network to go idle.", "web")
    text = store.inject("csv", now=T0 + timedelta(days=1))
    assert text.count("\n- [lesson-") == 3
    assert "scraping" not in text
    assert text.rstrip("\n").endswith(REMINDER)
    assert "current task come before" in REMINDER
    assert store.inject("pdf", now=T0) == ""  # nothing for an unknown type, not even the reminder


def test_ranked_by_hits_then_value(store):
    low = add(store, "When a CSV has a BOM, strip it before parsing.", value=0.1).lesson
    high = add(store, "When numbers use commas, set the decimal option.", value=0.9).lesson
    mid = add(store, "When rows are ragged, read with the python engine.", value=0.5).lesson
    now = T0 + timedelta(days=1)
    assert [x.id for x in store.select("csv", 2, now=now)] == [high.id, mid.id]
    for _ in range(2):
        store.take("csv", 1, now=now)  # high gets two hits
    picked = store.select("csv", 3, now=now)
    assert [x.id for x in picked] == [high.id, mid.id, low.id]
    assert hits(store, high.id) == 2 and hits(store, low.id) == 0


def test_inject_counts_a_hit_on_each_injected_lesson_only(store):
    ids = [add(store, text).lesson.id for text in DISTINCT[:4]]
    chosen = store.take("csv", now=T0)
    assert [x.hit_count for x in chosen] == [1, 1, 1]
    assert sorted(hits(store, i) for i in ids) == [0, 1, 1, 1]


def test_hit_counts_are_atomic_across_connections(tmp_path):
    path = tmp_path / "hindsight.db"
    with LessonStore(path) as s:
        lesson = add(s, "When a CSV fails to decode, prefer utf-8-sig.").lesson
    errors = []

    def worker():
        try:
            with LessonStore(path) as mine:
                for _ in range(10):
                    mine.take("csv", now=T0)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with LessonStore(path) as s:
        assert hits(s, lesson.id) == 40


# --- expiry ---------------------------------------------------------------------------------------


def test_expired_lessons_are_kept_and_injected_only_when_confirmed(store):
    old = add(store, "When a CSV fails to decode, prefer utf-8-sig.").lesson
    kept = add(store, "When rows are ragged, read with the python engine.").lesson
    assert old.valid_until == T0 + timedelta(days=30)
    later = T0 + timedelta(days=31)
    assert store.select("csv", now=later) == []
    assert {x.id for x in store.list("csv", now=later)} == {old.id, kept.id}  # kept
    assert store.list("csv", include_expired=False, now=later) == []
    store.confirm(kept.id)
    assert [x.id for x in store.select("csv", now=later)] == [kept.id]
    assert [x.id for x in store.list("csv", include_expired=False, now=later)] == [kept.id]


def test_expire_stops_injection_now_even_when_confirmed_and_keeps_the_lesson(store):
    lesson = add(store, "When a CSV fails to decode, prefer utf-8-sig.").lesson
    store.confirm(lesson.id)
    now = T0 + timedelta(days=2)
    store.expire(lesson.id, now=now)
    assert store.select("csv", now=now + timedelta(seconds=1)) == []
    assert store.get(lesson.id).state(now + timedelta(seconds=1)) == "expired"
    store.confirm(lesson.id)  # a person can bring it back
    assert store.select("csv", now=now + timedelta(days=90))[0].id == lesson.id


# --- conflicts ------------------------------------------------------------------------------------


def test_a_duplicate_is_flagged_reported_and_not_injected(store):
    first = add(store, "When a CSV export fails to decode, retry reading it with utf-8-sig encoding.").lesson
    added = add(store, "When a CSV export fails to decode, retry reading with the utf-8-sig encoding.")
    assert [(c.id, c.kind) for c in added.conflicts] == [(first.id, "duplicate")]
    assert added.lesson.conflicts_with == (first.id,)
    assert [x.id for x in store.select("csv", now=T0)] == [first.id]
    assert store.get(added.lesson.id).state(T0) == "conflict"  # stored, not dropped


@pytest.mark.parametrize("existing, new, subject", [
    ("When a CSV fails to decode, prefer utf-8-sig.", "Avoid utf-8-sig for files that have no BOM; detect the BOM.",
     "utf-8-sig"),
    ("Use pandas.read_csv for exports.", "Do not use pandas.read_csv on raw exports, it drops rows.",
     "pandas.read_csv"),
    ("Never call the retry helper on timeouts.", "On timeouts, always call the retry helper twice.", "retry"),
    ("Use requests for downloads.", "Use httpx instead of requests for downloads.", "requests"),
])
def test_a_contradiction_is_flagged_and_not_injected(store, existing, new, subject):
    first = add(store, existing).lesson
    added = add(store, new)
    assert [(c.id, c.kind) for c in added.conflicts] == [(first.id, "contradiction")]
    assert subject in added.conflicts[0].reason
    assert [x.id for x in store.select("csv", now=T0)] == [first.id]


def test_conflicts_are_scoped_to_the_task_type_and_to_live_lessons(store):
    add(store, "When a CSV fails to decode, prefer utf-8-sig.", "web")
    assert add(store, "Avoid utf-8-sig for files without a BOM.").conflicts == []  # another type
    later = T0 + timedelta(days=40)
    assert add(store, "Avoid utf-8-sig for files without a BOM.", at=later).conflicts == []  # the first expired


def test_unrelated_lessons_do_not_conflict():
    a = Lesson.new("csv", "When a CSV fails to decode, prefer utf-8-sig.", now=T0)
    assert find_conflicts("When rows are ragged, read with the python engine.", [a]) == []
    assert find_conflicts("Avoid eval on untrusted input.", [a]) == []


def test_confirming_a_flagged_lesson_makes_it_win_the_conflict(store):
    first = add(store, "When a CSV fails to decode, prefer utf-8-sig.").lesson
    second = add(store, "Avoid utf-8-sig for files without a BOM; detect the BOM first.").lesson
    store.confirm(second.id)
    assert [x.id for x in store.select("csv", now=T0)] == [second.id]
    assert store.get(first.id).conflicts_with == (second.id,)


def test_doubtful_lessons_wait_for_a_confirmation(store):
    lesson = add(store, "When a CSV fails to decode, prefer utf-8-sig.", doubtful=True).lesson
    assert store.select("csv", now=T0) == []
    store.confirm(lesson.id)
    assert store.select("csv", now=T0)[0].id == lesson.id


# --- the database ---------------------------------------------------------------------------------


def test_migrations_are_named_recorded_once_and_share_the_table(tmp_path):
    path = tmp_path / "hindsight.db"
    LessonStore(path).close()
    LessonStore(path).close()
    conn = sqlite3.connect(path)
    names = [r[0] for r in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")]
    assert names == ["lessons-0001"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_it_shares_the_database_with_the_trace_store(tmp_path):
    trace_store = pytest.importorskip("bot.hindsight.traces")
    path = tmp_path / "hindsight.db"
    with trace_store.TraceStore(path) as traces, LessonStore(path) as lessons:
        lesson = lessons.add(Lesson.new("csv", "Prefer utf-8-sig.", now=T0)).lesson
        assert set(traces.migrations()) >= {"trace-0001-events", "lessons-0001"}
    with LessonStore(path) as lessons:
        assert lessons.get(lesson.id).content == "Prefer utf-8-sig."


@pytest.mark.parametrize("call", [
    lambda s: s.add(Lesson.new("CSV Files", "Prefer utf-8-sig.")),
    lambda s: s.add(Lesson.new("csv", "   ")),
    lambda s: s.select("csv", 0),
    lambda s: s.confirm("lesson-9999"),
    lambda s: s.expire("nope"),
])
def test_bad_input_is_refused_and_nothing_is_stored(store, call):
    with pytest.raises(BadInput):
        call(store)
    assert store.list() == []


# --- the CLI --------------------------------------------------------------------------------------


def run_cli(root, *args):
    """(exit code, stdout) through the real error boundary once `lessons` is wired, else click's runner."""
    from bot.cli.main import cli, run

    if "lessons" in cli.commands:
        code = run(["--root", str(root), "lessons", *args])
        return code, None
    result = CliRunner().invoke(lessons_cli.group, list(args), obj=Context(root))
    exc = result.exception
    if isinstance(exc, ReplaybookError):
        return exc.exit_code, result.output
    assert exc is None or isinstance(exc, SystemExit), result.output
    return result.exit_code, result.output


def cli_out(root, capsys, *args):
    capsys.readouterr()
    code, out = run_cli(root, *args)
    return code, out if out is not None else capsys.readouterr().out


def test_cli_list_inject_confirm_expire(root, capsys):
    with LessonStore(root / DB_FILE) as s:
        first = add(s, "When a CSV fails to decode, prefer utf-8-sig.", at=datetime.now(timezone.utc)).lesson
        flagged = add(s, "Avoid utf-8-sig for files without a BOM.", at=datetime.now(timezone.utc)).lesson
    code, out = cli_out(root, capsys, "list", "--task-type", "csv")
    assert code == 0 and first.id in out and "conflict" in out
    code, out = cli_out(root, capsys, "inject", "--task-type", "csv")
    assert code == 0 and first.id in out and flagged.id not in out and out.rstrip().endswith(REMINDER)
    code, out = cli_out(root, capsys, "inject", "--task-type", "csv", "--json")
    assert [x["id"] for x in json.loads(out)] == [first.id] and json.loads(out)[0]["hit_count"] == 2
    assert cli_out(root, capsys, "confirm", flagged.id)[0] == 0
    assert cli_out(root, capsys, "expire", first.id)[0] == 0
    code, out = cli_out(root, capsys, "list", "--json")
    states = {x["id"]: x["state"] for x in json.loads(out)}
    assert states == {first.id: "expired", flagged.id: "confirmed"}


def test_cli_without_a_database_lists_nothing_and_creates_nothing(root, capsys):
    assert cli_out(root, capsys, "list")[1].strip() == "no lessons"
    assert cli_out(root, capsys, "inject", "--task-type", "csv") == (0, "")
    assert cli_out(root, capsys, "confirm", "lesson-0001")[0] == 2
    assert not (root / DB_FILE).exists()


def test_a_file_that_is_not_a_database_is_bad_input(tmp_path):
    path = tmp_path / "hindsight.db"
    path.write_text("not sqlite at all, just some words that fill the header page " * 20)
    with pytest.raises(BadInput, match="not a usable hindsight database"):
        LessonStore(path)


@pytest.mark.parametrize("args", [
    ("confirm", "lesson-0042"),
    ("expire", "lesson-0042"),
    ("inject", "--task-type", "Not A Slug"),
    ("inject", "--task-type", "csv", "--max", "0"),
    ("list", "--task-type", "Not A Slug"),
])
def test_cli_bad_input_exits_2(root, capsys, args):
    LessonStore(root / DB_FILE).close()
    assert cli_out(root, capsys, *args)[0] == 2


def test_every_lessons_command_has_help():
    for command in [lessons_cli.group, *lessons_cli.group.commands.values()]:
        assert (command.help or "").strip()
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"{command.name} {param.opts[0]} has no help"
