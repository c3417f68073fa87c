"""Capture keeps the clue: on each log in tests/data/logs/clues.yaml the trigger names the
line a person reads first and the excerpt keeps every listed clue line (bench/capture_clues.py
prints the same table with sizes)."""

from __future__ import annotations

import pytest
import yaml
from helpers import REPO

from bot.incident import capture
from bot.incident.capture.clues import collapse

LOGS = REPO / "tests" / "data" / "logs"
CLUES = yaml.safe_load((LOGS / "clues.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(CLUES))
def test_the_clue_survives_capture(name):
    evidence = capture.evidence_from_log(LOGS / name)
    assert CLUES[name]["trigger"] in evidence.trigger
    lost = [clue for clue in CLUES[name]["excerpt"] if clue not in evidence.excerpt]
    assert not lost, f"{name} lost {lost}:\n{evidence.excerpt}"


def test_near_identical_collection_errors_are_shown_once_with_the_files_named():
    excerpt = capture.evidence_from_log(LOGS / "monorepo_pytest.log").excerpt
    assert excerpt.count("ImportError while importing") + excerpt.count("E   ModuleNotFoundError") <= 4
    assert "[… and 6 more block(s) like this one: packages/api/tests/test_upload.py" in excerpt


def test_no_line_is_shown_twice():
    excerpt = capture.evidence_from_log(LOGS / "pytest_assert.log").excerpt
    assert excerpt.count("FAILED tests/test_limits.py::test_burst_is_capped") == 1


def test_runs_collapse_into_one_line_with_a_count():
    storm = [f"retrying attempt {n}/40" for n in range(1, 41)]
    assert collapse(["start", *storm, "gave up"]) == ["start", "retrying attempt 1/40 ×40", "gave up"]
    files = ["ERROR packages/api/tests/test_a.py", "ERROR packages/api/tests/test_b.py"]
    assert collapse(files) == ["ERROR packages/api/tests/test_a.py [×2 lines like this; the last: "
                               "ERROR packages/api/tests/test_b.py]"]
