"""The trace store's write side: ``Recorder`` with its volume controls, and replay trace import.

See the package docstring (``bot.hindsight.traces``) for the volume controls.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from bot.errors import BadInput
from bot.hindsight.traces.store import (
    DEFAULT_NOISE,
    REPR_MARKER,
    SECTIONS,
    TraceStore,
    utc_text,
)


class _Encoder:
    """JSON text of one event's sections, truncated, never raising."""

    def __init__(self, max_chars: int | None, max_items: int | None):
        self.max_chars = max_chars
        self.max_items = max_items
        self.truncated = False

    def encode(self, value: Any) -> str | None:
        if value is None:
            return None
        try:
            text = _dumps(value)
        except (TypeError, ValueError, RecursionError):
            text = _dumps(_sanitise(value, set(), 0))
        return self.fit(text)

    def fit(self, text: str | None) -> str | None:
        """``text`` (one section's JSON) with long strings and lists cut, if it is over max_chars."""
        if text is None or self.max_chars is None or len(text) <= self.max_chars:
            return text  # nothing inside can be longer than the whole
        before = self.truncated
        self.truncated = False
        cut = self._cut(json.loads(text))
        changed, self.truncated = self.truncated, before or self.truncated
        return _dumps(cut) if changed else text

    def _cut(self, value: Any) -> Any:
        if isinstance(value, str):
            if len(value) > self.max_chars:
                self.truncated = True
                return value[: self.max_chars] + f"…[+{len(value) - self.max_chars} chars]"
            return value
        limit = self.max_items
        if isinstance(value, list):
            items = [self._cut(v) for v in (value if limit is None else value[:limit])]
            if limit is not None and len(value) > limit:
                self.truncated = True
                items.append(f"…[+{len(value) - limit} items]")
            return items
        if isinstance(value, dict):
            pairs = list(value.items())
            out = {k: self._cut(v) for k, v in (pairs if limit is None else pairs[:limit])}
            if limit is not None and len(pairs) > limit:
                self.truncated = True
                out["…"] = f"+{len(pairs) - limit} keys"
            return out
        return value


def _repr_marker(value: Any) -> dict[str, str]:
    try:
        text = repr(value)
    except Exception as err:  # a broken __repr__ must not lose the event
        text = f"<unrepresentable {type(value).__name__}: {type(err).__name__}>"
    return {REPR_MARKER: text}


def _make_json_chunks():
    """``chunks(value, 0)``: the compact JSON text of ``value`` in pieces; non-ASCII kept, NaN refused,
    unknown types as repr markers.

    The C encoder is built once and called directly: ``JSONEncoder.encode``
    builds it again on every call, about a quarter of the encoding time.
    Same output and errors. check_circular is off (faster); a cycle then ends
    in RecursionError, which the callers catch and turn into repr markers.
    """
    encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_repr_marker,
                               check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator (e.g. PyPy)
        return lambda value, _level: (encoder.encode(value),)
    return make(None, encoder.default, json.encoder.encode_basestring, None, encoder.key_separator,
                encoder.item_separator, False, False, False)


_json_chunks = _make_json_chunks()


def _dumps(value: Any) -> str:
    return "".join(_json_chunks(value, 0))


