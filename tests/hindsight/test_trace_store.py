"""The trace store: ordering, batching, volume controls, concurrency, damaged files, replay imports."""

from __future__ import annotations

import json
import math
import multiprocessing
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from support.traces import T0, at, replay_run

from bot.errors import BadInput
from bot.hindsight import chronicle
from bot.hindsight.traces import (
    REPR_MARKER,
    Recorder,
    TraceStore,
    _dumps,
    import_trace,
    utc_text,
)


def step(action: str, alternatives=("a", "b"), status: str = "ok", **result) -> dict:
    return {
        "type": "action_executed",
        "agent_state": {"current_step": "file_parse"},
        "input": {"file_path": "/data/raw/sales.csv"},
        "decision": {"chosen_action": action, "alternatives": [a for a in alternatives if a != action]},
        "result": {"status": status, **result},
    }


@pytest.fixture
def db(tmp_path):
    return tmp_path / "hindsight.db"


def test_events_come_back_in_time_order_whatever_order_they_were_recorded_in(db):
    paris = timezone(timedelta(hours=2))
    with Recorder(db) as rec:
        rec.record("t", step("third"), at(3))
        rec.record("t", step("first"), at(1))
        rec.record("t", step("second-a"), (T0 + timedelta(seconds=2)).astimezone(paris))  # same instant, other zone
        rec.record("t", step("second-b"), "2026-07-14T09:32:02Z")  # same instant: insertion order breaks the tie
        rec.record("t", step("micro"), at(1.000001))
    with TraceStore(db) as store:
        events = store.events("t")
    assert [e.decision["chosen_action"] for e in events] == ["first", "micro", "second-a", "second-b", "third"]
    assert events[2].timestamp == "2026-07-14T09:32:02.000000Z"


@pytest.mark.parametrize("when", [datetime(2026, 7, 14, 9, 32), "2026-07-14T09:32:00", "yesterday", 1721000000])
def test_a_time_without_a_zone_is_refused(db, when):
    with Recorder(db) as rec, pytest.raises(BadInput, match="timestamp"):
        rec.record("t", step("x"), when)


def test_migrations_are_named_recorded_and_run_once(db):
    with TraceStore(db) as store:
        first = store.migrations()
    with TraceStore(db) as store:
        assert store.migrations() == first == ["trace-0001-events", "trace-0002-task-stats"]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"events_task_time", "events_task_type"} <= indexes


def test_writes_are_batched_and_close_writes_the_rest(db):
    rec = Recorder(db, batch_size=3)
    reader = TraceStore(db)
    rec.record("t", step("a"), at(0))
    rec.record("t", step("b"), at(1))
    assert reader.count("t") == 0
    rec.record("t", step("c"), at(2))
    assert reader.count("t") == 3
    rec.record("t", step("d"), at(3))
    rec.close()
    assert reader.count("t") == 4


def test_noise_is_dropped_unless_it_is_a_decision_or_a_failure(db):
    with Recorder(db) as rec:
        assert rec.record("t", {"type": "poll", "result": {"status": "ok"}}, at(0)) is False
        assert rec.record("t", {"type": "heartbeat"}, at(1)) is False
        assert rec.record("t", {"type": "poll", "result": {"status": "failed"}}, at(2)) is True
        assert rec.record("t", step("a"), at(3)) is True
    with TraceStore(db) as store:
        [summary] = store.tasks()
    assert (summary.events, summary.received, summary.dropped, summary.failures) == (2, 4, 2, 1)


def test_huge_fields_are_cut_with_a_marker(db):
    event = step("a", error_message="x" * 5_000_000)
    event["input"] = {"rows": list(range(100_000)), "nested": {"deep": ["y" * 10_000]}}
    with Recorder(db) as rec:
        rec.record("t", event, at(0))
    with TraceStore(db) as store:
        [stored] = store.events("t")
        [summary] = store.tasks()
    assert stored.result["error_message"].startswith("x" * 500)
    assert stored.result["error_message"].endswith("…[+4999500 chars]")
    assert stored.input["rows"][:3] == [0, 1, 2] and stored.input["rows"][-1] == "…[+99950 items]"
    assert len(stored.input["nested"]["deep"][0]) < 520
    assert summary.truncated == 1
    assert db.stat().st_size < 200_000


def test_values_json_cannot_encode_are_stored_as_their_repr(db):
    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr")

    cycle: dict = {"name": "loop"}
    cycle["self"] = cycle
    event = step("a")
    event["input"] = {"obj": {1, 2}, "blob": b"\x00\xff", "when": T0, "broken": Broken()}
    event["agent_state"] = {"nan": math.nan, ("tuple", "key"): 1, "cycle": cycle}
    with Recorder(db) as rec:
        rec.record("t", event, at(0))
    with TraceStore(db) as store:
        [stored] = store.events("t")
    assert stored.input["obj"] == {REPR_MARKER: "{1, 2}"}
    assert stored.input["blob"] == {REPR_MARKER: repr(b"\x00\xff")}
    assert stored.input["broken"][REPR_MARKER].startswith("<unrepresentable Broken")
    assert stored.agent_state["nan"] == {REPR_MARKER: "nan"}
    assert stored.agent_state["('tuple', 'key')"] == 1
    assert stored.agent_state["cycle"]["self"] == {REPR_MARKER: "<cycle or too deep>"}
    assert stored.decision["chosen_action"] == "a"


