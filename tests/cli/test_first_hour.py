"""The first hour in a user's own repository: the README's commands work as shown, in a fresh
`git init` repository, through the installed console script, the way a user types them."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

SCRIPT = Path(sys.executable).parent / "replaybook"


def readme_commands() -> list[str]:
    """The `replaybook …` lines of the README's "First steps in your repository" block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## First steps in your repository", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip().startswith("replaybook ")]


@pytest.fixture
def user_repo(tmp_path):
    repo = tmp_path / "their-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("node_modules/\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["HOME"] = str(tmp_path / "home")
    # A release records the commit its actions are pinned to; a build from a checkout (this one) has
    # none, so it is given as a user of a release would have it.
    env["REPLAYBOOK_ACTIONS_SHA"] = "0123456789abcdef0123456789abcdef01234567"
    return repo, env


def run(repo: Path, env: dict, line: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    args = shlex.split(line)
    assert args[0] == "replaybook"
    exe = str(SCRIPT) if SCRIPT.exists() else shutil.which("replaybook")
    return subprocess.run([exe, *args[1:]], cwd=repo, env=env, input=stdin, capture_output=True, text=True,
                          timeout=300)


def test_the_readme_first_steps_run_in_a_fresh_repository(user_repo):
    repo, env = user_repo
    commands = readme_commands()
    assert "replaybook init" not in commands and len(commands) >= 8
    init = run(repo, env, "replaybook init")
    assert init.returncode == 0, init.stderr
    assert re.search(r"https://github.com/replaybook/replaybook/blob/v[^/]+/docs/install.md", init.stdout)
    assert (repo / ".gitignore").read_text() == "node_modules/\n.replaybook/\n"
    (repo / "ci.log").write_text((REPO / "tests" / "data" / "logs" / "gha_pytest.log").read_text())
    answers = "Fix the upload test\nCI red\nTests run from the root\nEach package has its own pytest.ini\n\n20\n"
    outcomes = {}
    for line in commands:
        if "ANTHROPIC_API_KEY" in line or " --agent claude-code" in line:
            continue  # needs a real key: not offline
        result = run(repo, env, line, stdin=answers if line == "replaybook incident new" else None)
        outcomes[line] = result
        assert "Traceback" not in result.stderr, (line, result.stderr)
        if line == "replaybook replay monorepo-test-cwd":
            assert result.returncode == 1 and "not every trial passed" in result.stderr  # the mistake, replayed
            continue
        if line.startswith(("replaybook distill", "replaybook gate")):
            assert result.returncode == 2, (line, result.stderr)  # no model / no such proposal: said, exit 2
            continue
        assert result.returncode == 0, (line, result.stdout, result.stderr)
    assert "recorded" in outcomes["replaybook capture log ci.log"].stdout
    assert "created section in CLAUDE.md" in outcomes["replaybook playbook render --section CLAUDE.md"].stdout
    assert "distill needs a model" in outcomes["replaybook distill"].stderr
    incidents = sorted((repo / "incidents").glob("*.yaml"))
    assert len(incidents) == 2 and "cost_minutes: 20" in "".join(p.read_text() for p in incidents)


def test_replay_list_shows_the_bundled_scenarios_it_can_run(user_repo):
    repo, env = user_repo
    listing = run(repo, env, "replaybook replay list")
    assert listing.returncode == 0
    assert "monorepo-test-cwd (bundled)" in listing.stdout and "bundled:monorepo-test-cwd" in listing.stdout
    assert run(repo, env, "replaybook replay list --ids").stdout.strip() == "[]"  # the suite is the repo's own
    bad = run(repo, env, "replaybook replay bundled:nope")
    assert bad.returncode == 2 and "bundled:monorepo-test-cwd" in bad.stderr


def test_listing_empty_stores_is_not_an_error(user_repo):
    repo, env = user_repo
    for line, said in (("replaybook incident list", "no incidents yet"), ("replaybook trace list", "no tasks recorded"),
                       ("replaybook incident validate", "nothing to validate")):
        result = run(repo, env, line)
        assert result.returncode == 0 and said in result.stdout, (line, result.stderr)


def test_render_says_updated_the_second_time(user_repo):
    repo, env = user_repo
    assert run(repo, env, "replaybook init").returncode == 0
    (repo / "CLAUDE.md").write_text("# Notes\n")
    assert "updated section in CLAUDE.md" in run(repo, env, "replaybook playbook render --section CLAUDE.md").stdout
    assert "unchanged section in CLAUDE.md" in run(repo, env, "replaybook playbook render --section CLAUDE.md").stdout
