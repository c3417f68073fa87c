"""``replaybook distill`` says what it is doing: a line per batch as it is asked and answered, and a plain line
when there is nothing to distill (a quiet run is never mistaken for a hang). The model is the SIMULATED one
(an AnswerBook at ANTHROPIC_BASE_URL), which is all this needs: the lines come from distill, not the model."""

from __future__ import annotations

from helpers import incident_yaml, write
from support.github import A1, A2, rule_answer


def test_no_incidents_is_said_plainly(cli, model):
    result = cli("distill")
    assert result.code == 0, result.err
    assert "no incidents to distill" in result.err


def test_each_batch_is_announced_and_its_outcome_said(cli, model):
    model.book.add("", rule_answer())
    for n, incident_id in enumerate((A1, A2), start=1):
        write(cli.root / "incidents" / f"{incident_id}.yaml",
              incident_yaml(incident_id, created=f"2026-09-{n:02d}T09:32:00Z"))
    result = cli("distill")
    assert result.code == 0, result.err
    lines = [line for line in result.err.splitlines() if "batch 1/1" in line]
    assert len(lines) == 2 and "asking the model" in lines[0] and "proposal(s)" in lines[1], result.err
    assert "no incidents to distill" not in result.err