@pytest.mark.parametrize("task_id, event", [("", {"type": "x"}), ("t", ["not", "a", "mapping"])])
def test_a_malformed_call_is_bad_input(db, task_id, event):
    with Recorder(db) as rec, pytest.raises(BadInput):
        rec.record(task_id, event, at(0))


def _write_many(path: str, task: str, start, count: int) -> None:
    start.wait(10)
    with Recorder(path, batch_size=25) as rec:
        for i in range(count):
            rec.record(task, step(f"{task}-{i}"), at(i))


def test_two_processes_can_write_at_once(db):
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    workers = [ctx.Process(target=_write_many, args=(str(db), task, start, 400)) for task in ("p1", "p2")]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    with TraceStore(db) as store:
        for task in ("p1", "p2"):
            events = store.events(task)
            assert [e.decision["chosen_action"] for e in events] == [f"{task}-{i}" for i in range(400)]


def test_a_file_that_is_not_sqlite_is_refused_untouched(db):
    db.write_bytes(b"this is not a database\n" * 100)
    before = db.read_bytes()
    with pytest.raises(BadInput) as err:
        TraceStore(db)
    assert str(db) in err.value.message and "mv " in err.value.message
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.iterdir()) == [db.name]


def _filled(db, tasks=("keep", "other"), per_task=300) -> None:
    with Recorder(db, sample_over=None) as rec:
        for task in tasks:
            for i in range(per_task):
                rec.record(task, step("a", error_message="e" * 200), at(i))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_a_truncated_database_is_reported_and_left_as_it_is(db):
    _filled(db)
    db.write_bytes(db.read_bytes()[: 4096 * 3])
    before = db.read_bytes()
    with pytest.raises(BadInput) as err:
        with TraceStore(db) as store:
            store.events("keep")
    assert str(db) in err.value.message and "Nothing was changed" in err.value.message
    assert db.read_bytes() == before


def test_a_damaged_page_fails_the_integrity_check_with_the_problems_listed(db):
    _filled(db)
    data = bytearray(db.read_bytes())
    page = 4096
    data[page * 5 + 8: page * 5 + 200] = b"\xde\xad" * 96  # a page inside the events table
    db.write_bytes(bytes(data))
    with TraceStore(db) as store, pytest.raises(BadInput) as err:
        store.check()
    assert str(db) in err.value.message and ".recover" in err.value.message
    assert err.value.problems
    assert db.read_bytes() == bytes(data)


def test_a_long_task_is_sampled_keeping_every_failure_and_key_node(db):
    actions = ["a", "b", "a"] + ["a"] * 1500 + ["b", "a", "b"] + ["a"] * 500
    with Recorder(db, sample_over=None) as rec:
        for i, action in enumerate(actions):
            status = "failed" if i % 97 == 0 else "ok"
            rec.record("t", step(action, status=status), at(i))
    with TraceStore(db) as store:
        before = chronicle.build(store, "t")
        failures = [e.timestamp for e in store.events("t") if e.result["status"] == "failed"]
        removed = store.compact("t", keep=500)
        after = chronicle.build(store, "t")
        kept = store.events("t")
        [summary] = store.tasks()
    assert removed == len(actions) - len(kept) == summary.sampled_out
    assert 480 <= len(kept) <= 500
    assert set(failures) <= {e.timestamp for e in kept}
    assert {(n.kind, n.timestamp) for n in before.nodes} <= {(n.kind, n.timestamp) for n in after.nodes}


def test_sampling_is_deterministic_and_runs_when_the_recorder_closes(tmp_path):
    kept = []
    for name in ("one.db", "two.db"):
        with Recorder(tmp_path / name, sample_over=100) as rec:
            for i in range(1000):
                rec.record("t", step("a", status="failed" if i == 500 else "ok"), at(i))
        with TraceStore(tmp_path / name) as store:
            kept.append([e.timestamp for e in store.events("t")])
    assert kept[0] == kept[1] and len(kept[0]) == 100
    assert at(500).isoformat(timespec="microseconds")[:-6] + "Z" in kept[0]


def test_a_replay_run_imports_as_one_task_and_reimports_in_place(tmp_path, db):
    run = replay_run(tmp_path)
    with TraceStore(db) as store:
        assert import_trace(store, run.path) == 4
        assert import_trace(store, run.trace) == 4
        events = store.events("run-1")
        result = chronicle.build(store, "run-1")
    assert [e.event_type for e in events] == ["run_start", "tool_call", "command", "run_end"]
    assert events[2].result == {"status": "failed", "exit_code": 1, "duration_ms": 12.5,
                                "error_type": "ExitCode", "error_message": "exit code 1"}
    assert events[2].timestamp == "2026-07-14T09:32:01.500000Z"
    assert result.nodes[0].kind == "first_failure" and result.nodes[0].summary == "pytest -q failed: ExitCode: exit code 1"
    assert result.failures == 2