def _sanitise(value: Any, seen: set[int], depth: int) -> Any:
    """A JSON-safe copy: str keys, no NaN, no cycles, no unknown types (those become repr markers)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else _repr_marker(value)
    if isinstance(value, (dict, list, tuple)):
        if id(value) in seen or depth > 50:
            return {REPR_MARKER: "<cycle or too deep>"}
        seen = seen | {id(value)}
        if isinstance(value, dict):
            return {(k if isinstance(k, str) else repr(k)): _sanitise(v, seen, depth + 1) for k, v in value.items()}
        return [_sanitise(v, seen, depth + 1) for v in value]
    return _repr_marker(value)


# -- recording -------------------------------------------------------------------------------


def is_failure(result: Any) -> bool:
    return isinstance(result, dict) and str(result.get("status", "")).lower() in ("failed", "error")


class Recorder:
    """Buffers events and writes them in batches; see the module docstring for the volume controls.

    Use it as a context manager (or call ``close``) so the last batch is
    written and long tasks are sampled. ``noise=()``, ``max_chars=None`` and
    ``sample_over=None`` record everything as given.
    """

    def __init__(self, store: TraceStore | Path | str, *, batch_size: int = 1000, max_chars: int | None = 500,
                 max_items: int | None = 50, noise: Iterable[str] = DEFAULT_NOISE, sample_over: int | None = 500):
        self._owns_store = not isinstance(store, TraceStore)
        self.store = TraceStore(store) if self._owns_store else store
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.max_items = max_items
        self.noise = frozenset(noise)
        self.sample_over = sample_over
        self._rows: list[tuple] = []
        self._stats: dict[str, list[int]] = {}
        self._touched: set[str] = set()

    def record(self, task_id: str, event: Mapping[str, Any], timestamp: datetime | str) -> bool:
        """Buffer one event; return False when the volume controls dropped it as noise."""
        row, truncated = self.row(task_id, event, timestamp)
        stats = self._stats.get(task_id)
        if stats is None:  # not setdefault: its default list would be built on every call
            stats = self._stats[task_id] = [0, 0, 0]
        stats[0] += 1
        if row is None:
            stats[1] += 1
            return False
        stats[2] += truncated
        self._rows.append(row)
        if len(self._rows) >= self.batch_size:
            self.flush()
        return True

    def row(self, task_id: str, event: Mapping[str, Any], timestamp: datetime | str) -> tuple[tuple | None, bool]:
        """The row to store for ``event`` (None if it is noise) and whether anything was truncated."""
        if not isinstance(task_id, str) or not task_id:
            raise BadInput(f"task_id {task_id!r} must be a non-empty string")
        if type(event) is not dict and not isinstance(event, Mapping):
            raise BadInput(f"event for task {task_id} is a {type(event).__name__}; pass a mapping with `type`")
        ts = utc_text(timestamp)
        get = event.get
        event_type = str(get("type") or get("event_type") or "unknown")
        if event_type in self.noise and not self._is_key(event):
            return None, False
        # Each section is encoded once; a section within max_chars (most of them) cannot need cutting,
        # so it is stored as encoded. This runs for every event: _dumps is inlined.
        chunks, join = _json_chunks, "".join
        try:
            a, i, d, r = [None if (value := get(name)) is None else join(chunks(value, 0)) for name in SECTIONS]
        except (TypeError, ValueError, RecursionError):  # unencodable content: the careful path
            encoder = _Encoder(self.max_chars, self.max_items)
            row = (task_id, ts, event_type, *(encoder.encode(get(name)) for name in SECTIONS))
            return row, encoder.truncated
        limit = self.max_chars
        if limit is None or ((a is None or len(a) <= limit) and (i is None or len(i) <= limit)
                             and (d is None or len(d) <= limit) and (r is None or len(r) <= limit)):
            return (task_id, ts, event_type, a, i, d, r), False
        encoder = _Encoder(limit, self.max_items)
        return (task_id, ts, event_type, encoder.fit(a), encoder.fit(i), encoder.fit(d), encoder.fit(r)), \
            encoder.truncated

    @staticmethod
    def _is_key(event: Mapping[str, Any]) -> bool:
        result = event.get("result")
        return bool(event.get("decision")) or is_failure(result) or (
            isinstance(result, dict) and bool(result.get("anomaly")))

    def flush(self) -> None:
        if not self._rows and not self._stats:
            return
        rows, stats = self._rows, self._stats
        self._rows, self._stats = [], {}
        self.store.write(rows, stats)
        self._touched.update(stats)

    def close(self) -> None:
        try:
            self.flush()
            if self.sample_over is not None:
                for task_id in sorted(self._touched):
                    if self.store.count(task_id) > self.sample_over:
                        self.store.compact(task_id, keep=self.sample_over)
            self._touched.clear()
        finally:
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- replay traces ---------------------------------------------------------------------------


def import_trace(store: TraceStore, path: Path | str, task_id: str | None = None, **recorder_options: Any) -> int:
    """Load a replay run (its folder or its ``trace.jsonl``) into the store as one task; return the event count.

    The task id defaults to the run folder's name. Re-importing replaces the
    task's events. Mapping: ``command`` (failed when exit code != 0),
    ``tool_call`` (a decision; failed when ``is_error``), ``model_call``,
    ``run_start``, ``file_change``, ``agent_output`` and ``run_end`` (failed
    when the run failed).
    """
    from bot.replay.trace.events import read_trace

    trace = _trace_file(path)
    task = task_id or replay_task_id(path)
    events = read_trace(trace)
    start = next((e.started_at for e in events if e.kind == "run_start"), None)
    start = start or datetime.fromtimestamp(trace.stat().st_mtime, timezone.utc)
    recorder = Recorder(store, **{"noise": (), **recorder_options})
    rows = []
    for event in events:
        mapped, when = _from_replay(event, start)
        row, _ = recorder.row(task, mapped, when)
        if row is not None:
            rows.append(row)
    store.write(rows, {task: (len(events), len(events) - len(rows), 0)}, replace_task=task)
    return len(rows)


def replay_task_id(path: Path | str) -> str:
    """The default task id of a replay run: its folder's name (or the trace file's stem)."""
    trace = _trace_file(path)
    return trace.parent.name if trace.name == "trace.jsonl" else trace.stem


def _trace_file(path: Path | str) -> Path:
    path = Path(path)
    return path / "trace.jsonl" if path.is_dir() else path


def _from_replay(event: Any, start: datetime) -> tuple[dict[str, Any], datetime]:
    when = start + timedelta(seconds=event.t or 0.0)
    kind = event.kind
    if kind == "command":
        failed = event.exit_code != 0
        result = {"status": "failed" if failed else "ok", "exit_code": event.exit_code,
                  "duration_ms": event.duration_ms}
        if failed:
            result["error_type"] = "ExitCode"
            result["error_message"] = f"exit code {event.exit_code}"
        mapped = {"input": {"argv": event.argv, "cwd": event.cwd, "depth": event.depth}, "result": result}
        when = event.started_at
    elif kind == "tool_call":
        mapped = {"input": {"name": event.name, "input": event.input},
                  "decision": {"chosen_action": event.name},
                  "result": {"status": "failed" if event.is_error else "ok", "output": event.output_excerpt}}
    elif kind == "model_call":
        mapped = {"agent_state": {"model": event.model},
                  "result": {"status": "ok", "input_tokens": event.input_tokens, "output_tokens": event.output_tokens}}
    elif kind == "run_end":
        mapped = {"result": {"status": "failed" if event.status == "failed" else "ok", "run_status": event.status,
                             "error_message": event.reason}}
    else:
        mapped = {"input": event.model_dump(mode="json", exclude={"kind", "seq", "t"})}
    return {"type": kind, **mapped}, when
