"""Capture on the real local model (Qwen2.5-Coder 1.5B, grammar-held JSON) over logs of five kinds: no stored
incident restates the capture prompt's example, and every incident kept out of triage is grounded in its log.

Marked ``local_model``: skipped when the model is not installed, failed instead under
REPLAYBOOK_REQUIRE_LOCAL_MODEL=1 (CI). The model is real and not scripted: the test asserts what capture lets
through, never how many answers the model gets right. Each log's outcome is printed (run with ``-s``).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from helpers import REPO

from bot.incident import capture
from bot.incident.capture import grounding
from bot.incident.store import IncidentStore
from bot.model import served
from bot.model.llm import LLM

LOGS = REPO / "tests" / "data" / "logs"
KINDS = {  # log -> what kind of failure it is
    "monorepo_pytest.log": "monorepo: pytest run from the root",
    "worker_pytest.log": "a worker package's failing test",
    "generated_file.log": "a hand-edited generated file",
    "eslint.log": "a lint failure",
    "retry_storm.log": "a network flake retried 40 times",
}


@pytest.mark.local_model
def test_local_model_captures_are_grounded_or_triage_and_never_the_prompts_example(local_server, tmp_path):
    llm = LLM.connect(served.LOCAL, api_key="test-key", base_url=local_server.base_url, structured=True,
                      max_retries=0, timeout_s=900, label="local (test)")
    store = IncidentStore(tmp_path / "incidents")
    examples = grounding.prompt_examples()
    outcome = {}
    for i, (name, kind) in enumerate(KINDS.items()):
        evidence = capture.evidence_from_log(LOGS / name)
        done = capture.capture(evidence, store, llm, now=datetime(2026, 11, 21, 8, i, tzinfo=timezone.utc))
        incident = done.incident
        assert done.created and store.path_of(incident.id).is_file()
        for line in (incident.believed, incident.actual):
            assert not any(grounding.copies(line, e) for e in examples), (name, line)
        if incident.triage:
            assert incident.triage_reason, name
            outcome[name] = f"triage: {incident.triage_reason}"
        else:
            named = grounding.grounding(f"{incident.believed}\n{incident.actual}", capture.evidence_text(evidence))
            assert named, (name, incident.believed, incident.actual)
            outcome[name] = f"grounded on {named}: {incident.believed!r} / {incident.actual!r}"
        print(f"\n{name} ({kind}): {outcome[name]}")
    kept = sum(not v.startswith("triage") for v in outcome.values())
    print(f"\n{kept} grounded, {len(outcome) - kept} triage of {len(outcome)} logs")
