"""The trace store's database side: ``TraceStore``, its records, and the stored time form.

See the package docstring (``bot.hindsight.traces``) for the durability trade-off and the time form.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timezone
from itertools import chain
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from bot.errors import BadInput
from bot.hindsight.database import Migrations, SQLiteStore

DB_RELPATH = ".replaybook/hindsight.db"
SECTIONS = ("agent_state", "input", "decision", "result")
DEFAULT_NOISE = frozenset({"poll", "heartbeat", "status_poll", "progress"})
REPR_MARKER = "$repr"
_SQLITE_HEADER = b"SQLite format 3\x00"

#: Append-only, recorded as ``trace-<step>`` (see bot.hindsight.database).
MIGRATIONS = Migrations("trace").add("0001-events", """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            timestamp TEXT NOT NULL,
            event_type TEXT NOT NULL,
            agent_state TEXT,
            input TEXT,
            decision TEXT,
            result TEXT
        );
        CREATE INDEX events_task_time ON events(task_id, timestamp);
        CREATE INDEX events_task_type ON events(task_id, event_type);
    """).add("0002-task-stats", """
        CREATE TABLE trace_tasks (
            task_id TEXT PRIMARY KEY,
            received INTEGER NOT NULL DEFAULT 0,
            dropped INTEGER NOT NULL DEFAULT 0,
            truncated INTEGER NOT NULL DEFAULT 0,
            sampled_out INTEGER NOT NULL DEFAULT 0
        );
    """)


def default_path(root: Path) -> Path:
    return Path(root) / DB_RELPATH


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One stored event. ``event_type`` is its ``kind``; the four sections are decoded JSON (or None)."""

    seq: int
    task_id: str
    timestamp: str
    event_type: str
    agent_state: Any = None
    input: Any = None
    decision: Any = None
    result: Any = None

    @property
    def kind(self) -> str:
        return self.event_type

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "task_id": self.task_id, "timestamp": self.timestamp, "event_type": self.event_type,
            "agent_state": self.agent_state, "input": self.input, "decision": self.decision, "result": self.result,
        }


@dataclass(frozen=True, slots=True)
class TaskSummary:
    task_id: str
    events: int
    first: str
    last: str
    failures: int
    received: int
    dropped: int
    truncated: int
    sampled_out: int

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class Outline(NamedTuple):
    """The fields of one event that decide whether it is a key node."""

    seq: int
    timestamp: str
    event_type: str
    has_decision: bool
    chosen: Any
    alternatives: tuple | None
    switched: bool
    status: Any
    anomaly: bool
    expected_type: Any
    actual_type: Any
    output_type: str | None

    @classmethod
    def of(cls, e: StoredEvent) -> "Outline":
        d = e.decision if isinstance(e.decision, dict) else {}
        r = e.result if isinstance(e.result, dict) else {}
        alternatives = d.get("alternatives")
        return cls(e.seq, e.timestamp, e.event_type, bool(d), d.get("chosen_action"),
                   tuple(alternatives) if isinstance(alternatives, list) else None, d.get("switched") is True,
                   r.get("status"), r.get("anomaly") is True, r.get("expected_type"), r.get("actual_type"),
                   _json_type(r["output"]) if "output" in r else None)

    @property
    def failed(self) -> bool:
        return isinstance(self.status, str) and self.status.lower() in ("failed", "error")


_SQL_TYPES = {"real": "number", "text": "string", "true": "boolean", "false": "boolean"}
_ALTERNATIVES: dict[str, tuple | None] = {}


def _alternatives(text: str | None) -> tuple | None:
    """json_extract gives an array as JSON text; the few distinct ones are decoded once."""
    if text is None or not isinstance(text, str) or not text.startswith("["):
        return None
    if text not in _ALTERNATIVES:
        if len(_ALTERNATIVES) > 10_000:
            _ALTERNATIVES.clear()
        _ALTERNATIVES[text] = tuple(json.loads(text))
    return _ALTERNATIVES[text]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _event(row: tuple) -> StoredEvent:
    loads = json.loads
    return StoredEvent(row[0], row[1], row[2], row[3], *(loads(t) if t is not None else None for t in row[4:8]))