def test_stored_sections_are_compact_json(db):
    with Recorder(db) as rec:
        rec.record("t", step("a"), at(0))
    row = sqlite3.connect(db).execute("SELECT decision, result FROM events").fetchone()
    assert json.loads(row[0]) == {"chosen_action": "a", "alternatives": ["b"]} and ", " not in row[0]


# -- fast paths (issue 8: ingest rate); each must store exactly what the general path stores -------------------


def test_a_canonical_time_string_is_stored_as_given_and_matches_the_other_forms(db):
    canonical = "2026-07-14T09:32:02.123456Z"
    forms = [canonical, "2026-07-14T11:32:02.123456+02:00", "2026-07-14T09:32:02.123456+00:00",
             T0 + timedelta(seconds=2, microseconds=123456),
             (T0 + timedelta(seconds=2, microseconds=123456)).astimezone(timezone(timedelta(hours=-5)))]
    with Recorder(db) as rec:
        for n, when in enumerate(forms):
            rec.record("t", step(f"form-{n}"), when)
    with TraceStore(db) as store:
        assert {e.timestamp for e in store.events("t")} == {canonical}
    assert utc_text(canonical) is canonical


@pytest.mark.parametrize("when", ["2026-02-30T09:32:00.000000Z", "2026-07-14T24:00:00.000000Z",
                                  "2026-07-14T09:60:00.000000Z", "0000-07-14T09:32:00.000000Z",
                                  "2026-07-14T09:32:00.00000xZ", "２０２６-07-14T09:32:00.000000Z"])
def test_a_string_of_the_canonical_shape_that_is_no_real_time_is_refused(db, when):
    with Recorder(db) as rec, pytest.raises(BadInput, match="timestamp"):
        rec.record("t", step("x"), when)


def test_utc_datetimes_are_formatted_as_isoformat_would_across_minutes_days_and_whole_seconds():
    starts = [datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc), T0,
              datetime(2028, 2, 29, 0, 0, tzinfo=timezone.utc), datetime(1, 1, 1, tzinfo=timezone.utc)]
    for start in starts:
        for k in range(200):
            when = start + timedelta(seconds=k * 7.5, microseconds=k % 3)
            assert utc_text(when) == when.isoformat(timespec="microseconds")[:-6] + "Z"


def test_the_json_encoder_matches_json_dumps_and_keeps_its_errors():
    values = [{"é": "ünï\u2028", 2: 2.5, True: None, None: [1e16, -0.0, 3]}, [], {}, "text", 12, None,
              {"nested": [{"a": [True, False, 1.0]}]}]
    for value in values:
        assert _dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    with pytest.raises(ValueError):
        _dumps({"x": math.inf})
    assert _dumps({"s": {1}}) == '{"s":{"$repr":"{1}"}}'


def test_rows_keep_their_order_and_content_across_insert_blocks(db):
    events = []
    for n in range(257):  # not a multiple of the insert block; one timestamp, so order is insertion order
        event = step(f"n{n}")
        if n % 3 == 0:
            del event["agent_state"]
        if n % 5 == 0:
            event["decision"] = {}
        events.append(event)
    with Recorder(db, batch_size=1000) as rec:
        for event in events:
            rec.record("t", event, at(0))
        rec.record("other", step("x"), at(0))
    rows = sqlite3.connect(db).execute(
        "SELECT agent_state, input, decision, result FROM events WHERE task_id = 't' ORDER BY seq").fetchall()
    assert len(rows) == 257
    for event, row in zip(events, rows):
        expected = [event.get(name) for name in ("agent_state", "input", "decision", "result")]
        assert row == tuple(None if v is None else json.dumps(v, separators=(",", ":")) for v in expected)


def test_only_the_section_over_the_limit_is_cut(db):
    event = step("a", output="z" * 900)
    with Recorder(db) as rec:
        rec.record("t", event, at(0))
    with TraceStore(db) as store:
        [stored] = store.events("t")
        [summary] = store.tasks()
    assert stored.result["output"] == "z" * 500 + "…[+400 chars]"
    assert (stored.agent_state, stored.input, stored.decision) == (
        event["agent_state"], event["input"], event["decision"])
    assert summary.truncated == 1


def test_without_the_c_json_accelerator_the_encoder_falls_back_to_the_same_output(monkeypatch):
    from bot.hindsight.traces import recorder

    value = {"é": [1, 2.5, None, True], "s": {1}}
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    chunks = recorder._make_json_chunks()
    assert "".join(chunks(value, 0)) == _dumps(value) == '{"é":[1,2.5,null,true],"s":{"$repr":"{1}"}}'


def test_ties_keep_the_recording_order_when_long_and_short_events_mix(db):
    # The previous store wrote a batch's long (cut) events before its short ones, so equal times came back reordered.
    with Recorder(db) as rec:
        for n in range(6):
            rec.record("t", step(f"n{n}", output="o" * (900 if n % 2 == 0 else 10)), at(0))
    with TraceStore(db) as store:
        assert [e.decision["chosen_action"] for e in store.events("t")] == [f"n{n}" for n in range(6)]
