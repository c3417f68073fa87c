"""`replaybook demo` runs offline on bundled material and does real work."""

from __future__ import annotations

import subprocess
import sys

from bot.incident import IncidentStore
from bot.playbook import Playbook


def test_demo_builds_a_sound_capped_playbook(cli, tmp_path):
    workspace = tmp_path / "ws"
    result = cli("demo", "--workspace", str(workspace))
    assert result.code == 0, result.err
    book = Playbook(workspace / "playbook", root=workspace, cap=3, incidents=IncidentStore(workspace / "incidents"))
    assert book.check([workspace / "CLAUDE.md"]) == []
    assert len(book.admitted()) == 3
    assert len(list((workspace / "playbook" / "archive").glob("rule-*.yaml"))) == 1
    incidents = IncidentStore(workspace / "incidents").all()
    assert len(incidents) >= 8
    # Each admitted rule's cited incidents were marked resolved by the rule.
    cited = {c for r in book.admitted() for c in r.cites}
    assert all(i.resolved_by == "rule" for i in incidents if i.id in cited)
    # Every proposal was replayed both ways and discriminated; the model is labelled simulated.
    assert result.out.count("| discriminates |") == 4
    assert "SIMULATED model" in result.out and "simulated estimate" in result.out
    assert len(list((workspace / ".replaybook" / "traces").iterdir())) == 8
    assert "| incident | class | believed | actual |" in result.out


def test_demo_refuses_a_workspace_with_files(cli, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("mine")
    result = cli("demo", "--workspace", str(ws))
    assert result.code == 2 and "must be empty" in result.err
    assert [p.name for p in ws.iterdir()] == ["keep.txt"]


def test_console_script_runs_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: [\n")
    proc = subprocess.run([sys.executable, "-m", "bot", "incident", "validate", str(bad)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert "not valid YAML" in proc.stderr and "Traceback" not in proc.stderr
