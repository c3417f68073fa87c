"""The reference solution (``solution:``): a scenario is sound only if its checks hold after the solution runs in
the sandbox and fail with the do-nothing control. Real sandboxed replays, no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import REPO, write

from bot.errors import BadInput
from bot.playbook.check import validate_folders
from bot.playbook.store import Playbook
from bot.replay import validate as sv
from bot.scenario import spec as sc
from bot.scenario import suite

BUNDLED = [p.parent for pattern in ("*/scenario.yaml", "small-model/*/scenario.yaml")
           for p in sorted((REPO / "scenarios").glob(pattern))]


def scenario(root: Path, sid: str = "own", *, pass_if=None, solution=None, setup=None, files=None) -> Path:
    folder = root / "scenarios" / sid
    for name, text in (files or {"README.md": "fixture\n", "sub/keep.txt": "x\n"}).items():
        write(folder / "repo" / name, text)
    data = {"id": sid, "task": "write done.txt", "repo": "repo",
            "pass_if": pass_if or [{"succeeds": {"run": "test -f done.txt"}}],
            "budget": {"max_turns": 5, "timeout_s": 120, "max_cost_usd": 1.0}}
    if solution is not None:
        data["solution"] = solution
    if setup is not None:
        data["setup"] = setup
    write(folder / "scenario.yaml", yaml.safe_dump(data, sort_keys=False))
    return folder


def check(folder: Path) -> sv.Finding:
    return sv.validate(folder, policy=False)  # the control and the solution run; no cache: replayed each time


def test_a_solution_that_does_the_task_makes_the_scenario_sound(root):
    finding = check(scenario(root, solution=["touch done.txt"]))
    assert finding.ok, finding.lines()
    assert finding.control.verdict == "failed" and finding.solution.verdict == "passed"


def test_a_contradictory_check_is_unsound_and_the_message_names_it(root):
    finding = check(scenario(root, solution=["touch done.txt"], pass_if=[
        {"succeeds": {"run": "test -f done.txt"}}, {"fails": {"run": "test -f done.txt"}}]))
    assert not finding.ok and finding.exit_code == 1 and finding.solution.verdict == "failed"
    [line] = finding.unsound
    assert "check `fails test -f done.txt` fails even with the reference solution" in line
    assert "field `pass_if`" in line and "scenario.yaml" in line


def test_a_fixture_that_fails_to_build_is_unsound(root):
    finding = check(scenario(root, solution=["touch done.txt"], setup=["sh -c 'exit 3'"]))
    assert not finding.ok and finding.exit_code == 1
    [line] = finding.unsound
    assert "the fixture cannot be built" in line and "setup command `sh -c 'exit 3'` failed (exit code 3)" in line


def test_trace_checks_see_the_solutions_commands_with_their_cwd(root):
    """`ran: {cwd: sub}` holds only when the solution runs the command in sub/, as an agent's bash call would."""
    pass_if = [{"ran": {"command": "ls", "cwd": "sub"}}, {"succeeds": {"run": "test -f done.txt"}}]
    right = check(scenario(root, "right", solution=["touch done.txt", "cd sub && ls"], pass_if=pass_if))
    assert right.ok, right.lines()
    wrong = check(scenario(root, "wrong", solution=["touch done.txt", "ls sub"], pass_if=pass_if))
    assert not wrong.ok and "check `ran ls" in wrong.unsound[0]


def test_a_patch_beside_the_scenario_is_applied_in_the_sandbox(root):
    folder = scenario(root, solution={"patch": "fix.patch"}, pass_if=[{"succeeds": {"run": "grep -q fixed README.md"}}])
    write(folder / "fix.patch", "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-fixture\n+fixed\n")
    finding = check(folder)
    assert finding.ok, finding.lines()
    write(folder / "fix.patch", "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-not what is there\n+fixed\n")
    stale = check(folder)
    assert not stale.ok and "check `succeeds grep -q fixed README.md` fails" in stale.unsound[0]


@pytest.mark.parametrize("patch, why", [("../../outside.patch", "points outside"), ("missing.patch", "is not a file")])
def test_a_patch_outside_the_scenario_or_missing_is_bad_input(root, patch, why):
    write(root / "outside.patch", "x\n")
    folder = scenario(root, solution={"patch": patch})
    with pytest.raises(BadInput, match=why):
        sc.load(folder)
    assert check(folder).exit_code == 2


def test_a_scenario_without_a_solution_is_warned_about_not_refused(root):
    finding = check(scenario(root))
    assert finding.ok and finding.solution is None
    assert any("no `solution`" in w for w in finding.warnings)


def test_the_solution_never_enters_a_replays_cache_key():
    """Agents never see the solution: a scenario's dump (the trial key's part) leaves it out."""
    loaded = sc.load(BUNDLED[0])
    assert loaded.scenario.solution is not None and "solution" not in loaded.scenario.model_dump(mode="json")


def test_every_bundled_scenario_has_a_solution_and_is_sound():
    book = Playbook(REPO / "playbook", root=REPO)
    folders = suite.folders(REPO / "scenarios") + suite.folders(REPO / "scenarios" / "small-model")
    findings = validate_folders(folders, book, control=True, cache=None)
    assert len(findings) == len(BUNDLED) >= 12
    for finding in findings:
        assert finding.ok, (finding.scenario, finding.lines())
        assert finding.control.verdict == "failed" and finding.solution.verdict == "passed", finding.scenario


def test_cli_scenario_validate_exits_1_naming_the_failing_check(cli, root):
    scenario(root, solution=["touch done.txt"], pass_if=[{"succeeds": {"run": "test -f done.txt"}},
                                                         {"fails": {"run": "test -f done.txt"}}])
    result = cli("scenario", "validate", "--json")
    assert result.code == 1, result.err
    [data] = json.loads(result.out)
    assert data["solution"] == "failed"
    assert any("check `fails test -f done.txt` fails even with the reference solution" in u for u in data["unsound"])


def unsound_proposal(root: Path) -> Path:
    from helpers import incident_yaml, rule_yaml

    scenario(root, "monorepo-test-cwd", solution=["touch done.txt"], pass_if=[
        {"succeeds": {"run": "test -f done.txt"}}, {"fails": {"run": "test -f done.txt"}}])
    for incident in ("2026-07-14-0932", "2026-07-21-1105"):
        write(root / "incidents" / f"{incident}.yaml", incident_yaml(incident))
    return write(root / "playbook" / "proposed" / "rule-0001.yaml", rule_yaml("rule-0001"))


def test_rule_validate_does_not_say_ok_for_a_rule_whose_scenario_is_unsound(cli, root):
    rule = unsound_proposal(root)
    result = cli("rule", "validate", str(rule))
    assert result.code == 2 and f"{rule}: ok" not in result.out
    assert "cannot prove it" in result.err and "check `fails test -f done.txt`" in result.err


def test_playbook_check_does_not_say_ok_for_a_proposal_whose_scenario_is_unsound(cli, root):
    unsound_proposal(root)
    assert cli("playbook", "render").code == 0
    result = cli("playbook", "check")
    assert result.code != 0 and "playbook ok" not in result.out
    assert "scenario monorepo-test-cwd cannot prove its rule" in result.err
    assert "check `fails test -f done.txt`" in result.err
