"""One SQLite base for the stores that share the hindsight database (traces, lessons).

A store names its migration set, as sqlite-utils' ``Migrations(name)`` does: ``Migrations("trace")``
and ``Migrations("lessons")`` each hold an append-only list of steps, and a step is recorded in the
one migrations table as ``<set>-<step>`` (``trace-0001-events``, ``lessons-0001``) when it has run.
Several sets live in one file without knowing of each other; each applies only its own steps.

The table is ``trace_migrations`` (the trace store had it first; databases written before this
module keep working, as their recorded names are the same).

:class:`SQLiteStore` opens the file in WAL mode with a busy timeout (several processes may write),
applies its class's migrations in one transaction, and gives ``BEGIN IMMEDIATE`` transactions (the
write lock is taken up front, so read-then-write cannot race and concurrent writers wait, not fail).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar, Iterator

from bot.errors import BadInput

MIGRATIONS_TABLE = "trace_migrations"
MIGRATIONS_DDL = f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"


class Migrations:
    """A named, append-only set of SQL migrations. Never edit an applied step; add the next one."""

    def __init__(self, name: str):
        self.name = name
        self.steps: list[tuple[str, tuple[str, ...]]] = []

    def add(self, step: str, *statements: str) -> "Migrations":
        """Append step ``step`` (its SQL statements, run in order); returns the set, to chain."""
        if any(s == step for s, _ in self.steps):
            raise ValueError(f"migration {self.name}-{step} is defined twice")
        self.steps.append((step, statements))
        return self

    @property
    def names(self) -> list[str]:
        """The names the steps are recorded under: ``<set>-<step>``."""
        return [f"{self.name}-{step}" for step, _ in self.steps]

    def pending(self, conn: sqlite3.Connection) -> list[str]:
        conn.execute(MIGRATIONS_DDL)
        done = {row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")}
        return [name for name in self.names if name not in done]

    def apply(self, conn: sqlite3.Connection) -> list[str]:
        """Run the steps not yet recorded, in order, inside the caller's transaction; the names run."""
        todo = set(self.pending(conn))
        ran = []
        for name, (_, statements) in zip(self.names, self.steps):
            if name not in todo:
                continue
            for sql in statements:
                for statement in filter(str.strip, sql.split(";")):
                    conn.execute(statement)
            conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                         (name, datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")))
            ran.append(name)
        return ran


def applied(conn: sqlite3.Connection) -> list[str]:
    """Every migration recorded in the database, of any set, in the order they ran."""
    return [row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY rowid")]


class SQLiteStore:
    """A store that owns one SQLite connection and migrates its own set on open."""

    migration_set: ClassVar[Migrations]
    synchronous: ClassVar[str | None] = None  # e.g. "NORMAL": flushed at checkpoints, not each commit

    def __init__(self, path: Path | str, *, timeout_s: float):
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        try:
            self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            self._conn.execute("PRAGMA journal_mode=WAL")
            if self.synchronous:
                self._conn.execute(f"PRAGMA synchronous={self.synchronous}")
            with self._transaction() as conn:
                self.migration_set.apply(conn)
        except sqlite3.DatabaseError as err:
            if self._conn is not None:
                self._conn.close()
            raise self._damaged(err) from None

    def _damaged(self, err: sqlite3.DatabaseError) -> BadInput:
        """The one-line error for a file SQLite cannot use; nothing was changed."""
        return BadInput(f"{self.path}: not a usable database ({err}); nothing was changed. "
                        f"Move it aside (mv {self.path} {self.path}.damaged) and a new one is created")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT (ROLLBACK on any exception)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def migrations_applied(self) -> list[str]:
        return applied(self._conn)
