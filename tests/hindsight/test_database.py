"""One SQLite base with named migration sets (bot/hindsight/database.py), shared by traces and lessons."""

import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bot.hindsight.database import MIGRATIONS_TABLE, Migrations, SQLiteStore
from bot.hindsight.lesson import Lesson, LessonStore
from bot.hindsight.traces import TraceStore

# Written by the stores as they were before bot/hindsight/database.py (commit 5e38796): two trace
# events and one lesson, in one file with one migrations table.
OLD_DB = Path(__file__).parents[1] / "data" / "db" / "hindsight-2026-12.db"


def test_a_database_written_before_the_base_opens_keeps_its_rows_and_runs_nothing_twice(tmp_path):
    path = tmp_path / "hindsight.db"
    shutil.copy(OLD_DB, path)
    with TraceStore(path) as traces, LessonStore(path) as lessons:
        assert traces.migrations() == ["trace-0001-events", "trace-0002-task-stats", "lessons-0001"]
        assert [e.event_type for e in traces.events("task-1")] == ["tool_call", "error"]
        assert [x.content for x in lessons.select("ci", now=datetime(2026, 12, 2, tzinfo=timezone.utc))] == [
            "Run pytest from packages/api, where pytest.ini lives."]
        added = lessons.add(Lesson.new("ci", "Prefer utf-8-sig for CSV files.",
                                       now=datetime(2026, 12, 2, tzinfo=timezone.utc)))
        assert added.lesson.id == "lesson-0002"


class _Notes(SQLiteStore):
    migration_set = (Migrations("notes")
                     .add("0001", "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
                     .add("0002-tags", "ALTER TABLE notes ADD COLUMN tag TEXT; CREATE INDEX notes_tag ON notes(tag)"))


def test_a_new_step_of_one_set_runs_once_and_leaves_the_other_sets_alone(tmp_path):
    path = tmp_path / "hindsight.db"
    shutil.copy(OLD_DB, path)
    _Notes(path, timeout_s=5).close()
    _Notes(path, timeout_s=5).close()
    conn = sqlite3.connect(path)
    names = [r[0] for r in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY rowid")]
    assert names == ["trace-0001-events", "trace-0002-task-stats", "lessons-0001", "notes-0001", "notes-0002-tags"]
    assert conn.execute("SELECT count(*) FROM events").fetchone() == (2,)
    conn.execute("INSERT INTO notes (text, tag) VALUES ('x', 'y')")


def test_a_step_defined_twice_is_refused():
    with pytest.raises(ValueError, match="notes-0001 is defined twice"):
        Migrations("notes").add("0001", "SELECT 1").add("0001", "SELECT 2")


def test_a_failing_step_changes_nothing(tmp_path):
    class Broken(SQLiteStore):
        migration_set = Migrations("broken").add("0001", "CREATE TABLE t (x)").add("0002", "NOT SQL")

    path = tmp_path / "x.db"
    with pytest.raises(Exception, match="not a usable database"):
        Broken(path, timeout_s=5)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 't'").fetchall() == []
