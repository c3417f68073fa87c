"""Distill proposes the narrowest scope its incidents' evidence supports, and says why when it must be global."""

from __future__ import annotations

import json

import yaml
from support.distill import A1, A2, add_incident, rule_answer, run_with
from helpers import make_scenario

from bot.distill import scoping

EXISTING = {"existing": "monorepo-test-cwd"}

API_LOG = json.dumps("FAILED packages/api/tests/test_limits.py::test_x - ImportError\n"
                     "  File \"/home/runner/work/shop/shop/packages/api/src/api/limits.py\", line 3\n"
                     "  File \"/opt/hostedtoolcache/Python/3.12/lib/python3.12/site-packages/_pytest/main.py\"")
WORKER_LOG = json.dumps("ERROR collecting packages/worker/tests/test_jobs.py (see https://docs.pytest.org/x.html)")


def _proposal(root, report):
    [proposal] = report.proposals
    return yaml.safe_load((root / "playbook" / "proposed" / f"{proposal.id}.yaml").read_text())


def test_the_paths_in_the_incidents_evidence_become_the_rules_scope(root):
    add_incident(root, A1, evidence=API_LOG)
    add_incident(root, A2, created="2026-07-21T11:05:00Z", evidence=WORKER_LOG)
    make_scenario(root)
    report, _ = run_with(root, (A1, rule_answer(scenario=EXISTING)))
    rule = _proposal(root, report)
    # each incident's files give the folder they share; a runner's absolute prefix, a URL and site-packages do not count
    assert rule["paths"] == ["packages/api/**", "packages/worker/tests/**"]
    assert rule["task_types"] == ["api"]  # the incidents' own task type
    assert rule["scope_reason"].startswith(f"paths from the files the evidence of {A1}, {A2} names")


def test_an_incident_whose_evidence_names_no_file_makes_it_global_with_the_reason(root):
    add_incident(root, A1, evidence=API_LOG)
    add_incident(root, A2, created="2026-07-21T11:05:00Z", evidence='"the job timed out after 10 minutes"',
                 task_type=None)
    make_scenario(root)
    report, _ = run_with(root, (A1, rule_answer(scenario=EXISTING)))
    rule = _proposal(root, report)
    assert not rule.get("paths") and rule["task_types"] == []
    assert rule["scope_reason"] == (f"global: the evidence of {A2} names no repository file; every task type "
                                    f"({A2} recorded none)")


def test_the_distillers_paths_stay_only_where_they_cover_the_evidence(root):
    add_incident(root, A1, evidence=API_LOG)
    make_scenario(root)
    report, _ = run_with(root, (A1, rule_answer(cites=(A1,), scenario=EXISTING, paths=["docs/**"])))
    assert _proposal(root, report)["paths"] == ["packages/api/**"]  # docs/** does not hold the files it names


def test_files_in_reads_repository_files_only():
    text = ("see packages/api/pytest.ini and ./src/app.py; /usr/lib/python3/x.py, node_modules/a/b.js, "
            "https://example.com/a/b.html, ../../etc/passwd.txt, v1.2.3 and 3.5")
    assert scoping.files_in(text) == ["packages/api/pytest.ini", "src/app.py"]
    assert scoping.incident_glob(["pytest.ini"]) == "pytest.ini"
    assert scoping.incident_glob(["setup.py", "src/a.py"]) is None
    assert scoping.incident_glob(["a/b/c.py", "a/b/d/e.py"]) == "a/b/**"


def test_a_long_reason_is_cut_to_the_rules_field():
    class Incident:
        def __init__(self, n):
            self.id, self.evidence, self.task_type = f"2026-07-{n:02d}-0000-with-a-long-suffix", "no file here", "api"

    class Answer:
        cites, paths, task_types = [], [], []

        def model_copy(self, update):
            return update

    _, reason = scoping.narrowest([Incident(n) for n in range(1, 20)], Answer())
    assert len(reason) == scoping.REASON_MAX and reason.startswith("global: the evidence of") and reason.endswith("…")
