"""The replay suite: `replay list` feeds a workflow matrix, `replay report` merges its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, make_scenario, write

RULE = str(REPO / "scenarios" / "lint-disable" / "rule.yaml")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """Real results of `replaybook replay ID --json`: one failing, one passing (the simulated model)."""
    folder = tmp_path_factory.mktemp("results")
    # Module-scoped, so the autouse isolation has not run yet: keep the replays off the real home here.
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "GH_TOKEN")}
    env.update(HOME=str(folder / "home"), REPLAYBOOK_CACHE_DIR=str(folder / "cache"))
    out = {}
    for name, extra in (("failing", []), ("passing", ["--rule", RULE])):
        file = folder / f"{name}.json"
        proc = subprocess.run([sys.executable, "-m", "bot", "--root", str(REPO), "replay", "lint-disable", "--json",
                               "--runs-dir", str(folder / "runs"), *extra], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode in (0, 1), proc.stderr
        file.write_text(proc.stdout, encoding="utf-8")
        out[name] = file
    return out


def test_the_suite_lists_every_scenario_as_a_compact_matrix(cli, root):
    make_scenario(root, "b-scenario")
    make_scenario(root, "a-scenario")
    result = cli("replay", "list", "--ids")
    assert result.code == 0 and result.out.strip() == '["a-scenario","b-scenario"]'
    full = json.loads(cli("replay", "list", "--json").out)
    assert [s["id"] for s in full] == ["a-scenario", "b-scenario"] and full[0]["path"] == "scenarios/a-scenario"
    assert cli("replay", "list", "b-scenario", "--ids").out.strip() == '["b-scenario"]'
    assert "| a-scenario | testing |" in cli("replay", "list").out


def test_listing_an_unknown_scenario_or_a_broken_one_is_bad_input(cli, root):
    assert cli("replay", "list", "nope", "--ids").code == 2
    write(root / "scenarios" / "broken" / "scenario.yaml", "id: broken\ntask: x\npass_if: do it well\n")
    result = cli("replay", "list")
    assert result.code == 2 and "broken" in result.err
    assert cli("replay", "list").code == 2


def test_an_empty_suite_lists_nothing(cli):
    assert cli("replay", "list", "--ids").out.strip() == "[]"


def test_replay_scenario_still_means_replay_run(cli):
    assert "Commands:" in cli("replay", "--help").out
    result = cli("replay", "lint-disable", "--rule", RULE)
    assert result.code == 0 and "| passed |" in result.out


def test_report_merges_results_into_one_table_and_fails_on_a_failure(cli, results, tmp_path):
    summary = tmp_path / "summary.md"
    result = cli("replay", "report", str(results["failing"]), str(results["passing"]), "--summary", str(summary))
    assert result.code == 1
    assert "| lint-disable | failed | 1/2 | 1 | 0 |" in result.out
    assert "SIMULATED" in result.out and "lint-disable" in result.err
    assert summary.read_text() == result.out


def test_report_passes_when_every_scenario_passed(cli, results):
    result = cli("replay", "report", str(results["passing"]), "--expect", '["lint-disable"]', "--summary",
                 "/dev/null")
    assert result.code == 0, result.err
    assert "| lint-disable | passed | 1/1 |" in result.out and "1 of 1 scenario(s) passed" in result.out


def test_a_scenario_whose_job_wrote_no_result_is_missing_not_passed(cli, results, tmp_path):
    folder = tmp_path / "downloaded"
    folder.mkdir()
    (folder / "lint-disable.json").write_text(results["passing"].read_text())
    result = cli("replay", "report", str(folder), "--expect", '["lint-disable","retry-loop"]',
                 "--summary", "/dev/null")
    assert result.code == 1 and "| retry-loop | missing |" in result.out and "retry-loop" in result.err
    empty = tmp_path / "none"
    empty.mkdir()
    assert cli("replay", "report", str(empty), "--summary", "/dev/null").code == 1


def test_report_rejects_what_is_not_a_result(cli, tmp_path):
    bad = write(tmp_path / "bad.json", '{"scenario": "x"}')
    result = cli("replay", "report", str(bad), "--summary", "/dev/null")
    assert result.code == 2 and "bad.json" in result.err and "replaybook replay ID --json" in result.err
    assert cli("replay", "report", str(tmp_path / "missing.json"), "--summary", "/dev/null").code == 2
    good = write(tmp_path / "ok" / "r.json", json.dumps({"scenario": "x", "summary": {
        "passed": 1, "failed": 0, "unscored": 0, "trials": 1}}))
    assert cli("replay", "report", str(good), "--expect", "lint-disable", "--summary", "/dev/null").code == 2


def test_odd_token_and_cost_fields_are_left_out_not_a_crash(cli, tmp_path):
    odd = write(tmp_path / "odd.json", json.dumps({"scenario": "x", "summary": {
        "passed": 1, "failed": 0, "unscored": 0, "trials": 1, "input_tokens": "many", "output_tokens": 7,
        "cost_usd": None}}))
    result = cli("replay", "report", str(odd), "--summary", "/dev/null")
    assert result.code == 0, result.err
    assert "| x | passed | 1/1 |" in result.out and "| 7 | $0.0000 |" in result.out
