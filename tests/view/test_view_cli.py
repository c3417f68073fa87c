"""`replaybook view` as a command: bad input is named, a run folder is found only by its name inside the runs
folder (no link, no path the JSON gives), `--serve` serves the page on 127.0.0.1, anchors are stable."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from bot.gate.report import anchor


def _view(cli, *args):
    return cli("view", *map(str, args))


@pytest.mark.parametrize("content, expected", [
    (None, "no such file"),
    ("{not json", "not a gate's JSON"),
    ('{"decision": "admit"}', "field `rule`"),
    ('{"rule": "r", "decision": "admit", "suite": [{"note": 3}]}', "field `suite.0.scenario`"),
])
def test_bad_input_is_named_exit_2_and_nothing_is_written(cli, root, content, expected):
    path = root / "gate.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = _view(cli, path, "--out", root / "page")
    assert result.code == 2, result
    assert str(path) in result.err and expected in result.err, result.err
    assert not (root / "page").exists()


def test_a_run_folder_is_read_only_by_its_name_inside_the_runs_folder(cli, root, gate):
    doc = json.loads(gate.json.read_text())
    runs = gate.root / ".replaybook" / "traces"
    real = Path(doc["before"]["trials"][0]["run_dir"])
    outside = root / "elsewhere" / real.name
    shutil.copytree(real, outside)
    (outside / "agent.raw").write_text('{"role": "assistant", "content": [{"type": "text", "text": "OUTSIDE-ONLY"}]}\n')
    mine = root / "runs"
    mine.mkdir()
    (mine / "linked").symlink_to(outside, target_is_directory=True)
    doc["before"]["trials"] = [{**doc["before"]["trials"][0], "run_dir": str(outside)},
                               {**doc["before"]["trials"][0], "trial": 1, "run_dir": "../elsewhere/" + real.name},
                               {**doc["before"]["trials"][0], "trial": 2, "run_dir": "linked"}]
    hostile = root / "gate.json"
    hostile.write_text(json.dumps(doc), encoding="utf-8")
    result = _view(cli, hostile, "--out", root / "page", "--runs-dir", mine)
    assert result.code == 0, result.err
    text = (root / "page" / "index.html").read_text()
    assert "OUTSIDE-ONLY" not in text and "0 run folder(s) read" in result.out
    assert text.count("Run folder not kept") >= 3
    result = _view(cli, gate.json, "--out", root / "page2", "--runs-dir", runs, "--suite", gate.root / "scenarios")
    assert result.code == 0 and " 0 run folder" not in result.out, result.out


def test_serve_serves_the_page_on_loopback(root, gate):
    out = root / "served"
    proc = subprocess.Popen([sys.executable, "-m", "bot", "--root", str(gate.root), "view", str(gate.json),
                             "--out", str(out), "--serve", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stdout:
            if (found := re.search(r"serving (http://127\.0\.0\.1:\d+/)", line)):
                url = found.group(1)
                break
        assert url, "no serving line"
        with urllib.request.urlopen(url + "index.html", timeout=30) as response:
            assert response.read() == (out / "index.html").read_bytes()
    finally:
        proc.terminate()  # the server this test started, by its handle
        proc.wait(timeout=30)
        proc.stdout.close()


def test_anchors_are_stable_and_safe_for_any_scenario_name():
    assert anchor("monorepo-test-cwd") == "scenario-monorepo-test-cwd"
    assert anchor("monorepo-test-cwd", "with", 3) == "trial-monorepo-test-cwd-with-3"
    assert re.fullmatch(r"[a-z0-9._-]+", anchor('x" onmouseover="alert(1)', "without", 0))


def test_the_markdown_links_only_when_a_page_url_is_known(gate):
    linked = gate.report.read_text()
    url = (gate.page_dir / "index.html").as_uri()
    assert f"]({url}#summary)" in linked and f"]({url}#scenario-monorepo-test-cwd)" in linked
    plain = re.sub(r"\[([^\]]*)\]\(" + re.escape(url) + r"#[^)]*\)", r"\1", linked)
    assert "](" not in plain and "`monorepo-test-cwd`" in plain


def test_a_page_url_that_is_not_a_web_or_file_address_is_refused(cli, root):
    rule = root / "rule.yaml"
    rule.write_text("id: rule-0001\n", encoding="utf-8")
    result = cli("gate", str(rule), "--page-url", "javascript:alert(1)")
    assert result.code == 2 and "not an https, http or file URL" in result.err, result


def test_a_gate_of_several_agents_shows_the_one_named(cli, root, gate):
    doc = json.loads(gate.json.read_text())
    both = root / "agents.json"
    both.write_text(json.dumps({"decision": doc["decision"], "agents": {"builtin": doc, "codex": doc}}))
    result = _view(cli, both, "--out", root / "page")
    assert result.code == 2 and "a gate of 2 agents (builtin, codex); name one with --agent" in result.err
    result = _view(cli, both, "--out", root / "page", "--agent", "codex", "--runs-dir", gate.root / ".replaybook" / "traces")
    assert result.code == 0, result.err
    assert 'id="scenario-monorepo-test-cwd"' in (root / "page" / "index.html").read_text()
