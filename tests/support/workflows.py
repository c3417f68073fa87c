"""The material the workflow simulations share: the scenario, the failing log, the rule and the captured answer."""

from __future__ import annotations

from helpers import REPO

SCENARIO = REPO / "scenarios" / "monorepo-test-cwd"
LOG = (REPO / "tests" / "data" / "logs" / "gha_pytest.log").read_text(encoding="utf-8")
RULE = ("Before running any test command, check for a package-local test config (pytest.ini, jest.config.*) "
        "and run from that directory.")
CAPTURED = {"task": "Add rate limiting to /v1/upload", "believed": "Tests are run from the repo root with `pytest`",
            "actual": "Each package has its own pytest.ini; the tests must run from packages/api",
            "failure_class": "wrong_assumption", "cost_minutes": 20}
