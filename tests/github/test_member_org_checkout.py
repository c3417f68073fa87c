"""A member pinned to an org repository (issue 31): its admit and distill jobs check the org tier out read-only,
at the commit the committed `.replaybook.yml` pins, where the config reads it (docs/org.md)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from test_workflows_lint import ACTIONS, _clean, _load, actionlint, zizmor

from bot.github import init as init_mod

REF = "c" * 40
MEMBER = f"org: {{repo: acme/playbook, ref: {REF}}}\n"


def _init(tmp_path, config: str, local_actions: bool = False):
    (tmp_path / ".replaybook.yml").write_text(config, encoding="utf-8")
    init_mod.apply(init_mod.plan(tmp_path, local_actions=local_actions, actions_sha="0" * 40))
    return {name: tmp_path / init_mod.WORKFLOWS[name] for name in ("admit", "distill")}


def _org_steps(path):
    steps = [s for job in _load(path)["jobs"].values() for s in job.get("steps", [])]
    read = [i for i, s in enumerate(steps) if s.get("id") == "org"]
    return steps, read


@pytest.mark.parametrize("local_actions", [False, True])
def test_a_members_admit_and_distill_check_out_the_tier_read_only_and_pass_both_linters(tmp_path, local_actions):
    paths = _init(tmp_path, MEMBER, local_actions)
    if local_actions:
        shutil.copytree(ACTIONS, tmp_path / "actions")
    for name, path in paths.items():
        _clean(zizmor(path))
        _clean(actionlint(path))
        steps, (i,) = _org_steps(path)
        checkout = steps[i + 1]
        assert checkout["uses"].startswith("actions/checkout@") and checkout["if"] == "steps.org.outputs.repo != ''"
        assert checkout["with"] == {
            "repository": "${{ steps.org.outputs.repo }}", "ref": "${{ steps.org.outputs.ref }}",
            "path": ".replaybook/org/${{ steps.org.outputs.repo }}",
            "token": "${{ secrets.REPLAYBOOK_ORG_TOKEN || github.token }}", "persist-credentials": False}
        assert "${{" not in steps[i]["run"]
        first = next(j for j, s in enumerate(steps) if s.get("uses", "").startswith("actions/checkout@"))
        assert first < i, f"{name}: the repository's own checkout comes first (it would clean the tier away)"
        job = next(j for j in _load(path)["jobs"].values() if steps[i] in j.get("steps", []))
        assert job["permissions"].get("contents") in ("read", "write")
        assert "read" == job["permissions"]["contents"] or name == "distill"


def test_an_ordinary_repository_gets_no_org_checkout(tmp_path):
    for path in _init(tmp_path, "cap: 30\n").values():
        assert _org_steps(path)[1] == []


def _read_step(tmp_path, config: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, object]:
    """The step that reads the pin, run by bash in a folder holding ``config`` as its .replaybook.yml."""
    (tmp_path / "init").mkdir(exist_ok=True)
    steps, (i,) = _org_steps(_init(tmp_path / "init", MEMBER)["admit"])
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / ".replaybook.yml").write_text(config, encoding="utf-8")
    out = tmp_path / "out"
    out.write_text("")
    temp = tmp_path / "runner-temp"
    temp.mkdir(exist_ok=True)
    return subprocess.run(["bash", "-e", "-c", steps[i]["run"]], cwd=work, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(out), "RUNNER_TEMP": str(temp),
                               **(env or {})}), out


def test_the_pin_is_read_from_the_committed_config_and_passed_on(tmp_path):
    done, out = _read_step(tmp_path, MEMBER)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == f"repo=acme/playbook\nref={REF}\n"


def test_on_a_pr_the_pin_is_the_base_commits_never_the_prs(tmp_path):
    from support.github import git

    work = tmp_path / "work"
    work.mkdir()
    (work / ".replaybook.yml").write_text(MEMBER, encoding="utf-8")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    base = git(work, "rev-parse", "HEAD")
    moved = MEMBER.replace("acme/playbook", "mallory/tier").replace(REF, "e" * 40)
    done, out = _read_step(tmp_path, moved, {"BASE_SHA": base})  # the PR's head moves the pin
    assert done.returncode == 0, done.stderr
    assert out.read_text() == f"repo=acme/playbook\nref={REF}\n"
    done, out = _read_step(tmp_path, moved, {"BASE_SHA": "$(touch pwned)"})
    assert done.returncode == 2 and out.read_text() == "" and not (work / "pwned").exists()


@pytest.mark.parametrize("config", [
    f"org: {{repo: '../..', ref: {REF}}}\n",
    f"org: {{repo: 'acme/..', ref: {REF}}}\n",
    f"org: {{repo: 'acme/x$(touch pwned)', ref: {REF}}}\n",
    f"org: {{repo: \"acme/x\\nref={'d' * 40}\", ref: {REF}}}\n",
    "org: {repo: acme/playbook, ref: main}\n",
    "org: {repo: acme/playbook}\n",
], ids=["dotdot", "name-dotdot", "subshell", "newline", "branch", "no-ref"])
def test_a_pin_that_is_not_owner_name_at_a_commit_fails_the_step_and_passes_nothing_on(tmp_path, config):
    done, out = _read_step(tmp_path, config)
    assert done.returncode == 2 and "::error file=.replaybook.yml::" in done.stdout, (done.stdout, done.stderr)
    assert out.read_text() == "" and not (tmp_path / "work" / "pwned").exists()
