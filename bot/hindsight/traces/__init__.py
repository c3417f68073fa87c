"""The trace store: every step an agent took, in SQLite, for hindsight.

``TraceStore`` owns one SQLite file (default ``.replaybook/hindsight.db``). It
opens in WAL mode with a busy timeout, so several processes can record at
once, and migrates on open (``bot.hindsight.database``): each migration of the ``trace``
set runs once, in one transaction, and is recorded in ``trace_migrations``. Durability trade-off:
``synchronous=NORMAL`` under WAL, so a commit is flushed to disk at the next
checkpoint, not at once. A crashed process loses nothing it committed; an OS
crash or power cut can lose the last few batches, but never corrupts the file.

``Recorder`` is the write side. The caller supplies each event's timestamp
(a timezone-aware datetime or ISO 8601 text with a zone; stored as UTC text
with microseconds, ``2026-07-14T09:32:00.123456Z``, so text order is time
order and clocks of different processes never mix; text already in that form
is taken as it is). Rows are buffered and written in batches, one transaction
per batch, 100 rows to an INSERT statement. Volume controls:

- *noise*: events whose type is in ``noise`` (``poll``, ``heartbeat``, …) and
  that are not decision points, failures or anomalies are dropped;
- *truncation*: strings longer than ``max_chars`` (500) are cut, and lists and
  objects longer than ``max_items`` (50) are shortened, each with a marker;
- *sampling*: when the recorder closes, a task with more than ``sample_over``
  (500) events is compacted (``TraceStore.compact``): every failure, anomaly
  and chronicle node is kept, plus an evenly spaced sample of the rest.

Values JSON cannot encode are stored as ``{"$repr": repr(value)}``; recording
never fails because of an event's content.
"""

from bot.hindsight.traces.recorder import Recorder, _dumps, import_trace, is_failure, replay_task_id
from bot.hindsight.traces.store import (
    DB_RELPATH,
    DEFAULT_NOISE,
    MIGRATIONS,
    REPR_MARKER,
    SECTIONS,
    Outline,
    StoredEvent,
    TaskSummary,
    TraceStore,
    default_path,
    utc_text,
)

__all__ = [
    "DB_RELPATH", "DEFAULT_NOISE", "MIGRATIONS", "REPR_MARKER", "SECTIONS", "Outline", "Recorder", "StoredEvent",
    "TaskSummary", "TraceStore", "_dumps", "default_path", "import_trace", "is_failure", "replay_task_id", "utc_text",
]
