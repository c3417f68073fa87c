"""Every build knows its commit: a wheel (and a wheel from the sdist) built from a clean checkout
records it, and `replaybook init` from that build, in a fresh venv and a fresh repository, pins the
actions to it with no flag. Slow (a build and a venv): it is the release path a team installs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers import REPO


def _run(*argv, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A clean clone of this checkout's HEAD, its sdist and wheel, and the wheel built from the sdist."""
    tmp = tmp_path_factory.mktemp("build")
    clone = tmp / "clone"
    _run("git", "clone", "-q", "--no-hardlinks", REPO, clone)
    head = _run("git", "-C", clone, "rev-parse", "HEAD").stdout.strip()
    dist = tmp / "dist"
    temp = tmp / "temp"  # the build's own temporary folder, to see what it leaves there
    temp.mkdir()
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, clone,
         env={**os.environ, "TMPDIR": str(temp)})
    sdist_dir = tmp / "sdist"
    _run(sys.executable, "-c", "import sys; from hatchling.builders.sdist import SdistBuilder as B; "
         "print(next(iter(B(sys.argv[1]).build(directory=sys.argv[2]))))", clone, sdist_dir,
         env={**os.environ, "PYTHONPATH": _hatchling_path(tmp)})
    return {"head": head, "wheel": next(dist.glob("*.whl")), "sdist": next(sdist_dir.glob("*.tar.gz")), "tmp": tmp,
            "temp": temp}


def _hatchling_path(tmp: Path) -> str:
    """Hatchling, installed where only this test sees it (it is a build dependency, not ours)."""
    target = tmp / "hatchling"
    if not target.exists():
        _run(sys.executable, "-m", "pip", "install", "-q", "--target", target, "hatchling>=1.25")
    return str(target)


def _recorded(archive: Path) -> dict:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return json.loads(z.read("bot/_build_info.json"))
    with tarfile.open(archive) as t:
        [member] = [m for m in t.getmembers() if m.name.endswith("/bot/_build_info.json")]
        return json.loads(t.extractfile(member).read())


def test_the_wheel_and_the_sdist_record_the_commit_they_were_built_from(built):
    for archive in (built["wheel"], built["sdist"]):
        info = _recorded(archive)
        assert info["commit"] == built["head"] and info["dirty"] is False, archive.name
    with zipfile.ZipFile(built["wheel"]) as z:  # and they carry the bundled scenarios
        assert any(n.startswith("bot/_bundled/scenarios/") and n.endswith("scenario.yaml") for n in z.namelist())


def test_a_build_leaves_no_build_record_in_the_temporary_folder(built):
    assert not list(built["temp"].rglob("replaybook-build-info-*")), "hatch_build.py left its record behind"


def test_a_wheel_built_from_the_sdist_keeps_the_commit(built):
    tmp = built["tmp"]
    unpacked = tmp / "from-sdist"
    with tarfile.open(built["sdist"]) as t:
        t.extractall(unpacked, filter="data")
    [src] = list(unpacked.iterdir())
    out = tmp / "dist2"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src)
    assert _recorded(next(out.glob("*.whl")))["commit"] == built["head"]


def test_init_from_the_built_wheel_pins_the_actions_to_the_build_commit(built):
    tmp = built["tmp"]
    venv = tmp / "venv"
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "pip", "install", "-q", built["wheel"])
    repo = tmp / "their-repo"
    repo.mkdir()
    _run("git", "init", "-q", repo)
    env = {k: v for k, v in os.environ.items() if k != "REPLAYBOOK_ACTIONS_SHA"}
    _run(venv / "bin" / "replaybook", "init", cwd=repo, env=env)
    capture = (repo / ".github" / "workflows" / "replaybook-capture.yml").read_text()
    assert f"replaybook/replaybook/actions/capture@{built['head']}" in capture


def test_a_build_from_a_dirty_checkout_refuses_to_guess(built, tmp_path):
    clone = tmp_path / "dirty"
    _run("git", "clone", "-q", "--no-hardlinks", REPO, clone)
    (clone / "README.md").write_text("changed\n")
    out = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, clone)
    assert _recorded(next(out.glob("*.whl")))["dirty"] is True


def _uvx(*args, env, cwd=None) -> subprocess.CompletedProcess:
    from uv import find_uv_bin

    return _run(find_uv_bin(), "tool", "run", *args, env=env, cwd=cwd)


def _clean_env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("REPLAYBOOK_ACTIONS_SHA", "VIRTUAL_ENV")}
    env.update(UV_TOOL_DIR=str(tmp_path / "tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"))
    return env


def _init_pins_to(head: str, tmp_path: Path, init) -> None:
    """``init(repo)`` runs `replaybook init` in a fresh `git init` folder; its workflows must pin to ``head``."""
    repo = tmp_path / "their-repo"
    repo.mkdir()
    _run("git", "init", "-q", repo)
    init(repo)
    capture = (repo / ".github" / "workflows" / "replaybook-capture.yml").read_text()
    assert f"replaybook/replaybook/actions/capture@{head}" in capture


def test_uv_tool_install_of_the_wheel_gives_a_replaybook_that_inits_a_fresh_repository(built, tmp_path):
    from uv import find_uv_bin

    env = _clean_env(tmp_path)
    _run(find_uv_bin(), "tool", "install", "--quiet", built["wheel"], env=env)
    exe = tmp_path / "bin" / "replaybook"
    assert _run(exe, "--version", env=env).stdout.strip()
    _init_pins_to(built["head"], tmp_path, lambda repo: _run(exe, "init", cwd=repo, env=env))


def test_twine_accepts_the_wheel_and_the_sdist_and_both_carry_the_bundled_scenarios(built, tmp_path):
    _uvx("twine", "check", "--strict", built["wheel"], built["sdist"], env=_clean_env(tmp_path))
    with zipfile.ZipFile(built["wheel"]) as z:
        in_wheel = set(z.namelist())
    with tarfile.open(built["sdist"]) as t:
        in_sdist = {m.name for m in t.getmembers()}
    for sid in ("lint-disable", "monorepo-test-cwd"):
        assert any(n.endswith(f"{sid}/scenario.yaml") for n in in_wheel), sid
        assert any(n.endswith(f"{sid}/scenario.yaml") for n in in_sdist), sid


def test_pipx_install_of_the_wheel_gives_a_replaybook_that_inits_a_fresh_repository(built, tmp_path):
    env = {**_clean_env(tmp_path), "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "pipx-bin")}
    _uvx("pipx", "install", "--python", sys.executable, built["wheel"], env=env)
    exe = tmp_path / "pipx-bin" / "replaybook"
    _init_pins_to(built["head"], tmp_path, lambda repo: _run(exe, "init", cwd=repo, env=env))


def test_uvx_from_the_wheel_inits_a_fresh_repository(built, tmp_path):
    env = _clean_env(tmp_path)
    _init_pins_to(built["head"], tmp_path,
                  lambda repo: _uvx("--from", built["wheel"], "replaybook", "init", env=env, cwd=repo))


def test_a_build_of_a_tagged_release_records_its_tag_and_commit(built, tmp_path):
    clone = tmp_path / "clone"
    _run("git", "clone", "-q", "--no-hardlinks", REPO, clone)
    env = {**os.environ, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    _run("git", "-C", clone, "tag", "-a", "v9.9.9", "-m", "release", env=env)
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", clone)
    recorded = _recorded(next((tmp_path / "dist").glob("*.whl")))
    assert recorded["tag"] == "v9.9.9" and recorded["commit"] == built["head"] and not recorded["dirty"]
