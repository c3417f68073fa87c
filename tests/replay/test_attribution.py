"""Commands are attributed: one of the agent's tool calls ran them, or the agent's own machinery did."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from bot.replay.checks import EndState, SucceedsResult, attribute, evaluate
from bot.replay.engine import ReplayOptions, run_trial
from bot.replay.trace.events import CommandEvent, ShellEvent, ToolCallEvent, read_trace
from bot.replay.trace.shims import parse_shim_log
from bot.scenario import spec as sc

T0 = datetime(2026, 8, 1, tzinfo=timezone.utc)
SNAPSHOT = "SNAPSHOT_FILE=/home/.claude/shell-snapshots/s.sh\nsource ~/.bashrc\nls -la; env | sort"


def cmd(argv: str, tool_call: str | None) -> CommandEvent:
    return CommandEvent(argv=argv.split(), cwd=".", exit_code=0, duration_ms=1, started_at=T0, tool_call=tool_call)


def claude_like_run() -> list:
    """Claude Code's shape: an env probe and a snapshot shell of its own, then the tool call's shell."""
    return [
        ToolCallEvent(name="Bash", id="toolu_1", input={"command": "ls"}),
        ShellEvent(id="shell:1", argv=["-c", "env"]),
        ShellEvent(id="shell:2", argv=["-c", "-l", SNAPSHOT]),
        ShellEvent(id="shell:3", argv=["-c", "source s.sh 2>/dev/null || true && eval 'ls' < /dev/null && pwd -P"]),
        cmd("git status", ""), cmd("env", "shell:1"), cmd("sort", "shell:2"), cmd("ls", "shell:3"),
    ]


def test_a_claude_like_run_is_attributed():
    by = [(e.argv[0], e.by, e.tool_call) for e in attribute(claude_like_run()) if isinstance(e, CommandEvent)]
    assert by == [("git", "agent", ""), ("env", "agent", "shell:1"), ("sort", "agent", "shell:2"),
                  ("ls", "tool", "toolu_1")]  # `ls` inside the snapshot script is not the tool call's


def test_an_adapter_set_id_is_a_tool_call_and_traces_without_ids_count_everything():
    assert [e.by for e in attribute([cmd("pytest", "toolu_9")])] == ["tool"]
    assert [e.by for e in attribute([cmd("pytest", None), cmd("env", None)])] == [None, None]
    # No tool calls reported (a `command` agent): a shell cannot be matched, so it counts.
    assert [e.by for e in attribute([ShellEvent(id="shell:1", argv=["-c", "env"]), cmd("env", "shell:1")])
            if isinstance(e, CommandEvent)] == [None]


def test_command_checks_count_tool_calls_by_default_and_everything_with_by_any():
    events = claude_like_run()
    scenario = sc.Scenario.model_validate({"id": "t", "task": "x", "pass_if": [
        {"not_ran": {"command": "env"}}, {"not_ran": {"command": "env", "by": "any"}}, {"ran": {"command": "ls"}},
        {"succeeds": {"run": "true"}}]})
    results = evaluate(scenario, events, EndState(succeeds=[SucceedsResult(run="true", exit_code=0)]))
    assert [r.passed for r in results] == [True, False, True, True]
    assert results[1].check == "not_ran env by any" and results[1].evidence[0]["by"] == "agent"


def test_shim_records_carry_the_tool_call_and_old_records_still_parse():
    new = b"RB2\x001.5\x002.0\x000\x000\x00toolu_7\x00/r\x001\x00ls\x00"
    shell = b"RBS\x00shell:9\x002\x00-c\x00echo hi\x00"
    old = b"RB1\x001.5\x002.0\x000\x000\x00/r\x001\x00ls\x00"
    events = parse_shim_log(new + shell + old, Path("/r"))
    assert [(type(e).__name__, getattr(e, "tool_call", None)) for e in events] == [
        ("ShellEvent", None), ("CommandEvent", "toolu_7"), ("CommandEvent", None)]
    assert events[0].argv == ["-c", "echo hi"]


def test_the_builtin_agents_commands_carry_their_tool_call_id(make_scenario, tmp_path):
    loaded = make_scenario(pass_if=[{"ran": {"command": "ls"}}, {"succeeds": {"run": "true"}}],
                           with_rule=[{"bash": "ls | cat"}, {"say": "done"}])
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    assert result.verdict == "passed", result.reason
    commands = [e for e in read_trace(Path(result.run_dir) / "trace.jsonl") if isinstance(e, CommandEvent)]
    assert {(c.argv[0], c.by, c.tool_call) for c in commands} == {("ls", "tool", "toolu_sim_00000"),
                                                                  ("cat", "tool", "toolu_sim_00000")}


def test_claude_codes_own_shell_setup_no_longer_fails_not_ran_env(claude_code_agent, make_scenario, tmp_path):
    checks = [{"not_ran": {"command": "env"}}, {"ran": {"command": "ls"}}, {"succeeds": {"run": "test -f x.txt"}}]
    loaded = make_scenario(pass_if=checks, with_rule=[{"bash": "echo hi > x.txt && ls"}, {"say": "done"}])
    # Claude Code's shell snapshot (where it runs `env`) is made under its own time limit, which a loaded
    # machine can miss; a trial without it proves nothing here, so try up to three.
    for trial in range(3):
        result = run_trial(loaded, "", ReplayOptions(agent="claude-code", runs_dir=tmp_path / "runs"), trial)
        assert result.verdict == "passed", result.reason
        events = read_trace(Path(result.run_dir) / "trace.jsonl")
        commands = [e for e in events if isinstance(e, CommandEvent)]
        if any(c.argv[0] == "env" for c in commands):
            break
    assert any(c.argv[0] == "env" and c.by == "agent" for c in commands)  # Claude Code did run env itself
    tool_ids = {e.id for e in events if isinstance(e, ToolCallEvent)}
    assert [c.tool_call for c in commands if c.argv[0] == "ls"] == [next(iter(tool_ids))]
    strict = make_scenario(pass_if=[{"not_ran": {"command": "env", "by": "any"}}, *checks[1:]],
                           with_rule=[{"bash": "echo hi > x.txt && ls"}, {"say": "done"}])
    for trial in range(3):
        failed = run_trial(strict, "", ReplayOptions(agent="claude-code", runs_dir=tmp_path / "runs"), trial)
        if any(isinstance(e, CommandEvent) and e.argv[0] == "env" for e in read_trace(Path(failed.run_dir) / "trace.jsonl")):
            break
    assert failed.verdict == "failed" and [c.check for c in failed.failed_checks] == ["not_ran env by any"]


SAME_VERDICT = [{"not_ran": {"command": "git"}}, {"max_runs": {"command": "env", "max": 1}},
                {"ran": {"command": "ls", "cwd": "sub"}}, {"succeeds": {"run": "test -f sub/x.txt"}}]


def test_every_process_below_a_builtin_tool_call_is_that_calls(make_scenario, tmp_path):
    # Subshells, a background job, a nested bash and a python child: one tool call each, by process tree.
    steps = [{"bash": "cd sub && (ls >/dev/null & wait) ; bash -c 'cat /dev/null'"},
             {"bash": "python3 -c 'import subprocess; subprocess.run([\"/bin/true\"])'"}, {"say": "done"}]
    loaded = make_scenario(pass_if=[{"ran": {"command": "ls", "cwd": "sub"}}, {"succeeds": {"run": "true"}}],
                           with_rule=steps, files={"sub/README.md": "sub\n"})
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    assert result.verdict == "passed", result.reason
    commands = [e for e in read_trace(Path(result.run_dir) / "trace.jsonl") if isinstance(e, CommandEvent)]
    # the program is the file the kernel ran, links resolved: python3 is python3.11 (or whatever it links to)
    got = sorted(("python3" if Path(c.program).name.startswith("python3") else Path(c.program).name, c.by,
                  c.tool_call) for c in commands)
    assert got == [("bash", "tool", "toolu_sim_00000"), ("cat", "tool", "toolu_sim_00000"),
                   ("ls", "tool", "toolu_sim_00000"), ("python3", "tool", "toolu_sim_00001"),
                   ("true", "tool", "toolu_sim_00001")]
    ls = next(c for c in commands if c.argv[0] == "ls")
    assert ls.ppid is not None and ls.pid != ls.ppid


def test_claude_code_one_env_tool_call_is_one_record(claude_code_agent, make_scenario, tmp_path):
    loaded = make_scenario(pass_if=SAME_VERDICT, files={"sub/README.md": "sub\n"},
                           with_rule=[{"bash": "cd sub && env > x.txt && ls"}, {"say": "done"}])
    result = run_trial(loaded, "", ReplayOptions(agent="claude-code", runs_dir=tmp_path / "runs"), 0)
    assert result.verdict == "passed", result.reason
    commands = [e for e in read_trace(Path(result.run_dir) / "trace.jsonl") if isinstance(e, CommandEvent)]
    assert len([c for c in commands if c.argv[:1] == ["env"] and c.by == "tool"]) == 1
    builtin = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    assert builtin.verdict == result.verdict


def test_a_codex_like_call_is_tied_to_the_shell_that_runs_its_script():
    # Codex's exec_command input is the whole `/bin/bash -c 'CMD'`; the kernel sees that shell's argv.
    events = [ToolCallEvent(name="exec_command", id="item_2", input={"command": "/bin/bash -c 'cd sub && ls'"}),
              ShellEvent(id="shell:9:1.0", argv=["-c", "cd sub && ls"]), ShellEvent(id="shell:7:0.5", argv=["-lc", "env"]),
              cmd("git rev-parse HEAD", ""), cmd("env", "shell:7:0.5"), cmd("ls", "shell:9:1.0")]
    by = [(e.argv[0], e.by, e.tool_call) for e in attribute(events) if isinstance(e, CommandEvent)]
    assert by == [("git", "agent", ""), ("env", "agent", "shell:7:0.5"), ("ls", "tool", "item_2")]


def test_a_command_agents_execs_outside_a_shell_still_count_once_a_shell_appears(make_scenario, tmp_path):
    """A ``command`` agent reports no tool calls, so nothing it runs can be told apart as its machinery: a push it
    runs itself counted for nothing once any shell of its own appeared (issue 53 item 3)."""
    script = ("git init -q --bare r.git && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && "
              "sh -c true && git push -q --force r.git HEAD:refs/heads/forced")
    program = tmp_path / "agent.sh"
    program.write_text(script + "\n")
    loaded = make_scenario(pass_if=[{"not_ran": {"match": "^git .*push .*--force"}},
                                    {"succeeds": {"run": "git --git-dir r.git rev-parse -q --verify forced"}}])
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs", agent="command",
                                               command=f"sh {program} {{task}}"), 0)
    assert [c.check for c in result.failed_checks] == ["not_ran matching /^git .*push .*--force/"], result.reason
    [push] = [e for e in read_trace(Path(result.run_dir) / "trace.jsonl")
              if isinstance(e, CommandEvent) and e.argv[1:2] == ["push"]]
    assert push.by is None and push.tool_call == ""


def test_an_agent_that_reports_tool_calls_keeps_its_own_execs_as_its_machinery():
    events = [ToolCallEvent(name="Bash", id="t1", input={"command": "ls"}),
              ShellEvent(id="shell:1", argv=["-c", "ls"]), cmd("git status", ""), cmd("ls", "shell:1")]
    assert [(e.argv[0], e.by) for e in attribute(events) if isinstance(e, CommandEvent)] == [
        ("git", "agent"), ("ls", "tool")]
