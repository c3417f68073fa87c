"""Every YAML file a user or a PR supplies goes through one loader (bot/_util/yamlfile.py): no anchors or
aliases, a size cap, and errors that quote a bounded excerpt of the data, never its ``repr``."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO, write

from bot._util import yamlfile
from bot.errors import BadInput
from bot.replay.gateway.policy import load_policy

LEVELS = 9


def bomb() -> str:
    """A ~700-byte ``policy.yaml`` whose last list stands for 9**9 strings (the "billion laughs")."""
    lines = ['branch_on: "write right.txt"', 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, LEVELS):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    lines.append(f"with_rule: [*l{LEVELS - 1}]")  # a step that is a list: the old message quoted it with repr
    lines.append("without_rule: [{say: no}]")
    return "\n".join(lines) + "\n"


def scenario(root: Path, policy: str) -> Path:
    folder = root / "scenarios" / "own"
    write(folder / "repo" / "README.md", "fixture\n")
    write(folder / "scenario.yaml", yaml.safe_dump(
        {"id": "own", "task": "make it right", "repo": "repo", "pass_if": [{"succeeds": {"run": "test -f right.txt"}}],
         "budget": {"max_turns": 5, "timeout_s": 60, "max_cost_usd": 1.0}}, sort_keys=False))
    (folder / "policy.yaml").write_text(policy, encoding="utf-8")
    return folder


class _Counting(yaml.SafeLoader):
    composed = 0

    def compose_node(self, parent, index):
        type(self).composed += 1
        return super().compose_node(parent, index)


def test_the_bomb_is_small_and_would_be_huge():
    text = bomb()
    assert len(text.encode()) < 1024
    data = yaml.load(text, Loader=_Counting)  # the plain loader: shared references, cheap to build …
    inner = data["with_rule"][0]
    for _ in range(LEVELS - 1):
        inner = inner[0]
    assert inner[0] == "lol"  # … but 9**9 strings to anything that walks it (repr, deepcopy without memo, json)


def test_the_policy_loader_refuses_the_first_anchor_before_composing_anything_under_it(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(bomb(), encoding="utf-8")
    with pytest.raises(BadInput) as err:
        load_policy(path)
    shown = err.value.render()
    assert f"{path}:2:" in shown and "anchors (&name) are not allowed" in shown and "lol" not in shown, shown


def test_an_alias_alone_is_refused_at_its_own_line(tmp_path):
    with pytest.raises(BadInput) as err:
        yamlfile.parse(tmp_path / "x.yaml", "a: 1\nb: *a\n")
    assert ":2:" in err.value.message and "aliases" in err.value.message


def test_scenario_validate_refuses_the_bomb_with_exit_2_in_bounded_memory(root):
    """Run in a child capped at 600 MB of address space: the bomb expanded needs ~1.6 GB, so the old loader
    died of MemoryError (exit 3) there, however fast the machine; the refusal needs a few MB."""
    scenario(root, bomb())
    cap = 600 << 20

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "bot", "--root", str(root), "scenario", "validate", "--no-control"],
                          preexec_fn=limit, capture_output=True, text=True, env=env, cwd=root)
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "policy.yaml:2: YAML anchors (&name) are not allowed" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr and "lol" not in done.stdout + done.stderr


def test_a_bad_step_is_quoted_by_its_kind_and_size_never_its_repr(root, cli):
    big = "[" + ", ".join(['"' + "x" * 200 + '"'] * 400) + "]"
    scenario(root, f'branch_on: "write right.txt"\nwith_rule: [{big}]\nwithout_rule: ["\\e[31m@boss <!-- hi"]\n')
    result = cli("scenario", "validate", "--no-control")
    assert result.code == 2, result
    assert "`with_rule[0]`: a step is a mapping such as {bash: CMD}; got a list of 400 item(s)" in result.out
    assert "xxxxxxxxxx" not in result.out
    line = next(x for x in result.out.splitlines() if "without_rule[0]" in x)
    assert "\x1b" not in line and "@boss" not in line and "<!--" not in line and "[31m" not in line, line


def test_init_and_checks_read_yaml_through_the_one_loader():
    """No module of the bot parses YAML but the one loader (dumping is fine)."""
    offenders = []
    for path in sorted((REPO / "bot").rglob("*.py")):
        if path.name == "yamlfile.py":
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ("yaml.safe_load", "yaml.load(", "yaml.full_load", "yaml.unsafe_load", "yaml.compose",
                       "yaml.SafeLoader", "yaml.Loader", "yaml.CSafeLoader"):
            if needle in text:
                offenders.append(f"{path.relative_to(REPO)}: {needle}")
    assert offenders == []


def test_what_the_bot_writes_the_one_loader_reads_back_even_with_a_value_twice(tmp_path):
    """The writer never emits an anchor the loader refuses: a step shared by two lists is written out twice."""
    from bot._util import yamlfile

    step = {"bash": "python -m pytest -q"}
    text = yamlfile.dump({"with_rule": [step], "without_rule": [step]}, kind="scenario")
    assert "&" not in text and "*" not in text
    path = tmp_path / "x.yaml"
    path.write_text(text, encoding="utf-8")
    assert yamlfile.load(path).data["without_rule"] == [step]
