"""`replaybook demo`: the whole local loop, offline, on bundled material."""

from __future__ import annotations

import subprocess
import sys

from bot.incident import IncidentStore
from bot.playbook import Playbook


def test_demo_captures_distills_and_admits_under_the_cap(cli, tmp_path):
    workspace = tmp_path / "ws"
    result = cli("demo", "--workspace", str(workspace))
    assert result.code == 0, result.err
    incidents = IncidentStore(workspace / "incidents").all()
    # Capture: one incident per bundled log, each with the log's own source key.
    assert len(incidents) == 10 and all(i.source and i.source.key and not i.triage for i in incidents)
    book = Playbook(workspace / "playbook", root=workspace, cap=3, incidents=IncidentStore(workspace / "incidents"))
    assert book.check() == []
    # Distill proposed four rules; the gate admitted them; the cap retired one.
    assert len(book.admitted()) == 3 and len(list(book.dir("archive").glob("rule-*.yaml"))) == 1
    assert not list(book.dir("proposed").glob("*.yaml"))
    assert result.out.count(": admit: replay is discriminative (0/3 passed without the rule, 4/4 with it)") == 4
    assert all(i.resolved_by == "rule" for i in incidents)
    # It is labelled simulated, and progress goes to stderr.
    assert "SIMULATED model" in result.out and "simulated estimates" in result.out
    assert "… rule-0001: own scenario" in result.err
    assert (workspace / ".replaybook" / "traces").is_dir()


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
