"""Escalation: an ignored rule's `not_ran` check as a Claude Code PreToolUse hook, run by the real CLI.

The bundled monorepo-test-cwd scenario, replayed WITHOUT its rule in the
prompt by the pinned Claude Code CLI against the simulated model. The agent
(scripted) first runs pytest from the repo root, the mistake the rule is
about, then from packages/api. With the guard in the fixture the first
command is refused before it runs and the scenario passes; without it, the
same agent fails the scenario.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from bot.health import escalation as escalate
from bot.playbook import rule as rule_mod
from bot.replay.engine import run_trial
from bot.replay.trace.events import read_trace
from bot.scenario import spec as sc

BUNDLED = REPO / "scenarios" / "monorepo-test-cwd"


def guarded_copy(tmp_path: Path, *, guard: bool) -> sc.LoadedScenario:
    folder = tmp_path / ("guarded" if guard else "unguarded") / "monorepo-test-cwd"
    shutil.copytree(BUNDLED, folder, ignore=shutil.ignore_patterns("logs", "incidents"))
    policy = yaml.safe_load((BUNDLED / "policy.yaml").read_text())
    fix = next(s for s in policy["with_rule"] if "write" in s)
    policy["without_rule"] = [  # an agent that, refused, reads why and runs the tests where they live
        {"bash": "python -m pytest -q"},
        {"bash": "cd packages/api && python -m pytest -q tests/test_limits.py"},
        copy.deepcopy(fix),  # its own copy: the one YAML loader refuses the alias a shared one would write
        {"bash": "cd packages/api && python -m pytest -q"},
        {"say": "Fixed the off-by-one in RateLimiter.allow; the api tests pass from packages/api."},
    ]
    (folder / "policy.yaml").write_text("# SIMULATED MODEL policy (test)\n" + yaml.safe_dump(policy, sort_keys=False))
    if guard:
        rule = rule_mod.load(BUNDLED / "rule.yaml", named_by_id=False)
        for path, text in escalate.files(rule, sc.load(BUNDLED).scenario, {}).items():
            if path.startswith(".claude/"):
                (folder / "repo" / path).parent.mkdir(parents=True, exist_ok=True)
                (folder / "repo" / path).write_text(text)
    return sc.load(folder)


def test_the_hook_refuses_the_denied_command_and_the_scenario_passes_without_the_rule(claude_code_agent, opts,
                                                                                        tmp_path):
    guarded = run_trial(guarded_copy(tmp_path, guard=True), "", opts(agent="claude-code"), 0)
    unguarded = run_trial(guarded_copy(tmp_path, guard=False), "", opts(agent="claude-code"), 0)
    assert unguarded.verdict == "failed", unguarded.reason  # the same agent, no guard: the mistake runs
    assert guarded.verdict == "passed", guarded.reason
    events = read_trace(Path(guarded.run_dir) / "trace.jsonl")
    runs = {(e.cwd, tuple(e.argv[:3])) for e in events if e.kind == "command" and e.argv[:3] == ["python", "-m", "pytest"]}
    assert runs == {("packages/api", ("python", "-m", "pytest"))}  # never from the root
    refused = [e for e in events if e.kind == "tool_call" and e.name == "Bash" and e.is_error]
    assert refused and "playbook guard for [rule-0001]" in (refused[0].output_excerpt or "")


# -- the hook alone, as Claude Code calls it (JSON on stdin) ------------------------------------------------


def hook(tmp_path: Path, command: str, cwd: str = "") -> subprocess.CompletedProcess:
    project = tmp_path / "p"
    if not project.exists():
        rule = rule_mod.load(BUNDLED / "rule.yaml", named_by_id=False)
        for path, text in escalate.files(rule, sc.load(BUNDLED).scenario, {}).items():
            (project / path).parent.mkdir(parents=True, exist_ok=True)
            (project / path).write_text(text)
    event = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": str(project / cwd)}
    return subprocess.run([sys.executable, str(project / escalate.HOOK_PATH)], input=json.dumps(event), text=True,
                          capture_output=True, env={"CLAUDE_PROJECT_DIR": str(project), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize(("command", "cwd", "refused"), [
    ("python -m pytest -q", "", True),
    ("pytest", "", True),
    ("FOO=1 python3 -m pytest -x", "", True),
    ("ls && pytest -q", "", True),
    ("cd packages/api && cd ../.. && pytest", "", True),
    ("cd packages/api && python -m pytest -q", "", False),
    ("python -m pytest -q", "packages/api", False),
    ("echo pytest", "", False),
    ("ruff check .", "", False),
])
def test_the_hook_decides_from_the_scenarios_check(tmp_path, command, cwd, refused):
    done = hook(tmp_path, command, cwd)
    assert done.returncode == (2 if refused else 0), done.stderr
    assert ("rule-0001" in done.stderr) == refused


def test_settings_keep_what_was_there_and_the_hook_is_added_once():
    before = json.dumps({"model": "x", "hooks": {"PreToolUse": [{"matcher": "Edit", "hooks": []}]}})
    once = escalate.merge_settings(before)
    assert escalate.merge_settings(once) == once
    data = json.loads(once)
    assert data["model"] == "x" and [h["matcher"] for h in data["hooks"]["PreToolUse"]] == ["Edit", "Bash"]


def test_a_rule_with_nothing_mechanical_gets_a_rewording_and_diff_excludes_get_a_ci_step():
    rule = rule_mod.load(BUNDLED / "rule.yaml", named_by_id=False)
    loose = sc.Scenario.model_validate({"id": "x", "task": "t", "repo": "repo",
                                        "pass_if": [{"succeeds": {"run": "true"}}]})
    esc = escalate.escalation(rule, loose)
    assert not esc.mechanical and "reword" in esc.rewording
    workflow = escalate.files(rule, sc.load(BUNDLED).scenario, {})[escalate.WORKFLOW_PATH]
    parsed = yaml.safe_load(workflow)
    env = parsed["jobs"]["diff-excludes"]["steps"][1]["env"]
    assert json.loads(env["PATTERNS"]) == ["sys.path.insert", "sys.path.append"]
    assert parsed["permissions"] == {}
