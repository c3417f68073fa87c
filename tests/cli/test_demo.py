"""`replaybook demo`: the whole local loop, offline, on bundled material."""

from __future__ import annotations

import subprocess
import sys

from bot.incident.store import IncidentStore
from bot.playbook.store import Playbook


def test_demo_captures_distills_admits_and_shows_why_it_rejects(cli, tmp_path):
    workspace = tmp_path / "ws"
    result = cli("demo", "--workspace", str(workspace))
    assert result.code == 0, result.err
    incidents = IncidentStore(workspace / "incidents").all()
    # Capture: one incident per bundled log, each with the log's own source key.
    assert len(incidents) == 14 and all(i.source and i.source.key and not i.triage for i in incidents)
    book = Playbook(workspace / "playbook", root=workspace, cap=3, incidents=IncidentStore(workspace / "incidents"))
    assert book.check() == []
    # Distill proposed six rules; the gate admitted four; the cap retired one.
    assert len(book.admitted()) == 3 and len(list(book.dir("archive").glob("rule-*.yaml"))) == 1
    assert result.out.count(": **admit**: replay is discriminative (0/3 passed without the rule, 4/4 with it)") == 4
    # The two refusals, each with its reason: a regression elsewhere, and a rule the agent already follows.
    assert ("rule-0005: **reject**: its own scenario is fixed (0/3 without, 4/4 with), but it breaks another "
            "scenario, a regression: `whole-suite-after-change` passed 1/1 without it and 0/") in result.out
    assert "rule-0006: **reject**: replay not discriminative: the scenario passed without the rule" in result.out
    assert sorted(p.name for p in book.dir("proposed").glob("*.yaml")) == ["rule-0005.yaml", "rule-0006.yaml"]
    # The cap, the trial counts and "from cache" are explained where they appear; rules are printed whole.
    assert "The cap is 3 here, not the default 60" in result.out and "(over the cap: retired rule-0003)" in result.out
    # by score: rule-0003's incidents cost the least (62 minutes), none was hit yet (docs/playbook.md)
    assert [p.stem for p in book.dir("archive").glob("rule-*.yaml")] == ["rule-0003"]
    assert "sequential test" in result.out and '"from cache" counts replays reused' in result.out
    assert "When a task changes one module, run only that module's tests; do not run the whole test suite." in result.out
    assert "…" not in result.out.split("## 2.")[1].split("## 3.")[0]
    assert sum(i.resolved_by == "rule" for i in incidents) == 10
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