class TraceStore(SQLiteStore):
    """Owns the SQLite event store: opens, migrates, writes batches, reads tasks."""

    migration_set = MIGRATIONS
    synchronous = "NORMAL"

    def __init__(self, path: Path | str, *, create: bool = True, busy_timeout_ms: int = 30_000):
        path = Path(path)
        if not path.exists():
            if not create:
                raise BadInput(
                    f"{path}: no trace database here; record events first or run "
                    "`replaybook trace import RUN_DIR` (or pass --db)"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            _refuse_non_sqlite(path)
        super().__init__(path, timeout_s=busy_timeout_ms / 1000)

    def __enter__(self) -> "TraceStore":
        return self

    def migrations(self) -> list[str]:
        """Every migration recorded in the file (the lesson store's too), in the order they ran."""
        return self.migrations_applied()

    def _damaged(self, err: sqlite3.DatabaseError) -> BadInput:
        return self._corrupt(err)

    def _corrupt(self, err: sqlite3.DatabaseError) -> BadInput:
        return BadInput(
            f"{self.path}: the trace database is damaged or not a database ({err}). Nothing was changed. "
            f"Move it aside (mv {self.path} {self.path}.damaged) and a new one is created on the next run; "
            f"to keep what is readable: sqlite3 {self.path}.damaged .recover | sqlite3 {self.path}"
        )

    # -- writing ---------------------------------------------------------------------------

    def write(self, rows: Sequence[tuple], stats: Mapping[str, Sequence[int]] = (), *,
              replace_task: str | None = None) -> None:
        """Insert ``rows`` and add ``stats`` in one transaction.

        A row is (task_id, timestamp, event_type, 4 JSON texts), or packed as
        (task_id, timestamp, event_type, one JSON array of the 4 sections),
        which SQLite splits into the columns.

        ``stats`` maps task_id to (received, dropped, truncated). ``replace_task``
        first removes that task's events and counts (a re-import).
        """
        try:
            with self._transaction():
                if replace_task is not None:
                    self._conn.execute("DELETE FROM events WHERE task_id = ?", (replace_task,))
                    self._conn.execute("DELETE FROM trace_tasks WHERE task_id = ?", (replace_task,))
                _insert_rows(self._conn, [r for r in rows if len(r) == 7])
                packed = [r for r in rows if len(r) == 4]
                if packed:
                    self._conn.executemany(_INSERT_PACKED, packed)
                self._conn.executemany(
                    "INSERT INTO trace_tasks (task_id, received, dropped, truncated) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(task_id) DO UPDATE SET received = received + excluded.received, "
                    "dropped = dropped + excluded.dropped, truncated = truncated + excluded.truncated",
                    [(task, *counts) for task, counts in dict(stats).items()],
                )
        except sqlite3.DatabaseError as err:
            raise self._corrupt(err) from None

    def compact(self, task_id: str, *, keep: int = 500) -> int:
        """Sample a task down to about ``keep`` events; return how many were removed.

        Kept: every failure, every anomaly, every chronicle node and the
        decisions that make a hesitation, the first and last event, and an
        evenly spaced (so deterministic) sample of the rest to fill ``keep``.
        If the must-keep events alone exceed ``keep``, only they are kept.
        """
        from bot.hindsight.chronicle import must_keep

        events = self.outline(task_id)
        if len(events) <= keep:
            return 0
        kept = must_keep(events)
        rest = [e.seq for e in events if e.seq not in kept]
        room = max(0, keep - len(kept))
        if room and rest:
            kept |= {rest[(i * len(rest)) // room] for i in range(min(room, len(rest)))}
        drop = [(e.seq,) for e in events if e.seq not in kept]
        try:
            with self._transaction():
                self._conn.executemany("DELETE FROM events WHERE seq = ?", drop)
                self._conn.execute(
                    "INSERT INTO trace_tasks (task_id, sampled_out) VALUES (?, ?) ON CONFLICT(task_id) "
                    "DO UPDATE SET sampled_out = sampled_out + excluded.sampled_out", (task_id, len(drop)),
                )
        except sqlite3.DatabaseError as err:
            raise self._corrupt(err) from None
        return len(drop)

    # -- reading ---------------------------------------------------------------------------

    def count(self, task_id: str) -> int:
        return self._query("SELECT COUNT(*) FROM events WHERE task_id = ?", (task_id,))[0][0]

    def events(self, task_id: str, *, sections: Iterable[str] = SECTIONS) -> list[StoredEvent]:
        """The task's events in time order (ties: insertion order); unlisted sections are left None."""
        wanted = [s for s in SECTIONS if s in set(sections)]
        cols = ", ".join(["seq", "task_id", "timestamp", "event_type", *wanted])
        rows = self._query(f"SELECT {cols} FROM events WHERE task_id = ? ORDER BY timestamp, seq", (task_id,))
        if len(wanted) == len(SECTIONS):
            return [_event(row) for row in rows]
        loads = json.loads
        out = []
        for row in rows:
            decoded = {name: (loads(text) if text is not None else None) for name, text in zip(wanted, row[4:])}
            out.append(StoredEvent(row[0], row[1], row[2], row[3], **decoded))
        return out

    def outline(self, task_id: str) -> list["Outline"]:
        """What the chronicle reads of each event, in time order, extracted by SQLite (no JSON decoded here)."""
        rows = self._query(
            "SELECT seq, timestamp, event_type, "
            "json_type(decision) = 'object' AND decision != '{}', json_extract(decision, '$.chosen_action'), "
            "json_extract(decision, '$.alternatives'), json_type(decision, '$.switched') = 'true', "
            "json_extract(result, '$.status'), json_type(result, '$.anomaly') = 'true', "
            "json_extract(result, '$.expected_type'), json_extract(result, '$.actual_type'), "
            "json_type(result, '$.output') "
            "FROM events WHERE task_id = ? ORDER BY timestamp, seq", (task_id,))
        return [Outline(*row[:4], row[4], _alternatives(row[5]), *row[6:11], _SQL_TYPES.get(row[11], row[11]))
                for row in rows]

    def events_at(self, seqs: Iterable[int]) -> dict[int, StoredEvent]:
        """Full events by seq (for the few a chronicle summarises)."""
        wanted = sorted(set(seqs))
        out: dict[int, StoredEvent] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            rows = self._query("SELECT seq, task_id, timestamp, event_type, agent_state, input, decision, result "
                               f"FROM events WHERE seq IN ({', '.join('?' * len(chunk))})", tuple(chunk))
            out.update((row[0], _event(row)) for row in rows)
        return out

    def tasks(self) -> list[TaskSummary]:
        rows = self._query(
            "SELECT e.task_id, COUNT(*), MIN(e.timestamp), MAX(e.timestamp), "
            "SUM(CASE WHEN json_extract(e.result, '$.status') IN ('failed', 'error') THEN 1 ELSE 0 END), "
            "COALESCE(t.received, 0), COALESCE(t.dropped, 0), COALESCE(t.truncated, 0), COALESCE(t.sampled_out, 0) "
            "FROM events e LEFT JOIN trace_tasks t ON t.task_id = e.task_id "
            "GROUP BY e.task_id ORDER BY MIN(e.timestamp), e.task_id"
        )
        return [TaskSummary(*row) for row in rows]

    def check(self) -> None:
        """Run SQLite's integrity check; a damaged file is a ``BadInput`` listing what is wrong."""
        try:
            problems = [r[0] for r in self._conn.execute("PRAGMA integrity_check")]
        except sqlite3.DatabaseError as err:
            error = self._corrupt(err)
            error.problems = [str(err)]
            raise error from None
        if problems != ["ok"]:
            error = self._corrupt(sqlite3.DatabaseError("integrity check failed"))
            error.problems = problems[:20]
            raise error

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as err:
            raise self._corrupt(err) from None


def _refuse_non_sqlite(path: Path) -> None:
    """A file that is not SQLite is refused before SQLite touches it (it would write a WAL next to it)."""
    if path.is_dir():
        raise BadInput(f"{path}: is a folder, not a trace database; pass a file path with --db")
    with path.open("rb") as handle:
        head = handle.read(len(_SQLITE_HEADER))
    if head and head != _SQLITE_HEADER:
        raise BadInput(
            f"{path}: not a SQLite database (the file is truncated or overwritten); nothing was changed. "
            f"Move it aside (mv {path} {path}.damaged) and a new trace database is created on the next run."
        )


# -- timestamps ------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(timezone.utc)


def utc_text(when: datetime | str) -> str:
    """``2026-07-14T09:32:00.000000Z``: fixed width, so ordering the text orders the times.

    Fast paths, each giving exactly what the general path gives: a UTC
    ``datetime`` is formatted with its date, hour and minute taken from a small
    cache; a string already in this form is checked (pattern, and its date
    once) and returned as it is.
    """
    if type(when) is datetime and when.tzinfo is timezone.utc:  # the common case
        key = (((when.year * 13 + when.month) * 32 + when.day) * 24 + when.hour) * 60 + when.minute
        prefix = _MINUTES.get(key)
        if prefix is None:
            if len(_MINUTES) > 4096:
                _MINUTES.clear()
            prefix = _MINUTES[key] = when.isoformat()[:17]
        return f"{prefix}{when.second:02d}.{when.microsecond:06d}Z"
    if isinstance(when, str):
        if len(when) == 27 and _is_canonical(when):
            return when
        try:
            when = datetime.fromisoformat(when)
        except ValueError:
            raise BadInput(f"timestamp {when!r} is not ISO 8601; pass e.g. 2026-07-14T09:32:00.123456Z") from None
    if not isinstance(when, datetime):
        raise BadInput(f"timestamp {when!r} is not a datetime; pass datetime.now(timezone.utc)")
    if when.tzinfo is None or when.utcoffset() is None:
        raise BadInput(
            f"timestamp {when.isoformat()} has no timezone; pass an aware UTC time, "
            "e.g. datetime.now(timezone.utc), so clocks of different processes never mix"
        )
    if when.tzinfo is not timezone.utc:
        when = when.astimezone(timezone.utc)
    return when.isoformat(timespec="microseconds")[:-6] + "Z"


_MINUTES: dict[int, str] = {}  # "2026-07-14T09:32:" by date, hour and minute
_CANONICAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z").fullmatch
_DAYS: set[str] = set()  # dates of canonical strings that are real dates


def _is_canonical(text: str) -> bool:
    """Whether ``text`` is a valid time already in the stored form (so parsing it would give it back)."""
    if _CANONICAL(text) is None:
        return False
    day = text[:10]
    if day not in _DAYS:
        try:
            date.fromisoformat(day)
        except ValueError:
            return False
        if len(_DAYS) > 4096:
            _DAYS.clear()
        _DAYS.add(day)
    return True


# -- encoding --------------------------------------------------------------------------------

_INSERT = ("INSERT INTO events (task_id, timestamp, event_type, agent_state, input, decision, result) "
           "VALUES (?, ?, ?, ?, ?, ?, ?)")
_BLOCK = 100  # rows per INSERT statement: 700 parameters, below SQLite's oldest limit of 999
_INSERT_BLOCK = _INSERT + ", (?, ?, ?, ?, ?, ?, ?)" * (_BLOCK - 1)


def _insert_rows(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """Insert 7-column rows in order, 100 to a statement.

    One statement per row cost SQLite about 3 µs a row more (measured with
    bench/hindsight_ingest.py's events); the rows of a block get ascending
    seqs in their order, as single inserts would.
    """
    whole = len(rows) - len(rows) % _BLOCK
    if whole:
        flat = chain.from_iterable
        conn.executemany(_INSERT_BLOCK, [tuple(flat(rows[i:i + _BLOCK])) for i in range(0, whole, _BLOCK)])
    if whole < len(rows):
        conn.executemany(_INSERT, rows[whole:])

_INSERT_PACKED = (
    "INSERT INTO events (task_id, timestamp, event_type, agent_state, input, decision, result) VALUES "
    "(?1, ?2, ?3, nullif(?4 -> '$[0]', 'null'), nullif(?4 -> '$[1]', 'null'), "
    "nullif(?4 -> '$[2]', 'null'), nullif(?4 -> '$[3]', 'null'))"
)
