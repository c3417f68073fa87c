"""Lessons: what hindsight learned from one run, scoped to a task type, kept in SQLite.

A lesson is injected into later runs of the same task type: at most three,
ranked by hits then value, each lesson valid for 30 days unless a person
confirmed it. Expired lessons are kept for people to read; they are injected
again only if confirmed.

Before a lesson is stored it is compared with the active lessons of its task
type (see ``find_conflicts``). A duplicate or a contradiction is stored
*flagged* (``conflicts_with``) and reported, never silently added: a flagged
lesson is not injected until a person confirms it.

``LessonStore`` owns the ``lessons`` table in the hindsight database
(``<root>/.replaybook/hindsight.db``), which it shares with the event store.
Both are ``bot.hindsight.database.SQLiteStore``s: each applies its own named migration
set, recorded in the one migrations table; ours are named ``lessons-NNNN``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

from bot._util import records
from bot._util.similarity import STOP_WORDS, jaccard, terms
from bot.errors import BadInput
from bot.hindsight.database import MIGRATIONS_DDL, MIGRATIONS_TABLE, Migrations, SQLiteStore

__all__ = [
    "DB_FILE", "Conflict", "Lesson", "LessonStore", "MIGRATIONS", "MIGRATIONS_DDL", "MIGRATIONS_TABLE", "REMINDER",
    "VALID_DAYS", "check_task_type", "directives", "find_conflicts", "render_injection",
]

DB_FILE = ".replaybook/hindsight.db"
VALID_DAYS = 30
MAX_INJECTED = 3
REMINDER = ("The facts of the current task come before these lessons: "
            "if a lesson does not fit what you see, follow what you see.")

#: Append-only, recorded as ``lessons-<step>`` in the database's one migrations table (bot.hindsight.database).
MIGRATIONS = Migrations("lessons").add(
    "0001",
    """CREATE TABLE lessons (
        id TEXT PRIMARY KEY,
        task_type TEXT NOT NULL,
        content TEXT NOT NULL,
        source_task TEXT,
        created TEXT NOT NULL,
        valid_until TEXT NOT NULL,
        hit_count INTEGER NOT NULL DEFAULT 0,
        confirmed INTEGER NOT NULL DEFAULT 0,
        value REAL NOT NULL DEFAULT 0,
        doubtful INTEGER NOT NULL DEFAULT 0,
        conflicts_with TEXT NOT NULL DEFAULT '[]'
    )""",
    "CREATE INDEX lessons_by_task_type ON lessons(task_type)",
)

_COLUMNS = ("id", "task_type", "content", "source_task", "created", "valid_until", "hit_count",
            "confirmed", "value", "doubtful", "conflicts_with")
_SLUG = re.compile(records.SLUG)


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        raise BadInput(f"time {value.isoformat()} has no time zone; pass a UTC time")
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


@dataclass(frozen=True)
class Lesson:
    """One lesson. ``value`` scores the reflection it came from (0..1)."""

    task_type: str
    content: str
    created: datetime
    valid_until: datetime
    source_task: str | None = None
    id: str = ""  # given by the store
    hit_count: int = 0
    confirmed: bool = False
    value: float = 0.0
    doubtful: bool = False
    conflicts_with: tuple[str, ...] = ()

    @classmethod
    def new(cls, task_type: str, content: str, *, source_task: str | None = None, now: datetime | None = None,
            valid_days: int = VALID_DAYS, value: float = 0.0, doubtful: bool = False) -> "Lesson":
        created = (now or utc_now()).astimezone(timezone.utc)
        return cls(task_type=task_type, content=" ".join(content.split()), created=created,
                   valid_until=created + timedelta(days=valid_days), source_task=source_task,
                   value=value, doubtful=doubtful)

    def expired(self, now: datetime) -> bool:
        return self.valid_until <= now

    @property
    def flagged(self) -> bool:
        return bool(self.conflicts_with)

    def injectable(self, now: datetime) -> bool:
        """Confirmed lessons always; others only while unexpired, not doubtful and not in conflict."""
        if self.confirmed:
            return True
        return not self.expired(now) and not self.doubtful and not self.flagged

    def state(self, now: datetime) -> str:
        """One word for people: confirmed, expired, conflict, doubtful or active."""
        if self.confirmed:
            return "confirmed"
        if self.expired(now):
            return "expired"
        if self.flagged:
            return "conflict"
        return "doubtful" if self.doubtful else "active"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created"] = _iso(self.created)
        data["valid_until"] = _iso(self.valid_until)
        data["conflicts_with"] = list(self.conflicts_with)
        return data


@dataclass(frozen=True)
class Conflict:
    """An existing lesson a new one duplicates or contradicts."""

    id: str
    kind: Literal["duplicate", "contradiction"]
    reason: str


@dataclass
class Added:
    lesson: Lesson
    conflicts: list[Conflict] = field(default_factory=list)


# --- conflict detection --------------------------------------------------------------------------
#
# Heuristic, by words, no model:
# - duplicate: the two lessons share most of their content words (Jaccard >= 0.6 over lowercase
#   words of 3+ characters, stop words dropped).
# - contradiction: one lesson says to do something with a subject ("use X", "prefer X",
#   "always run X", "try X") and the other says not to ("avoid X", "never X", "do not use X",
#   "don't X", "stop X", "... instead of X", "... rather than X"). The subject is the first word
#   after the directive (articles skipped), so "prefer utf-8-sig" contradicts "avoid utf-8-sig".
# Limits: English only; no synonyms ("use X" vs "skip X" is missed), no scope ("never run pytest
# from the root" vs "always run pytest in packages/api" share the subject `pytest` and are flagged
# although they agree). That errs towards flagging: a flagged lesson costs a person one `confirm`,
# a missed contradiction confuses the agent.

DUPLICATE_OVERLAP = 0.6
_SUBJECT = r"(?:(?:the|a|an|any)\s+)?([a-z0-9][\w./+:=-]*)"
_VERBS = r"(?:use|using|run|running|call|calling|try|trying|rely\s+on|relying\s+on|add|adding|set|setting)"
_NEGATIVE = re.compile(
    rf"\b(?:avoid|never|do\s+not|don'?t|must\s+not|should\s+not|shouldn'?t|stop|no\s+longer)\s+"
    rf"(?:{_VERBS}\s+)?{_SUBJECT}|\b(?:instead\s+of|rather\s+than)\s+(?:{_VERBS}\s+)?{_SUBJECT}")
_POSITIVE = re.compile(rf"\b(?:use|prefer|always|try|run|call)\s+(?:{_VERBS}\s+)?{_SUBJECT}")


def directives(text: str) -> tuple[set[str], set[str]]:
    """(subjects it says to use, subjects it says to avoid)."""
    lowered = text.lower()
    negative = {(m.group(1) or m.group(2)).strip("._-") for m in _NEGATIVE.finditer(lowered)}
    rest = _NEGATIVE.sub(" ", lowered)  # "do not use X" must not also read as "use X"
    positive = {m.group(1).strip("._-") for m in _POSITIVE.finditer(rest)}
    return positive - STOP_WORDS, negative - STOP_WORDS


def find_conflicts(content: str, existing: list[Lesson]) -> list[Conflict]:
    """The lessons in ``existing`` that ``content`` contradicts or duplicates."""
    words = terms(content)
    pos, neg = directives(content)
    found = []
    for other in existing:
        other_pos, other_neg = directives(other.content)
        opposed = sorted((pos & other_neg) | (neg & other_pos))
        if opposed:
            found.append(Conflict(other.id, "contradiction",
                                  f"opposite advice on {', '.join(opposed)} than {other.id}"))
            continue
        overlap = jaccard(words, terms(other.content), empty=1.0)
        if overlap >= DUPLICATE_OVERLAP:
            found.append(Conflict(other.id, "duplicate", f"{overlap:.0%} of its words repeat {other.id}"))
    return found


def render_injection(lessons: list[Lesson]) -> str:
    """The lessons as text for a prompt, ending with the reminder; "" when there are none."""
    if not lessons:
        return ""
    lines = ["Lessons from past runs of this kind of task (hindsight):"]
    lines += [f"- [{lesson.id}] {lesson.content}" for lesson in lessons]
    lines.append(REMINDER)
    return "\n".join(lines) + "\n"


# --- the store -------------------------------------------------------------------------------------


class LessonStore(SQLiteStore):
    """The ``lessons`` table of the hindsight database. Each change is one transaction."""

    migration_set = MIGRATIONS

    def __init__(self, db_path: Path | str, *, timeout_s: float = 10.0):
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        super().__init__(db_path, timeout_s=timeout_s)

    def _damaged(self, err: sqlite3.DatabaseError) -> BadInput:
        return BadInput(f"{self.path}: not a usable hindsight database ({err}); nothing was changed. "
                        f"Move it aside (mv {self.path} {self.path}.damaged) and a new one is created")

    @classmethod
    def for_root(cls, root: Path) -> "LessonStore":
        return cls(Path(root) / DB_FILE)

    def __enter__(self) -> "LessonStore":
        return self

    # --- writes ---

    def add(self, lesson: Lesson, *, now: datetime | None = None) -> Added:
        """Store a new lesson; a duplicate or contradiction is stored flagged and reported."""
        _check(lesson)
        now = now or utc_now()
        with self._transaction() as conn:
            active = [x for x in self._select(conn, "WHERE task_type = ?", (lesson.task_type,))
                      if x.confirmed or not x.expired(now)]
            conflicts = find_conflicts(lesson.content, active)
            stored = replace(lesson, id=self._next_id(conn), conflicts_with=tuple(c.id for c in conflicts))
            row = stored.to_dict()
            row["conflicts_with"] = json.dumps(row["conflicts_with"])
            conn.execute(f"INSERT INTO lessons ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                         [row[c] for c in _COLUMNS])
        return Added(stored, conflicts)

    def confirm(self, lesson_id: str) -> Lesson:
        """A person vouches for the lesson: it is injected even when expired, doubtful or flagged.

        Confirming resolves its conflicts in its favour: the unconfirmed lessons it
        conflicts with are flagged in turn, so they stop being injected.
        """
        with self._transaction() as conn:
            lesson = self._get(conn, lesson_id)
            conn.execute("UPDATE lessons SET confirmed = 1 WHERE id = ?", (lesson_id,))
            for other in self._select(conn, "WHERE confirmed = 0 AND task_type = ?", (lesson.task_type,)):
                if other.id in lesson.conflicts_with or lesson_id in other.conflicts_with:
                    flags = sorted(set(other.conflicts_with) | {lesson_id})
                    conn.execute("UPDATE lessons SET conflicts_with = ? WHERE id = ?", (json.dumps(flags), other.id))
            return self._get(conn, lesson_id)

    def expire(self, lesson_id: str, *, now: datetime | None = None) -> Lesson:
        """Stop injecting a lesson now, even a confirmed one. It is kept, and can be confirmed again."""
        with self._transaction() as conn:
            lesson = self._get(conn, lesson_id)
            until = min(lesson.valid_until, now or utc_now())
            conn.execute("UPDATE lessons SET valid_until = ?, confirmed = 0 WHERE id = ?", (_iso(until), lesson_id))
            return self._get(conn, lesson_id)

    # --- reads ---

    def get(self, lesson_id: str) -> Lesson:
        return self._get(self._conn, lesson_id)

    def list(self, task_type: str | None = None, *, include_expired: bool = True,
             now: datetime | None = None) -> list[Lesson]:
        """Lessons, oldest first; without ``include_expired`` only unexpired or confirmed ones."""
        now = now or utc_now()
        if task_type is not None:
            check_task_type(task_type)
        where, args = ("WHERE task_type = ?", (task_type,)) if task_type else ("", ())
        found = self._select(self._conn, where, args)
        return [x for x in found if include_expired or x.confirmed or not x.expired(now)]

    def select(self, task_type: str, max_lessons: int = MAX_INJECTED, *, now: datetime | None = None) -> list[Lesson]:
        """The lessons ``inject`` would give, without counting a hit."""
        return self._choose(self._conn, task_type, max_lessons, now or utc_now())

    def take(self, task_type: str, max_lessons: int = MAX_INJECTED, *, now: datetime | None = None) -> list[Lesson]:
        """Choose the lessons for one run and count a hit on each, in one transaction."""
        now = now or utc_now()
        with self._transaction() as conn:
            chosen = self._choose(conn, task_type, max_lessons, now)
            conn.executemany("UPDATE lessons SET hit_count = hit_count + 1 WHERE id = ?", [(x.id,) for x in chosen])
        return [replace(x, hit_count=x.hit_count + 1) for x in chosen]

    def inject(self, task_type: str, max_lessons: int = MAX_INJECTED, *, now: datetime | None = None) -> str:
        """At most ``max_lessons`` (3) lessons as text for a prompt, ending with the reminder."""
        return render_injection(self.take(task_type, max_lessons, now=now))

    # --- internals ---

    def _choose(self, conn: sqlite3.Connection, task_type: str, max_lessons: int, now: datetime) -> list[Lesson]:
        check_task_type(task_type)
        if max_lessons < 1:
            raise BadInput(f"max lessons is {max_lessons}; inject at least 1 (the default is {MAX_INJECTED})")
        usable = [x for x in self._select(conn, "WHERE task_type = ?", (task_type,)) if x.injectable(now)]
        usable.sort(key=lambda x: (-x.hit_count, -x.value, -x.created.timestamp(), x.id))
        return usable[:max_lessons]

    def _select(self, conn: sqlite3.Connection, where: str, args: tuple) -> list[Lesson]:
        rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM lessons {where} ORDER BY created, id", args)
        return [_from_row(dict(zip(_COLUMNS, row))) for row in rows]

    def _get(self, conn: sqlite3.Connection, lesson_id: str) -> Lesson:
        found = self._select(conn, "WHERE id = ?", (lesson_id,))
        if not found:
            raise BadInput(f"lesson {lesson_id!r} not found in {self.path}; `replaybook lessons list` shows the ids")
        return found[0]

    @staticmethod
    def _next_id(conn: sqlite3.Connection) -> str:
        (top,) = conn.execute("SELECT MAX(CAST(SUBSTR(id, 8) AS INTEGER)) FROM lessons WHERE id LIKE 'lesson-%'").fetchone()
        return f"lesson-{(top or 0) + 1:04d}"


def check_task_type(task_type: str | None) -> None:
    if not _SLUG.match(task_type or ""):
        raise BadInput(f"task type {task_type!r} is not a slug; use lowercase letters, digits, '.', '_' "
                       "or '-', e.g. csv_batch_process")


def _check(lesson: Lesson) -> None:
    check_task_type(lesson.task_type)
    if not lesson.content.strip():
        raise BadInput("a lesson's content is empty; state the lesson in one sentence")
    if lesson.valid_until <= lesson.created:
        raise BadInput("a lesson's valid_until is not after its created time; give it at least one day")


def _from_row(row: dict[str, Any]) -> Lesson:
    return Lesson(
        id=row["id"], task_type=row["task_type"], content=row["content"], source_task=row["source_task"],
        created=_parse(row["created"]), valid_until=_parse(row["valid_until"]), hit_count=row["hit_count"],
        confirmed=bool(row["confirmed"]), value=row["value"], doubtful=bool(row["doubtful"]),
        conflicts_with=tuple(json.loads(row["conflicts_with"] or "[]")),
    )
