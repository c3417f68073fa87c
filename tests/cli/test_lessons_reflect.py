"""``replaybook lessons reflect TASK_ID --model local``: hindsight's reflection from the CLI, on the REAL local model
(``local_model``: skipped when it is not installed, failed under REPLAYBOOK_REQUIRE_LOCAL_MODEL=1). What is asserted
is the command's contract (a lesson stored from the model's rule, or exit 1 saying there was none), never the
model's words; bad input is refused without the model."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from bot.hindsight.lesson import LessonStore
from bot.hindsight.traces import Recorder

T0 = datetime(2026, 7, 14, 9, 32, tzinfo=timezone.utc)
FAILED = {"type": "action_executed",
          "input": {"command": "pytest", "cwd": "."},
          "decision": {"chosen_action": "run_pytest_from_root", "alternatives": ["cd packages/api && pytest"]},
          "result": {"status": "failed", "error_type": "ImportError",
                     "error_message": "ModuleNotFoundError: No module named 'api' (packages/api/tests/test_app.py)"}}
OK = {"type": "action_executed", "decision": {"chosen_action": "cd packages/api && pytest"},
      "result": {"status": "ok"}}


def _record(root) -> None:
    with Recorder(root / ".replaybook" / "hindsight.db") as rec:
        for i, event in enumerate([FAILED, OK]):
            rec.record("task-1", event, T0 + timedelta(seconds=i))


def test_an_unknown_task_or_a_missing_store_is_bad_input(cli, root):
    result = cli("lessons", "reflect", "task-1")
    assert result.code == 2 and "no trace database" in result.err
    _record(root)
    result = cli("lessons", "reflect", "no-such-task")
    assert result.code == 2 and "no-such-task" in result.err and "Traceback" not in result.err


@pytest.mark.local_model
def test_reflect_on_the_local_model_stores_the_models_rule_as_a_lesson(local_model, monkeypatch, cli, root):
    monkeypatch.setenv("XDG_CACHE_HOME", str(local_model.gguf.parents[3]))
    _record(root)
    result = cli("lessons", "reflect", "task-1", "--model", "local", "--task-type", "testing", "--json")
    assert result.code in (0, 1), result.err
    if result.code == 1:  # the model gave no rule: said so, nothing stored
        assert "nothing stored" in result.err
        return
    data = json.loads(result.out)
    assert data["reflection"]["general_rule"] and data["lesson"]["content"] == data["reflection"]["general_rule"]
    with LessonStore(root / ".replaybook" / "hindsight.db") as store:
        [lesson] = store.list("testing")
    assert lesson.source_task == "task-1"
