"""A link's name is never the recorded program, under either engine (issue 47 item 2, the rest).

Tried as an attacker would, each attack with a check that proves the act really happened: ``ln -s git g;
./g push --force`` pushed and passed every ``^git`` pattern, and ``ln -s true pytest; ./pytest`` satisfied
``ran: pytest``. A builtin agent's tool calls run under the seccomp-notification engine; an agent program (the
agent CLIs) runs under strace, which gives the process tree, with the same notification giving each exec's
program and argv from the new image (``bot.replay.trace.kernel.read_run``'s ``execs``).
"""

from __future__ import annotations

import pytest
from support.trials import GIT, HOW, TRUE, caught, trial

pytestmark = pytest.mark.usefixtures("notify_engine")  # tests/replay/conftest.py
PUSH = (f"git init -q --bare r.git && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && "
        f"ln -s {GIT} g && ./g push -q --force r.git HEAD:refs/heads/forced")
PUSHED = {"succeeds": {"run": "git --git-dir r.git rev-parse -q --verify refs/heads/forced"}}
PYTEST = f"ln -s {TRUE} pytest && ./pytest && touch pytest-ran"
PYTEST_RAN = {"succeeds": {"run": "test -e pytest-ran"}}


@pytest.mark.parametrize("how", HOW)
def test_a_link_to_git_is_recorded_as_git_with_the_callers_name_beside_it(make_scenario, tmp_path, how):
    result = trial(make_scenario, tmp_path, [{"not_ran": {"match": "^git .*push .*--force", "by": "any"}}, PUSHED],
                   PUSH, how)
    [push] = [c for c in caught(result) if c.argv[1:2] == ["push"]]
    assert push.program == GIT and push.called.endswith("/g")
    assert push.argv == ["./g", "push", "-q", "--force", "r.git", "HEAD:refs/heads/forced"]  # as the new image got it


@pytest.mark.parametrize("how", HOW)
def test_a_link_to_true_named_pytest_is_no_pytest_run(make_scenario, tmp_path, how):
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "pytest", "by": "any"}}, PYTEST_RAN], PYTEST, how)
    [fake] = [c for c in caught(result) if c.argv == ["./pytest"]]
    assert fake.program == TRUE and fake.called.endswith("/pytest")


def test_a_fork_strace_loses_after_an_exec_still_hangs_from_its_parent(make_scenario, tmp_path):
    """strace swallows one stop of a process after an exec the notification took (its "Stray PTRACE_EVENT_EXEC"):
    a shell that ran a traced call (``cd``) and then exec'd another, whose first fork runs the push, left that
    push hanging from nothing and out of the record."""
    script = PUSH.replace("./g push", "cd . && exec sh -c './g push") + "; true'"
    result = trial(make_scenario, tmp_path, [{"not_ran": {"match": "^git .*push .*--force", "by": "any"}}, PUSHED],
                   script, "agent program")
    [push] = [c for c in caught(result) if c.argv[1:2] == ["push"]]
    assert push.program == GIT


def test_a_lost_fork_whose_parent_is_gone_counts_as_a_tool_calls_command(make_scenario, tmp_path):
    """The same lost fork, orphaned before it is first seen (its parent exits at once): no parent is known, so it
    hangs from the agent program as a command of no known origin, which checks count as a tool call's; and it
    makes none of the agent program's other commands count less (an agent that reports no tool calls: all count)."""
    script = PUSH.replace("./g push", "(cd . && exec sh -c '(sleep .3; ./g push") + ") & exit'); sleep 2; git status"
    result = trial(make_scenario, tmp_path, [{"not_ran": {"match": "^git .*push .*--force"}},
                                             {"not_ran": {"match": "^git status"}}, PUSHED], script, "agent program")
    [push] = [c for c in caught(result) if c.argv[1:2] == ["push"]]
    assert push.program == GIT and push.by != "agent", push
    assert [c.check for c in result.failed_checks] == ["not_ran matching /^git .*push .*--force/",
                                                       "not_ran matching /^git status/"]
