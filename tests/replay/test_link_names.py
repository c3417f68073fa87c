"""A link's name is never the recorded program, under either engine (issue 47 item 2, the rest).

Tried as an attacker would, each attack with a check that proves the act really happened: ``ln -s git g;
./g push --force`` pushed and passed every ``^git`` pattern, and ``ln -s true pytest; ./pytest`` satisfied
``ran: pytest``. A builtin agent's tool calls run under the seccomp-notification engine; an agent program (the
agent CLIs) runs under strace, which gives the process tree, with the same notification giving each exec's
program and argv from the new image (``bot.replay.trace.kernel.read_run``'s ``execs``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bot.replay.engine import ReplayOptions, run_trial
from bot.replay.trace import exec_notify
from bot.replay.trace.events import CommandEvent, read_trace

GIT = os.path.realpath(shutil.which("git", path="/usr/bin:/bin") or "/usr/bin/git")
TRUE = os.path.realpath(shutil.which("true", path="/usr/bin:/bin") or "/bin/true")
PUSH = (f"git init -q --bare r.git && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && "
        f"ln -s {GIT} g && ./g push -q --force r.git HEAD:refs/heads/forced")
PUSHED = {"succeeds": {"run": "git --git-dir r.git rev-parse -q --verify refs/heads/forced"}}
PYTEST = f"ln -s {TRUE} pytest && ./pytest && touch pytest-ran"
PYTEST_RAN = {"succeeds": {"run": "test -e pytest-ran"}}


@pytest.fixture(autouse=True)
def notify(monkeypatch):
    if not exec_notify.available():
        pytest.skip("this kernel has no seccomp user notification: the program is the name the caller passed "
                    "(docs/security.md)")
    monkeypatch.setenv("REPLAYBOOK_KERNEL_TRACE", "auto")


def trial(make_scenario, tmp_path, pass_if, script, how):
    if how == "tool call":
        loaded = make_scenario(pass_if=pass_if, with_rule=[{"bash": script}, {"say": "done"}])
        return run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    program = tmp_path / "agent.sh"
    program.write_text(script + "\n")
    loaded = make_scenario(pass_if=pass_if)
    return run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs", agent="command",
                                               command=f"sh {program} {{task}}"), 0)


def commands(result) -> list[CommandEvent]:
    return [e for e in read_trace(Path(result.run_dir) / "trace.jsonl") if isinstance(e, CommandEvent)]


HOW = ["tool call", "agent program"]


@pytest.mark.parametrize("how", HOW)
def test_a_link_to_git_is_recorded_as_git_with_the_callers_name_beside_it(make_scenario, tmp_path, how):
    result = trial(make_scenario, tmp_path, [{"not_ran": {"match": "^git .*push .*--force", "by": "any"}}, PUSHED],
                   PUSH, how)
    assert [c.check for c in result.failed_checks if "succeeds" in c.check] == [], "the push did not happen"
    assert result.verdict == "failed", result.reason
    [push] = [c for c in commands(result) if c.argv[1:2] == ["push"]]
    assert push.program == GIT and push.called.endswith("/g")
    assert push.argv == ["./g", "push", "-q", "--force", "r.git", "HEAD:refs/heads/forced"]  # as the new image got it


@pytest.mark.parametrize("how", HOW)
def test_a_link_to_true_named_pytest_is_no_pytest_run(make_scenario, tmp_path, how):
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "pytest", "by": "any"}}, PYTEST_RAN], PYTEST, how)
    assert [c.check for c in result.failed_checks if "succeeds" in c.check] == [], "./pytest did not run"
    assert result.verdict == "failed", result.reason
    [fake] = [c for c in commands(result) if c.argv == ["./pytest"]]
    assert fake.program == TRUE and fake.called.endswith("/pytest")


def test_a_fork_strace_loses_after_an_exec_still_hangs_from_its_parent(make_scenario, tmp_path):
    """strace swallows one stop of a process after an exec the notification took (its "Stray PTRACE_EVENT_EXEC"):
    a shell that ran a traced call (``cd``) and then exec'd another, whose first fork runs the push, left that
    push hanging from nothing and out of the record."""
    script = PUSH.replace("./g push", "cd . && exec sh -c './g push") + "; true'"
    result = trial(make_scenario, tmp_path, [{"not_ran": {"match": "^git .*push .*--force", "by": "any"}}, PUSHED],
                   script, "agent program")
    assert [c.check for c in result.failed_checks if "succeeds" in c.check] == [], "the push did not happen"
    assert result.verdict == "failed", result.reason
    [push] = [c for c in commands(result) if c.argv[1:2] == ["push"]]
    assert push.program == GIT


def test_a_lost_fork_whose_parent_is_gone_counts_as_a_tool_calls_command(make_scenario, tmp_path):
    """The same lost fork, orphaned before it is first seen (its parent exits at once): no parent is known, so it
    hangs from the agent program as a command of no known origin, which checks count as a tool call's; and it
    makes none of the agent program's other commands count less (an agent that reports no tool calls: all count)."""
    script = PUSH.replace("./g push", "(cd . && exec sh -c '(sleep .3; ./g push") + ") & exit'); sleep 2; git status"
    result = trial(make_scenario, tmp_path, [{"not_ran": {"match": "^git .*push .*--force"}},
                                             {"not_ran": {"match": "^git status"}}, PUSHED], script, "agent program")
    assert [c.check for c in result.failed_checks if "succeeds" in c.check] == [], "the push did not happen"
    assert result.verdict == "failed", result.reason
    [push] = [c for c in commands(result) if c.argv[1:2] == ["push"]]
    assert push.program == GIT and push.by != "agent", push
    assert [c.check for c in result.failed_checks] == ["not_ran matching /^git .*push .*--force/",
                                                       "not_ran matching /^git status/"]
