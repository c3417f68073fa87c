"""The chronicle: first failure, hesitations, anomalies; summaries of 50 characters; the trace CLI."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from bot.cli import trace as trace_cli
from bot.cli.main import Context
from bot.errors import BadInput
from bot.hindsight import chronicle
from bot.hindsight.traces import Recorder, StoredEvent, TraceStore

T0 = datetime(2026, 7, 14, 9, 32, tzinfo=timezone.utc)

ARTICLE_EVENT = {
    "type": "action_executed",
    "agent_state": {"current_step": "file_parse", "context_count": 87, "model": "qwen2.5-14b-instruct"},
    "input": {"file_path": "/data/raw/sales_2024.csv", "encoding": "utf-8-sig"},
    "decision": {"chosen_action": "parse_with_pandas", "alternatives": ["parse_with_csv", "extract_by_lines"],
                 "confidence": 0.73},
    "result": {"status": "failed", "error_type": "EncodingError", "error_message": "codec can't decode byte 0xed"},
}


def decide(chosen: str, options=("A", "B"), **result) -> dict:
    return {"type": "action_executed",
            "decision": {"chosen_action": chosen, "alternatives": [o for o in options if o != chosen]},
            "result": {"status": "ok", **result}}


def events(*raw: dict) -> list[StoredEvent]:
    return [StoredEvent(i, "t", f"2026-07-14T09:32:{i:02d}.000000Z", e.get("type", "x"), e.get("agent_state"),
                        e.get("input"), e.get("decision"), e.get("result")) for i, e in enumerate(raw)]


def kinds(*raw: dict) -> list[tuple[str, int]]:
    return [(n.kind, n.index) for n in chronicle.chronicle("t", events(*raw)).nodes]


def test_the_articles_event_is_a_first_failure_in_at_most_50_characters():
    [node] = chronicle.chronicle("t", events(ARTICLE_EVENT)).nodes
    assert node.kind == "first_failure"
    assert node.summary == "parse_with_pandas failed: EncodingError: codec ca…"
    assert len(node.summary) == 50


def test_only_the_first_failure_is_a_node_and_all_are_counted():
    failed = {"type": "command", "input": {"argv": ["pytest"]}, "result": {"status": "failed"}}
    result = chronicle.chronicle("t", events({"type": "start"}, failed, failed, {"type": "x", "result": {"status": "error"}}))
    assert [(n.kind, n.index, n.summary) for n in result.nodes] == [("first_failure", 1, "pytest failed: failed")]
    assert result.failures == 3


def test_switching_back_and_forth_over_the_same_options_is_a_hesitation():
    assert kinds(decide("A"), decide("B"), decide("A")) == [("hesitation", 2)]
    [node] = chronicle.chronicle("t", events(decide("A"), decide("B"), decide("A"))).nodes
    assert node.summary == "switched A→B→A" and node.evidence == (0, 1, 2)
    assert kinds(decide("A"), decide("B"), decide("A"), decide("B")) == [("hesitation", 2)]
    six = [decide(c) for c in "ABABAB"]
    assert kinds(*six) == [("hesitation", 2), ("hesitation", 5)]  # one node per A→B→A, not one per flip


def test_what_is_not_a_hesitation():
    assert kinds(decide("A"), decide("B"), decide("C")) == []  # moving on is not hesitating
    assert kinds(decide("A"), decide("B", options=("B", "C")), decide("A")) == []  # other option sets
    plain = [{"type": "tool_call", "decision": {"chosen_action": name}} for name in ("Bash", "Read", "Bash")]
    assert kinds(*plain) == []  # tool calls name no alternatives
    no_options = {"type": "other", "decision": {"chosen_action": "Z"}}
    assert kinds(decide("A"), no_options, decide("B"), decide("A")) == []  # that decision breaks the run
    assert kinds(decide("A"), no_options, decide("B"), decide("A"), decide("B")) == [("hesitation", 4)]


def test_an_explicit_switch_is_a_hesitation():
    assert kinds({"type": "x", "decision": {"chosen_action": "retry", "switched": True}}) == [("hesitation", 0)]


@pytest.mark.parametrize("result, expected", [
    ({"anomaly": True}, "anomalous result"),
    ({"expected_type": "dict", "output": [1, 2]}, "got array, expected object"),
    ({"expected_type": "string", "actual_type": "int"}, "got integer, expected string"),
    ({"expected_type": "number", "output": 3}, None),
    ({"expected_type": "list", "output": []}, None),
    ({"expected_type": "no-such-type", "output": 3}, None),
    ({"anomaly": False}, None),
])
def test_anomalies(result, expected):
    nodes = chronicle.chronicle("t", events({"type": "parse", "result": {"status": "ok", **result}})).nodes
    assert [n.summary for n in nodes] == ([f"parse: {expected}"] if expected else [])


def test_every_summary_is_at_most_50_characters():
    long = "编码错误 " * 40
    raw = [decide("x" * 80, options=("x" * 80, "y")), decide("y"), {"type": "t", "result": {"anomaly": True}},
           {"type": "t", "input": {"name": long}, "result": {"status": "failed", "error_message": long}}]
    for node in chronicle.chronicle("t", events(*raw)).nodes:
        assert len(node.summary) <= 50 and "\n" not in node.summary


ODD = [
    {"type": "weird", "result": "just a string", "decision": ["a", "list"]},
    {"type": "weird", "result": {"status": 3, "output": None, "expected_type": "null"}},
    {"type": "weird", "decision": {"chosen_action": {"an": "object"}, "alternatives": "not a list"}},
    {"type": "weird", "decision": {"chosen_action": "A", "alternatives": [{"x": 1}, "B"]}},
    {"type": "weird", "decision": {}, "result": {}},
    {"type": "weird", "result": {"status": "FAILED", "output": 1.5, "expected_type": "integer"}},
    {"type": "weird", "decision": {"chosen_action": "A", "switched": "yes"}},
]


def test_the_stored_chronicle_matches_the_in_memory_one(tmp_path):
    raw = [ARTICLE_EVENT, decide("A"), decide("B"), decide("A"), *ODD,
           {"type": "x", "decision": {"chosen_action": "B", "switched": True}},
           {"type": "check", "result": {"expected_type": "dict", "output": "text"}}]
    with Recorder(tmp_path / "h.db") as rec:
        for i, event in enumerate(raw):
            rec.record("t", event, T0 + timedelta(seconds=i))
    with TraceStore(tmp_path / "h.db") as store:
        stored = chronicle.build(store, "t")
        in_memory = chronicle.chronicle("t", store.events("t"))
    assert stored == in_memory
    assert [n.kind for n in stored.nodes] == ["first_failure", "hesitation", "anomaly", "hesitation", "anomaly"]


def test_an_unknown_task_is_bad_input(tmp_path):
    with TraceStore(tmp_path / "h.db") as store, pytest.raises(BadInput, match="trace list"):
        chronicle.build(store, "nope")


# -- the CLI ---------------------------------------------------------------------------------


@pytest.fixture
def run_trace(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()

    def run(*args: str):
        return CliRunner().invoke(trace_cli.group, list(args), obj=Context(root))

    run.root = root
    return run


def _record(root) -> None:
    with Recorder(root / ".replaybook" / "hindsight.db") as rec:
        for i, event in enumerate([decide("A"), decide("B"), ARTICLE_EVENT, decide("A")]):
            rec.record("task-1", event, T0 + timedelta(seconds=i))


def test_cli_list_show_and_chronicle(run_trace):
    _record(run_trace.root)
    listed = run_trace("list", "--json")
    assert listed.exit_code == 0, listed.output
    [task] = json.loads(listed.output)
    assert (task["task_id"], task["events"], task["failures"]) == ("task-1", 4, 1)
    assert "task-1" in run_trace("list").output
    shown = json.loads(run_trace("show", "task-1", "--json").output)
    assert [e["decision"]["chosen_action"] for e in shown] == ["A", "B", "parse_with_pandas", "A"]
    assert "parse_with_pandas" in run_trace("show", "task-1").output
    data = json.loads(run_trace("chronicle", "task-1", "--json").output)
    assert [(n["kind"], n["index"]) for n in data["nodes"]] == [("first_failure", 2)]
    text = run_trace("chronicle", "task-1").output
    assert text.startswith("task-1: 4 events, 1 failed, 1 key nodes") and "EncodingError" in text


def test_cli_without_a_database_lists_it_as_empty_and_says_how_to_fill_it(run_trace):
    result = run_trace("list")
    assert result.exit_code == 0 and result.exception is None  # listing nothing is not bad input
    assert "the store is empty" in result.output and "trace import" in result.output
    assert not (run_trace.root / ".replaybook").exists()


def test_cli_imports_areplay_run(run_trace, tmp_path):
    from support.traces import replay_run

    run = replay_run(tmp_path)
    db = tmp_path / "other.db"
    result = run_trace("import", str(run.path), "--db", str(db))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "imported 4 events as task run-1"
    assert "pytest -q failed" in run_trace("chronicle", "run-1", "--db", str(db)).output
