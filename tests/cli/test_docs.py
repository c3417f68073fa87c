"""The docs read the code: every command documented, schemas and README in sync."""

from __future__ import annotations

import json
import re

import click
from helpers import REPO

from bot.cli import reference
from bot.cli import schema as schemas
from bot.cli.main import cli


def test_every_command_has_help_text():
    for path, command, _ in reference.walk(cli, ["replaybook"]):
        assert (command.help or "").strip(), f"{' '.join(path)} has no help text"
        for param in command.params:
            if isinstance(param, click.Option) and param.name not in ("help",):
                assert param.help, f"{' '.join(path)} {param.opts[0]} has no help text"


def test_command_reference_is_in_sync():
    current = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == reference.render(), "run: python -m bot.cli.reference > docs/cli.md"


def test_listing_commands_take_json():
    for group, name in (("incident", "list"), ("playbook", "list"), ("playbook", "inject"), ("trace", "list"),
                        ("lessons", "list")):
        opts = {o for p in cli.commands[group].commands[name].params for o in getattr(p, "opts", [])}
        assert "--json" in opts, f"{group} {name} lacks --json"


def test_schema_files_are_in_sync(cli):
    for kind in schemas.KINDS:
        shipped = json.loads((REPO / "schemas" / f"{kind}.schema.json").read_text())
        assert shipped == schemas.schema(kind), "run: python -m bot.cli.schema"
    printed = json.loads(cli("schema", "rule").out)
    assert printed["properties"]["rule"]["description"].startswith("At most two sentences")
    assert "pass_if" in json.loads(cli("schema", "scenario").out)["required"]


def test_readme_opens_with_the_two_setup_commands_and_ci_runs_the_test_one():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    assert len(block) == 2
    demo, tests = block
    assert demo.endswith("replaybook demo") and "'.[test]'" in tests and "pytest" in tests
    assert tests in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readmes_first_step_runs_outside_github_actions(tmp_path):
    """`bash actions/sandbox.sh` opens both README commands and .ci/run: on a workstation or a CI machine there is
    no GITHUB_WORKSPACE or RUNNER_TEMP, and the seat it sources must still give it a folder of its own."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    done = subprocess.run(["bash", "actions/sandbox.sh"], cwd=REPO, capture_output=True, text=True,
                          env={**env, "TMPDIR": str(tmp_path)}, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replay sandbox" in done.stdout and len(list(tmp_path.glob("replaybook-work.*"))) == 1


def test_the_repositorys_own_playbook_is_sound(capsys, monkeypatch):
    from bot.cli.main import run

    assert run(["--root", str(REPO), "playbook", "check"]) == 0, capsys.readouterr().err
