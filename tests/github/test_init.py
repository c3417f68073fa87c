"""`replaybook init`: it sets a repository up, updates what it wrote, and never clobbers what you changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from helpers import REPO, write

from bot import config as config_mod
from bot.github import init as init_mod

CAPTURE = ".github/workflows/replaybook-capture.yml"
ADMIT = ".github/workflows/replaybook-admit.yml"
MANAGED = [*init_mod.WORKFLOWS.values(), init_mod.ISSUE_FORM]
RELEASE_SHA = "0123456789abcdef0123456789abcdef01234567"  # stands in for the commit of tag v<version>
# A commit given by hand (--actions-sha, $REPLAYBOOK_ACTIONS_SHA) is not known to carry a tag.
PIN = f"{RELEASE_SHA} # untagged"


@pytest.fixture(autouse=True)
def _release_commit(monkeypatch):
    """A build from a checkout records no release commit: these tests name one, as a release would."""
    monkeypatch.setenv(init_mod.ACTIONS_SHA_ENV, RELEASE_SHA)


def test_init_pins_the_actions_to_a_commit_never_a_tag(cli, root, monkeypatch):
    assert cli("init").code == 0
    text = (root / CAPTURE).read_text()
    assert f"uses: replaybook/replaybook/actions/capture@{PIN}" in text
    assert "@v" not in text and "unpinned-uses" not in text


def _bare_install(tmp_path, info: dict | None) -> dict:
    """The package copied outside any checkout (as an install is), with ``info`` as its build record."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(REPO / "bot", site / "bot", ignore=shutil.ignore_patterns("__pycache__", "_build_info.json"))
    if info is not None:
        (site / "bot" / "_build_info.json").write_text(json.dumps(info))
    env = {k: v for k, v in os.environ.items() if k != init_mod.ACTIONS_SHA_ENV}
    return {**env, "PYTHONPATH": str(site)}


