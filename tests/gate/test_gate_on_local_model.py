"""A gate that decides on the REAL local model (``local_model``: skipped when it is not installed, failed under
REPLAYBOOK_REQUIRE_LOCAL_MODEL=1; CI runs it). Its cost is bounded by design: a scenario the model can only pass
with the one fact the rule carries (a codename no file holds), answered in a call or two, ``--max-turns 3`` and
``--budget`` replays. The model is never scripted: the gate decides from what it did."""

from __future__ import annotations

import shutil

import pytest
import yaml
from helpers import REPO, write

pytestmark = pytest.mark.local_model

RIGHT = "When asked for this release's codename, write `pelican`: that is the codename of this release."


def _root(root):
    """The codename scenario bench/local_gate.py gates on too, and the right rule as a proposal."""
    shutil.copytree(REPO / "bench" / "scenarios" / "codename", root / "scenarios" / "codename")
    write(root / "playbook" / "proposed" / "rule-0001.yaml", yaml.safe_dump({
        "id": "rule-0001", "rule": RIGHT, "cites": [], "task_types": ["release"], "replay": "scenarios/codename",
        "created": "2026-12-06"}))


def test_the_gate_admits_a_rule_that_carries_the_fact_the_task_needs(cli, root, local_model, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(local_model.gguf.parents[3]))
    _root(root)
    result = cli("gate", str(root / "playbook" / "proposed" / "rule-0001.yaml"), "--model", "local", "--max-turns", "3",
                 "--budget", "40", "--jobs", "2", "--report", str(root / "gate.json"))
    assert result.code in (0, 1), result.err
    print(result.out)  # the report (replays, calls, tokens): shown with `pytest -rP`, for bench/README.md
    assert result.code == 0 and "admit" in result.out, (result.out[-1500:], result.err[-1500:])
    assert "replay `codename`" in result.err  # a progress line as each replay ended, with its ETA
    assert "ETA" in result.err
