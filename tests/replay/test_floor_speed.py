"""What makes a replay cheaper must keep it exact: the shared baseline, pyenv on PATH (issue #17)."""

from __future__ import annotations

import os
from pathlib import Path

from bot.replay.sandbox.workspace import Sandbox
from bot.replay.trace.launchers import resolve_path


def _objects(gitdir: Path) -> set[str]:
    return {str(p.relative_to(gitdir)) for p in (gitdir / "objects").rglob("*") if p.is_file()}


def test_sandboxes_of_one_fixture_share_one_baseline_the_agent_cannot_change(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("REPLAYBOOK_CACHE_DIR", str(cache))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("alpha\n")
    with Sandbox(repo) as sb:
        first = sb.baseline
        done = sb.run(["bash", "-c", "echo z > z.txt && git add z.txt && git commit -qm mine && "
                                     "git status --porcelain && git log --format=%s"], timeout_s=30)
        assert done.rc == 0 and done.stdout == "mine\nreplaybook baseline\n", done.stderr
        (template,) = (cache / "baselines").iterdir()
        before = _objects(template)
        # The template is read-only inside: the agent cannot plant an object in it.
        attack = sb.run(["bash", "-c", f"echo x > {template}/objects/planted"], timeout_s=30)
        assert attack.rc != 0
        assert [(f.path, f.status) for f in sb.diff().files] == [("z.txt", "A")]
    assert _objects(template) == before  # the agent's commit and the diff wrote to the sandbox's own folders
    with Sandbox(repo) as again:
        assert again.baseline == first and again.diff().files == []
        assert again.run(["git", "status", "--porcelain"], timeout_s=30).stdout == ""
    assert len(list((cache / "baselines").iterdir())) == 1
    (repo / "a.txt").write_text("changed\n")
    with Sandbox(repo) as changed:
        assert changed.baseline != first  # new content, new template
        assert changed.diff().files == []
    assert len(list((cache / "baselines").iterdir())) == 2


def _pyenv(root: Path, version: str = "3.11.7") -> Path:
    (root / "shims").mkdir(parents=True)
    (root / "libexec").mkdir()
    (root / "libexec" / "pyenv").write_text("#!/bin/sh\n")
    (root / "versions" / version / "bin").mkdir(parents=True)
    (root / "version").write_text(f"{version}\n")
    return root


def test_pyenv_versions_go_on_path_before_its_launchers(tmp_path):
    root = _pyenv(tmp_path / ".pyenv")
    path = os.pathsep.join([str(root / "shims"), "/usr/bin"])
    bins = str(root / "versions" / "3.11.7" / "bin")
    assert resolve_path(path, environ={}) == os.pathsep.join([bins, str(root / "shims"), "/usr/bin"])
    assert resolve_path(path, environ={"PYENV_VERSION": "system"}) == path
    assert resolve_path(path, environ={"PYENV_VERSION": "../../etc"}) == path
    fixture = tmp_path / "repo"
    fixture.mkdir()
    (fixture / ".python-version").write_text("3.9\n")
    assert resolve_path(path, fixture, environ={}) == path  # pyenv would choose by the fixture's file
    assert resolve_path("/usr/bin:/bin", environ={}) == "/usr/bin:/bin"
