"""Distill's test material: incidents, scripted answers, and a run against them over HTTP."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from helpers import incident_yaml, write

from bot import config
from bot.distill.plan import distill
from bot.model.llm import LLM
from bot.replay.gateway.answers import AnswerBook
from bot.replay.gateway.server import Gateway

A1, A2, B1 = "2026-07-14-0932", "2026-07-21-1105", "2026-07-16-0310"
TODAY = date(2026, 8, 3)
RULE = "Before running any test command, check for a package-local pytest.ini and run pytest from that directory."


def add_incident(root: Path, incident_id: str, **over) -> None:
    write(root / "incidents" / f"{incident_id}.yaml", incident_yaml(incident_id, **over))


def monorepo_incidents(root: Path) -> None:
    add_incident(root, A1)
    add_incident(root, A2, created="2026-07-21T11:05:00Z", believed='"Tests run from the repo root with pytest"',
                 actual='"packages/worker has its own pytest.ini; must cd into packages/worker first"')


def flaky_incident(root: Path) -> None:
    add_incident(root, B1, failure_class="bad_tool_use", created="2026-07-16T03:10:00Z",
                 believed='"The 503 from the rates service was a blip that clears if asked again"',
                 actual='"The rates service was in maintenance; the job has a cached copy for exactly this"')


def new_scenario(**over) -> dict:
    scenario = {
        "id": "monorepo-cwd-gen",
        "task": "Fix the failing test in packages/api/tests/test_x.py",
        "task_type": "testing",
        "pass_if": [{"ran": {"command": "pytest", "cwd": "packages/api"}},
                    {"not_ran": {"command": "pytest", "cwd": "."}},
                    {"succeeds": {"run": "python -m pytest -q", "cwd": "packages/api"}}],
        "files": {"packages/api/pytest.ini": "[pytest]\npythonpath = src\n",
                  "packages/api/src/api/calc.py": "def double(n):\n    return n + n + 1\n",
                  "packages/api/tests/test_x.py": "from api.calc import double\n\n\ndef test_x():\n"
                                                  "    assert double(2) == 4\n"},
        # the reference solution: distill replays it and the do-nothing control before proposing (both sound)
        "solution": ["sed -i 's/n + n + 1/n + n/' packages/api/src/api/calc.py",
                     "cd packages/api && python -m pytest -q"],
        "policy": {"branch_on": "package-local pytest.ini",
                   "with_rule": [{"bash": "cd packages/api && python -m pytest -q"}, {"say": "done [rule-0001]"}],
                   "without_rule": [{"bash": "python -m pytest -q"}, {"say": "done"}]},
    }
    scenario.update(over)
    return scenario


def rule_answer(cites=(A1, A2), rule=RULE, scenario=None, **extra) -> str:
    return json.dumps({"kind": "rule", "rule": rule, "cites": list(cites), "task_types": [],
                       "scenario": scenario if scenario is not None else {"new": new_scenario()}, **extra})


class Run:
    """One distill run against scripted answers served over HTTP."""

    def __init__(self, root: Path, book: AnswerBook):
        self.root, self.book = root, book

    def __call__(self, **kw):
        gateway = Gateway(self.book)
        llm = LLM.connect("simulated", api_key=gateway.token, base_url=gateway.url, simulated=True,
                          max_retries=0, timeout_s=10)
        with gateway:
            # One cluster per prompt unless a test asks for batching, so each test sees its groups.
            return distill(config.load(self.root), llm, today=TODAY, **{"batch_max": 1, **kw})


def run_with(root: Path, *answers: tuple[str, str], **kw):
    book = AnswerBook()
    for match, text in answers:
        book.add(match, text)
    return Run(root, book)(**kw), book


def reasons(report) -> str:
    return "\n".join(f"{r.what}: {r.reason}" for r in report.refusals)
