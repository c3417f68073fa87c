"""The simulated model's policy: loading, branching, step choice, tool mapping, noise."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from bot.errors import BadInput
from bot.replay.gateway import policy as policy_module
from bot.replay.gateway.policy import (
    Policy,
    Step,
    count_tool_results,
    estimate_input_tokens,
    load_policy,
    parse_policy,
    system_text,
)

# The module's documented example is the policy under test, so the docs cannot drift from the format.
POLICY_YAML = "# SIMULATED MODEL policy\n" + textwrap.dedent((policy_module.__doc__ or "").split("::\n\n")[1].split("\n\n")[0]) + "\n"

RULE = "Playbook: use the package-local test config when running tests."

CLAUDE_CODE_TOOLS = [
    {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {}, "description": {}}}},
    {"name": "Write", "input_schema": {"type": "object", "properties": {"file_path": {}, "content": {}}}},
    {"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {}}}},
]
BUILTIN_TOOLS = [
    {"name": "bash", "input_schema": {"type": "object", "properties": {"command": {}}}},
    {"name": "write", "input_schema": {"type": "object", "properties": {"path": {}, "content": {}}}},
]


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_YAML)
    return load_policy(path)


def conversation(tool_results: int, *, system="You are an agent.", tools=BUILTIN_TOOLS, extra=()) -> dict:
    """A request body after `tool_results` tool round trips."""
    messages = [*extra, {"role": "user", "content": "Fix the failing test."}]
    for i in range(tool_results):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"command": "x"}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]})
    return {"model": "claude-sonnet-4-6", "system": system, "messages": messages, "tools": tools}


def tool_use(reply) -> dict:
    [block] = [b for b in reply.message["content"] if b["type"] == "tool_use"]
    return block


# --- loading ------------------------------------------------------------


def test_load_policy_reads_steps_and_repeats(policy: Policy) -> None:
    assert policy.branch_on == "package-local test config"
    assert [s.action for s in policy.with_rule] == ["bash", "write", "read", "say"]
    assert policy.with_rule[1] == Step("write", path="packages/api/src/api/limits.py", content="LIMIT = 10\n")
    assert policy.without_rule[1].repeat == 3
    assert policy.warnings == ()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("branch_on: 3\nwith_rule: []\nwithout_rule: []\n", "`branch_on`"),
        ("branch_on: x\nwithout_rule: []\n", "`with_rule`"),
        ("branch_on: x\nwith_rule: [{bsh: ls}]\nwithout_rule: []\n", "`with_rule[0]`"),
        ("branch_on: x\nwith_rule: [{bash: ls, say: hi}]\nwithout_rule: []\n", "`with_rule[0]`"),
        ("branch_on: x\nwith_rule: []\nwithout_rule: [{bash: ls, repeat: 0}]\n", "`without_rule[0].repeat`"),
        ("branch_on: x\nwith_rule: []\nwithout_rule: [{bash: ls, repeat: many}]\n", "`without_rule[0].repeat`"),
        ("branch_on: x\nwith_rule: [{write: {content: a}}]\nwithout_rule: []\n", "`with_rule[0].write.path`"),
        ("branch_on: x\nwith_rule: [{write: a.py}]\nwithout_rule: []\n", "`with_rule[0].write`"),
        ("branch_on: x\nwith_rule: [{say: ''}]\nwithout_rule: []\n", "`with_rule[0].say`"),
    ],
)
def test_invalid_policy_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(BadInput) as err:
        load_policy(path)
    assert str(path) in err.value.message
    assert any(p.startswith(field) for p in err.value.problems), err.value.render()


def test_invalid_yaml_and_missing_file_are_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("branch_on: [unclosed\n")
    with pytest.raises(BadInput, match="not valid YAML"):
        load_policy(path)
    with pytest.raises(BadInput, match="no such policy file"):
        load_policy(tmp_path / "absent.yaml")
    with pytest.raises(BadInput, match="mapping"):
        parse_policy(["a list"], source="p.yaml")


def test_unknown_keys_and_unreachable_steps_warn() -> None:
    policy = parse_policy({
        "branch_on": "x", "notes": "hi",
        "with_rule": [{"say": "a"}, {"bash": "ls"}],
        "without_rule": [{"bash": "ls", "timeout": 3}],
    })
    joined = "\n".join(policy.warnings)
    assert "`notes`: unknown key" in joined
    assert "`with_rule[1:]`: never reached" in joined
    assert "`without_rule[0]`: unknown keys ['timeout']" in joined


def test_noise_outside_zero_one_is_bad_input(policy: Policy) -> None:
    with pytest.raises(BadInput, match="noise"):
        policy.seeded(noise=1.5, seed=0)


# --- branching and steps --------------------------------------------------


def test_branch_on_in_system_string_case_insensitive(policy: Policy) -> None:
    assert policy.branch_for(conversation(0, system=RULE.upper())) == "with_rule"
    assert policy.branch_for(conversation(0, system="no rules here")) == "without_rule"


def test_branch_on_in_system_blocks_and_role_system_message(policy: Policy) -> None:
    blocks = [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": RULE}]
    assert policy.branch_for(conversation(0, system=blocks)) == "with_rule"
    in_message = conversation(0, system=None, extra=[{"role": "system", "content": RULE}])
    assert "package-local" in system_text(in_message)
    assert policy.branch_for(in_message) == "with_rule"
    in_message_blocks = conversation(0, system=None, extra=[{"role": "system", "content": blocks}])
    assert policy.branch_for(in_message_blocks) == "with_rule"
    # The rule text in a *user* message is not the system prompt.
    user_only = conversation(0, system=None, extra=[{"role": "user", "content": RULE}])
    assert policy.branch_for(user_only) == "without_rule"


def test_step_index_is_number_of_tool_results_with_repeats(policy: Policy) -> None:
    commands = []
    for n in range(4):
        reply = policy.respond(conversation(n))
        assert reply.branch == "without_rule" and reply.step_index == n
        commands.append(tool_use(reply)["input"]["command"])
    assert commands == ["python -m pytest -q"] + ['curl -s "$FLAKY_URL"'] * 3
    final = policy.respond(conversation(4)).message
    assert final["stop_reason"] == "end_turn"
    assert final["content"] == [{"type": "text", "text": "[SIMULATED] Done."}]


def test_past_the_last_step_says_done(policy: Policy) -> None:
    reply = policy.respond(conversation(50, system=RULE))
    assert reply.message["content"][0]["text"] == "[SIMULATED] done"
    assert reply.message["stop_reason"] == "end_turn"


def test_message_is_labelled_simulated_and_deterministic(policy: Policy) -> None:
    first = policy.respond(conversation(1)).message
    assert first["model"] == "simulated"
    assert first["content"][0]["text"].startswith("[SIMULATED]")
    assert policy.respond(conversation(1)).message == first
    assert first["usage"]["input_tokens"] == estimate_input_tokens(conversation(1))
    assert first["usage"]["output_tokens"] >= 1


def test_count_tool_results_ignores_other_blocks() -> None:
    request = conversation(2)
    request["messages"].append({"role": "user", "content": [{"type": "text", "text": "tool_result"}]})
    assert count_tool_results(request) == 2


def test_looping_policy_never_ends_within_a_turn_limit() -> None:
    looping = parse_policy({"branch_on": "x", "with_rule": [], "without_rule": [{"bash": "sleep 0", "repeat": 1000}]})
    for n in (0, 1, 500, 999):
        assert looping.respond(conversation(n)).message["stop_reason"] == "tool_use"
    assert looping.respond(conversation(1000)).message["stop_reason"] == "end_turn"


# --- tool mapping -------------------------------------------------------


def test_claude_code_tools_bash_gets_description_and_write_gets_absolute_path(policy: Policy) -> None:
    system = [{"type": "text", "text": f"{RULE}\n<env>\nWorking directory: /tmp/work dir\nIs git repo: yes\n</env>"}]
    bash = tool_use(policy.respond(conversation(0, system=system, tools=CLAUDE_CODE_TOOLS)))
    assert bash["name"] == "Bash"
    assert bash["input"]["command"] == "cd packages/api && python -m pytest -q"
    assert "description" in bash["input"]
    write = tool_use(policy.respond(conversation(1, system=system, tools=CLAUDE_CODE_TOOLS)))
    assert write["name"] == "Write"
    assert write["input"] == {"file_path": "/tmp/work dir/packages/api/src/api/limits.py", "content": "LIMIT = 10\n"}


def test_claude_code_2_primary_working_directory_line(policy: Policy) -> None:
    system = [{"type": "text", "text": RULE}, {"type": "text", "text": "<env>\n - Primary working directory: /w/repo\n</env>"}]
    write = tool_use(policy.respond(conversation(1, system=system, tools=CLAUDE_CODE_TOOLS)))
    assert write["input"]["file_path"] == "/w/repo/packages/api/src/api/limits.py"
    # Prose that mentions a working directory without a path is not taken for one.
    prose = [{"type": "text", "text": f"{RULE}\nworking directory: see below"}]
    write = tool_use(policy.respond(conversation(1, system=prose, tools=CLAUDE_CODE_TOOLS)))
    assert write["input"]["file_path"] == "packages/api/src/api/limits.py"


def test_builtin_tools_use_lowercase_names_and_relative_path(policy: Policy) -> None:
    bash = tool_use(policy.respond(conversation(0, system=RULE)))
    assert bash == {**bash, "name": "bash", "input": {"command": "cd packages/api && python -m pytest -q"}}
    write = tool_use(policy.respond(conversation(1, system=RULE)))
    assert write["name"] == "write"
    assert write["input"] == {"path": "packages/api/src/api/limits.py", "content": "LIMIT = 10\n"}


def test_write_without_a_write_tool_falls_back_to_bash_that_writes_exact_bytes(tmp_path: Path) -> None:
    content = "line 'one'\n$HOME `x` \"q\"\n\n"
    pol = parse_policy({"branch_on": "x", "with_rule": [], "without_rule": [{"write": {"path": "a b/c.txt", "content": content}}]})
    call = tool_use(pol.respond(conversation(0, tools=[BUILTIN_TOOLS[0]])))
    assert call["name"] == "bash"
    subprocess.run(["bash", "-c", call["input"]["command"]], cwd=tmp_path, check=True)
    assert (tmp_path / "a b" / "c.txt").read_text() == content


def test_no_tools_answers_with_text(policy: Policy) -> None:
    message = policy.respond(conversation(0, tools=None)).message
    assert message["stop_reason"] == "end_turn"
    assert [b["type"] for b in message["content"]] == ["text"]
    assert "python -m pytest -q" in message["content"][0]["text"]


# --- noise --------------------------------------------------------------


def test_noise_is_reproducible_per_seed(policy: Policy) -> None:
    flips = [policy.seeded(noise=0.3, seed=s).flipped for s in range(50)]
    assert flips == [policy.seeded(noise=0.3, seed=s).flipped for s in range(50)]
    assert any(flips) and not all(flips)
    flipped_seed = flips.index(True)
    noisy = policy.seeded(noise=0.3, seed=flipped_seed)
    assert noisy.branch_for(conversation(0, system=RULE)) == "without_rule"
    assert noisy.branch_for(conversation(0)) == "with_rule"


def test_zero_and_full_noise(policy: Policy) -> None:
    assert not any(policy.seeded(noise=0.0, seed=s).flipped for s in range(200))
    assert all(policy.seeded(noise=1.0, seed=s).flipped for s in range(200))


def test_follow_only_drops_a_rule_that_is_in_the_prompt(policy: Policy) -> None:
    from dataclasses import replace

    never = [replace(policy, seed=s, follow=0.0) for s in range(50)]
    assert all(p.branch_for(conversation(0, system=RULE)) == "without_rule" for p in never)
    assert all(p.branch_for(conversation(0)) == "without_rule" for p in never)  # no rule: nothing to ignore
    always = [replace(policy, seed=s) for s in range(50)]
    assert all(p.branch_for(conversation(0, system=RULE)) == "with_rule" for p in always)


def test_follow_rate_over_2000_seeds_and_bad_follow(policy: Policy) -> None:
    from dataclasses import replace

    n, follow = 2000, 0.8
    followed = sum(replace(policy, seed=s, follow=follow).branch_for(conversation(0, system=RULE)) == "with_rule"
                   for s in range(n))
    sd = (n * follow * (1 - follow)) ** 0.5
    assert abs(followed - n * follow) < 4 * sd, followed
    with pytest.raises(BadInput, match="follow"):
        replace(policy, follow=1.5)


@pytest.mark.parametrize("noise", [0.05, 0.2, 0.5])
def test_flip_frequency_over_2000_seeds_matches_noise(policy: Policy, noise: float) -> None:
    n = 2000
    flips = sum(policy.seeded(noise=noise, seed=s).flipped for s in range(n))
    sd = (n * noise * (1 - noise)) ** 0.5
    assert abs(flips - n * noise) < 4 * sd, (flips, n * noise)


def test_opencodes_write_tool_gets_file_path_absolute(policy: Policy) -> None:
    tools = [{"name": "bash", "input_schema": {"type": "object", "properties": {"command": {}, "description": {}}}},
             {"name": "write", "input_schema": {"type": "object", "properties": {"filePath": {}, "content": {}}}}]
    system = RULE + "\nWorking directory: /w/repo\n"
    write = tool_use(policy.respond(conversation(1, system=system, tools=tools)))
    assert write["name"] == "write"
    assert write["input"] == {"filePath": "/w/repo/packages/api/src/api/limits.py", "content": "LIMIT = 10\n"}
