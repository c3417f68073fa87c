"""The harness's attacks (docs/security.md) through `replaybook replay` and `replaybook gate`.

A rule PR's scenario is written by whoever can push a branch. Fake secrets are
planted in the harness's environment and the cache key; no output, no file the
run leaves, and no verdict may carry them, and no scenario code may run on the host.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import write
from support.gate import setup

SECRETS = {"GITHUB_TOKEN": "ghp_plantedCLI0123456789abcdef", "ANTHROPIC_API_KEY": "sk-ant-plantedCLI-0123456789",
           "REPLAYBOOK_CACHE_SECRET": "planted-cache-secret-0123456789"}


@pytest.fixture(autouse=True)
def planted(monkeypatch, tmp_path):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    key = tmp_path / "xdg" / "replaybook" / "cache.key"
    key.parent.mkdir(parents=True)
    key.write_text("planted-cache-key-file-0123456789")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return [*SECRETS.values(), "planted-cache-key-file-0123456789"]


def leaked(planted: list[str], *texts: str) -> list[str]:
    return [v for v in planted for t in texts if v in t]


def files_text(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts)


def hook(marker: Path) -> str:
    return f"#!/bin/sh\necho ran >> {marker}\ncat /proc/$PPID/environ >> {marker} 2>/dev/null\nexit 1\n"


def own_scenario(root: Path) -> Path:
    return root / "scenarios" / "own"


def edit_scenario(root: Path, **fields) -> None:
    path = own_scenario(root) / "scenario.yaml"
    data = yaml.safe_load(path.read_text())
    data.update(fields)
    path.write_text(yaml.safe_dump(data))


def test_replay_and_gate_on_a_scenario_whose_setup_plants_fsmonitor_run_nothing_on_the_host(cli, root, tmp_path, planted):
    marker = tmp_path / "pwned"
    path = setup(root)
    write(own_scenario(root) / "repo" / "hook.sh", hook(marker))
    edit_scenario(root, setup=[
        "chmod +x hook.sh",
        "bash -c 'mkdir sub && cd sub && git init -q && echo a > f && git add f && "
        "git -c user.name=a -c user.email=b commit -qm x && git config core.fsmonitor $PWD/../hook.sh'"])
    policy = yaml.safe_load((own_scenario(root) / "policy.yaml").read_text())
    for branch in ("with_rule", "without_rule"):
        policy[branch].insert(0, {"bash": "echo dirty > sub/f"})
    (own_scenario(root) / "policy.yaml").write_text(yaml.safe_dump(policy))
    for argv in (["replay", str(own_scenario(root)), "--trials", "2"], ["gate", str(path), "--trials", "3"]):
        result = cli(*argv, "--runs-dir", str(tmp_path / "runs"))
        assert not marker.exists(), f"the scenario's fsmonitor ran on the host ({argv[0]})"
        assert result.code in (0, 1), result.err
        assert not leaked(planted, result.out, result.err, files_text(tmp_path / "runs"), files_text(root))


@pytest.mark.parametrize("target", ["/proc/self/environ", "../../../../xdg/replaybook/cache.key"])
def test_gate_and_replay_on_a_requirements_file_outside_say_nothing_of_it(cli, root, tmp_path, planted, target):
    path = setup(root)
    edit_scenario(root, requirements_file=target)
    for argv in (["gate", str(path), "--trials", "3"], ["replay", str(own_scenario(root))]):
        result = cli(*argv)
        assert result.code == 2, (argv, result.out, result.err)
        assert "requirements_file" in result.err and "inside the fixture" in result.err
        assert not leaked(planted, result.out, result.err), argv
        assert "PATH=" not in result.err and "HOME=" not in result.err


def test_an_error_that_quotes_a_secret_is_redacted_at_the_boundary(cli, root, planted):
    """Whatever text a scenario makes the harness say: the error boundary redacts what this process holds."""
    folder = root / "scenarios" / SECRETS["GITHUB_TOKEN"]
    write(folder / "scenario.yaml", "id: other\n")
    result = cli("replay", str(folder))
    assert result.code == 2
    assert not leaked(planted, result.out, result.err) and "***" in result.err


def test_replay_of_an_agent_that_reads_the_harness_environment_leaks_nothing(cli, root, tmp_path, planted):
    setup(root)
    policy = yaml.safe_load((own_scenario(root) / "policy.yaml").read_text())
    policy["without_rule"].insert(0, {"bash": "cat /proc/1/environ /proc/*/environ > env.txt 2>/dev/null; "
                                              "env >> env.txt; cat ~/.config/replaybook/cache.key >> env.txt; true"})
    (own_scenario(root) / "policy.yaml").write_text(yaml.safe_dump(policy))
    result = cli("replay", str(own_scenario(root)), "--runs-dir", str(tmp_path / "runs"), "--json")
    assert result.code in (0, 1), result.err
    assert "env.txt" in files_text(tmp_path / "runs")  # the dump happened
    assert not leaked(planted, result.out, result.err, files_text(tmp_path / "runs"))