def _init(env, cwd, *args):
    return subprocess.run([sys.executable, "-m", "bot", "init", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_init_without_a_known_commit_says_how_to_give_one(cli, root, tmp_path):
    done = _init(_bare_install(tmp_path, None), root)
    assert done.returncode == 2 and "--actions-sha" in done.stderr and "Traceback" not in done.stderr
    assert not (root / CAPTURE).exists()
    bad = cli("init", "--actions-sha", "v0.1.0")
    assert bad.code == 2 and "40" in bad.err


def test_init_pins_to_the_recorded_build_commit_and_refuses_a_dirty_build(root, tmp_path):
    sha = "fedcba9876543210fedcba9876543210fedcba98"
    dirty = _init(_bare_install(tmp_path / "a", {"commit": sha, "dirty": True, "tag": None}), root)
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr and "--actions-sha" in dirty.stderr
    assert not (root / CAPTURE).exists()
    override = _init(_bare_install(tmp_path / "b", {"commit": sha, "dirty": True, "tag": None}), root,
                     "--actions-sha", RELEASE_SHA)
    assert override.returncode == 0, override.stderr
    assert f"capture@{RELEASE_SHA}" in (root / CAPTURE).read_text()
    (root / CAPTURE).unlink()
    clean = _init(_bare_install(tmp_path / "c", {"commit": sha, "dirty": False, "tag": "v0.1.0"}), root)
    assert clean.returncode == 0, clean.stderr
    assert f"capture@{sha} # v0.1.0\n" in (root / CAPTURE).read_text()  # the tag the build recorded


def test_a_build_without_a_tag_pins_its_commit_as_untagged_and_says_so_in_version(root, tmp_path):
    sha = "fedcba9876543210fedcba9876543210fedcba98"
    env = _bare_install(tmp_path, {"commit": sha, "dirty": False, "tag": None})
    done = _init(env, root)
    assert done.returncode == 0, done.stderr
    text = (root / CAPTURE).read_text()
    assert f"capture@{sha} # untagged\n" in text and "# v0" not in text  # Renovate reads the comment as the version
    shown = subprocess.run([sys.executable, "-m", "bot", "--version"], env=env, capture_output=True, text=True, cwd=root,
                           timeout=120)
    assert shown.stdout.strip() == f"replaybook {init_mod.version()} (fedcba9, untagged)"
    tagged = _bare_install(tmp_path / "t", {"commit": sha, "dirty": False, "tag": "v0.1.0"})
    shown = subprocess.run([sys.executable, "-m", "bot", "--version"], env=tagged, capture_output=True, text=True, cwd=root,
                           timeout=120)
    assert shown.stdout.strip() == f"replaybook {init_mod.version()} (fedcba9, v0.1.0)"


def _older(root, path: str, old_version: str = "0.0.9") -> str:
    """Rewrite ``path`` as an earlier Replaybook's init would have written it (untouched since)."""
    _, _, body = init_mod.split_header((root / path).read_text(encoding="utf-8"))
    old_body = body.replace(f"@v{init_mod.version()}", f"@v{old_version}").replace("timeout-minutes: 60",
                                                                                   "timeout-minutes: 45")
    assert old_body != body
    text = init_mod.header("yaml", old_body, old_version) + old_body
    (root / path).write_text(text, encoding="utf-8")
    return text


def test_init_sets_up_an_empty_repository(cli, root):
    result = cli("init")
    assert result.code == 0, result.err
    for path in [*MANAGED, ".replaybook.yml", "playbook/PLAYBOOK.md", "playbook/rules/.gitkeep",
                 "playbook/archive/.gitkeep", "scenarios/README.md"]:
        assert (root / path).is_file(), path
        assert f"`{path}`" in result.out
    settings = config_mod.load(root)  # loads, and every key is one Config accepts
    assert settings.source == root / ".replaybook.yml" and settings.config == config_mod.Config()
    assert cli("playbook", "check").code == 0
    assert "No rules yet" in (root / "playbook" / "PLAYBOOK.md").read_text()
    assert "scenario.yaml" in (root / "scenarios" / "README.md").read_text()


def test_the_workflows_pin_the_actions_to_this_version(cli, root):
    cli("init")
    version = init_mod.version()
    for name, path in init_mod.WORKFLOWS.items():
        text = (root / path).read_text()
        assert f"uses: {init_mod.ACTIONS_REPO}/actions/{name}@{PIN}" in text
        assert text.startswith(f"# Written by `replaybook init` {version} (sha256:")
        assert yaml.safe_load(text)["name"] == f"replaybook-{name}"


def test_check_lists_what_is_missing_and_passes_once_done(cli, root):
    before = cli("init", "--check")
    assert before.code == 1 and "missing" in before.out and "would write it" in before.out
    assert not (root / CAPTURE).exists(), "--check wrote something"
    assert cli("init").code == 0
    after = cli("init", "--check")
    assert after.code == 0, after.out + after.err
    assert "missing" not in after.out and "| current |" in after.out


def test_a_file_from_an_older_version_is_updated_silently(cli, root):
    cli("init")
    current = (root / ADMIT).read_text()
    _older(root, ADMIT)
    check = cli("init", "--check")
    assert check.code == 1 and "| stale |" in check.out and ADMIT in check.err
    result = cli("init")
    assert result.code == 0, result.err
    assert "updated from 0.0.9" in result.out
    assert (root / ADMIT).read_text() == current


def test_an_edited_file_that_init_would_change_is_refused_naming_it_and_force(cli, root):
    cli("init")
    edited = _older(root, ADMIT).replace("timeout-minutes: 45", "timeout-minutes: 90")
    (root / ADMIT).write_text(edited)
    (root / CAPTURE).unlink()  # init has other work too: none of it happens when one file is refused
    result = cli("init")
    assert result.code == 2
    assert ADMIT in result.err and "--force" in result.err and "Nothing was written" in result.err
    assert (root / ADMIT).read_text() == edited and not (root / CAPTURE).exists()
    check = cli("init", "--check")
    assert check.code == 1 and "| conflict |" in check.out
    forced = cli("init", "--force")
    assert forced.code == 0, forced.err
    assert "timeout-minutes: 90" not in (root / ADMIT).read_text() and (root / CAPTURE).exists()


def test_an_edit_is_kept_while_init_has_nothing_newer(cli, root):
    cli("init")
    text = (root / CAPTURE).read_text().replace("timeout-minutes: 15", "timeout-minutes: 20")
    (root / CAPTURE).write_text(text)
    result = cli("init")
    assert result.code == 0 and (root / CAPTURE).read_text() == text
    check = cli("init", "--check")
    assert check.code == 0 and "| modified |" in check.out


def test_a_workflow_of_the_same_name_that_init_never_wrote_is_refused(cli, root):
    write(root / ADMIT, "name: my own admit\n")
    result = cli("init")
    assert result.code == 2 and ADMIT in result.err
    assert (root / ADMIT).read_text() == "name: my own admit\n"


def test_the_users_config_and_playbook_are_never_overwritten(cli, root):
    write(root / ".replaybook.yml", """
        cap: 12
        paths: {playbook: book, scenarios: replays}
        labels: {incident: agent-incident}
        """)
    write(root / "book" / "PLAYBOOK.md", "# mine\n")
    result = cli("init", "--force")
    assert result.code == 0, result.err
    assert "cap: 12" in (root / ".replaybook.yml").read_text()
    assert (root / "book" / "PLAYBOOK.md").read_text() == "# mine\n"
    assert (root / "book" / "rules").is_dir() and (root / "replays" / "README.md").is_file()
    assert not (root / "playbook").exists() and not (root / "scenarios").exists()
    form = yaml.safe_load((root / init_mod.ISSUE_FORM).read_text())
    assert form["labels"] == ["agent-incident"]


def test_a_broken_config_is_bad_input(cli, root):
    write(root / ".replaybook.yml", "cap: lots\n")
    result = cli("init")
    assert result.code == 2 and "cap" in result.err
    assert not (root / CAPTURE).exists()


def test_capture_watches_the_repositorys_own_workflows(cli, root):
    write(root / ".github" / "workflows" / "build.yml", "name: Build\non: push\njobs: {}\n")
    write(root / ".github" / "workflows" / "lint.yaml", "on: push\njobs: {}\n")
    cli("init")
    doc = yaml.safe_load((root / CAPTURE).read_text())
    assert doc[True]["workflow_run"]["workflows"] == ["Build", "lint.yaml"]  # PyYAML reads `on` as True
    cli("init", "--force", "--watch", "Build")
    assert yaml.safe_load((root / CAPTURE).read_text())[True]["workflow_run"]["workflows"] == ["Build"]


def test_a_watched_name_that_is_no_workflow_is_refused_naming_those_present(cli, root):
    write(root / ".github" / "workflows" / "ci.yml", "name: CI\non: push\njobs: {}\n")
    write(root / ".github" / "workflows" / "lint.yaml", "on: push\njobs: {}\n")
    result = cli("init", "--watch", "NoSuch")
    assert result.code == 2, result
    assert "--watch 'NoSuch'" in result.err and "CI, lint.yaml" in result.err
    assert not (root / CAPTURE).exists()


def test_init_in_a_subfolder_sets_up_the_repository_root(tmp_path):
    repo = tmp_path / "their-repo"
    (repo / ".git").mkdir(parents=True)  # found by walking up; init never runs git on the user's tree
    write(repo / ".github" / "workflows" / "ci.yml", "name: CI\non: push\njobs: {}\n")
    sub = repo / "packages" / "api"
    sub.mkdir(parents=True)
    env = {**os.environ, init_mod.ACTIONS_SHA_ENV: RELEASE_SHA}
    done = subprocess.run([sys.executable, "-m", "bot", "init"], cwd=sub, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"inside the git repository at {repo}" in done.stderr
    assert (repo / CAPTURE).is_file() and not (sub / ".github").exists()
    assert yaml.safe_load((repo / CAPTURE).read_text())[True]["workflow_run"]["workflows"] == ["CI"]


def test_path_argument_json_and_a_missing_folder(cli, root, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    result = cli("init", str(target), "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["version"] == init_mod.version() and {f["state"] for f in data["files"]} == {"missing"}
    assert (target / CAPTURE).is_file() and not (root / CAPTURE).exists()
    missing = cli("init", str(tmp_path / "nope"))
    assert missing.code == 2 and "not a folder" in missing.err


def test_this_repositorys_workflows_are_what_init_writes_with_local_actions():
    plan = init_mod.plan(REPO, local_actions=True)
    states = {f.path: f.state for f in plan.files}
    assert all(states[path] == "current" for path in MANAGED), states
    assert plan.needs_work == [], "run: replaybook init --local-actions"
