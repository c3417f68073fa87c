"""What an exec ran, decided from argv and a ``#!`` line (``bot.replay.trace.programs``), and what checks see of it."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from bot.replay import checks
from bot.replay.trace import programs
from bot.replay.trace.events import CommandEvent
from bot.scenario import spec as sc


@pytest.mark.parametrize("argv, at", [
    (["ld.so", "/usr/bin/git", "push"], 1),
    (["ld.so", "--library-path", "/x", "--preload", "a.so", "--argv0", "ls", "/usr/bin/git", "push"], 7),
    (["ld.so", "--inhibit-cache", "--audit", "a.so", "--inhibit-rpath", "x", "git"], 6),
    (["ld.so", "--glibc-hwcaps-mask", "x", "--glibc-hwcaps-prepend", "y", "/bin/true"], 5),
    (["ld.so", "--unknown", "/usr/bin/git"], 1),  # rtld takes what it does not know as the program
    (["ld.so", "--list"], None),
])
def test_the_loaders_program_is_its_first_argument_that_is_no_option(argv, at):
    assert programs.loader_program(argv) == at


@pytest.mark.parametrize("interp, arg, runs", [
    ("/usr/bin/python3.11", None, True), ("/bin/bash", "-e", True), ("/bin/sh", "-eux", True),
    ("/usr/bin/env", "python3", True), ("/usr/bin/perl", "-w", True),
    ("/usr/bin/git", "push", False), ("/usr/bin/git", None, False), ("/bin/sh", "-c", False),
    ("/bin/bash", "-s", False), ("/bin/sh", "-n", False), ("/usr/bin/python3", "-mpip", False),
    ("/usr/bin/env", "-S git push", False), ("/usr/bin/env", "git", False), ("/usr/bin/perl", "-e", False),
])
def test_a_script_is_its_own_program_only_under_a_runtime_that_runs_it(interp, arg, runs):
    assert programs.runs_its_script(interp, arg) is runs


@pytest.mark.parametrize("argv, module", [
    (["python", "-m", "pytest", "-q"], "pytest"), (["python", "-mpytest"], "pytest"),
    (["python", "-I", "-m", "x.y"], "x.y"), (["python", "-W", "ignore", "-m", "pytest"], "pytest"),
    (["python", "-c", "import x", "-m", "pytest"], None), (["python", "t.py", "-m", "pytest"], None),
])
def test_the_module_python_m_names(argv, module):
    assert programs.python_module(argv)[1] == module


def _event(**kw) -> CommandEvent:
    return CommandEvent(exit_code=0, duration_ms=1, started_at=datetime.now(timezone.utc), cwd=".", **kw)


def test_under_strace_alone_the_loaders_program_is_what_checks_see():
    push = _event(argv=["/lib64/ld-linux-x86-64.so.2", "--inhibit-cache", "/usr/bin/git", "push", "--force"],
                  program="/lib64/ld-linux-x86-64.so.2")
    assert checks.matches(push, sc.CommandMatch(command="git", args=["push"]))


def test_a_workspace_module_is_never_the_tool():
    fake = _event(argv=["python3", "-m", "pytest"], program="/usr/bin/python3", module="/w/pytest.py")
    real = _event(argv=["python3", "-m", "pytest"], program="/usr/bin/python3")
    want = sc.CommandMatch(command="pytest")
    assert not checks.matches(fake, want) and checks.matches(real, want)
