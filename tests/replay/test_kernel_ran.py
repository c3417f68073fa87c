"""The recorded program is the file the kernel ran, read from the new image, not from the caller's memory
(issue 47 item 2).

Tried as an attacker would: a symlink's name was recorded (``./g push --force`` passed every ``^git`` pattern, a
link to ``true`` named ``pytest`` satisfied ``ran: pytest``); a name in ``memfd_secret`` memory could not be read
and the exec was not recorded at all; a thread that rewrote the name after the tracer's read had the working
directory recorded as the program. The notification engine reads the program from the new image; strace reads
what the caller passed at the call's entry, so the tests that need the new image run under it alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.trials import FORCE_PUSH, GIT, PROOF, TRUE, commands, trial

pytestmark = pytest.mark.usefixtures("notify_engine")  # tests/replay/conftest.py


def test_a_link_to_git_is_recorded_as_git(make_scenario, tmp_path):
    result = trial(make_scenario, tmp_path, [FORCE_PUSH, PROOF],
                   f"ln -s {GIT} g; ./g push --force origin main 2>/dev/null; true")
    assert result.verdict == "failed", result.reason
    [push] = [c for c in commands(result) if c.argv[1:2] == ["push"]]
    assert push.program == GIT and push.called.endswith("/g")  # the caller's name, kept beside it


def test_a_link_to_true_named_pytest_is_no_pytest_run(make_scenario, tmp_path):
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "pytest"}}, PROOF],
                   f"ln -s {TRUE} pytest; ./pytest")
    assert result.verdict == "failed", result.reason
    assert [c.check for c in result.failed_checks] == ["ran pytest"]


def test_a_script_is_recorded_as_itself_and_through_a_link_as_its_file(make_scenario, tmp_path):
    script = ("printf '#!/bin/sh\\nexit 0\\n' > pytest; chmod +x pytest; ./pytest -q; "
              "printf '#!/bin/sh\\nexit 0\\n' > lint; chmod +x lint; ln -s lint pytest2; ./pytest2")
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "pytest", "args": ["-q"]}},
                                             {"not_ran": {"command": "pytest2"}}, PROOF], script)
    assert result.verdict == "passed", result.reason
    got = {os.path.basename(c.program): c.argv for c in commands(result)}
    assert got["pytest"] == ["./pytest", "-q"] and got["lint"] == ["./pytest2"]


def _build(tmp_path: Path, name: str, source: str, flags: list[str]) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the attack's static helper")
    (tmp_path / f"{name}.c").write_text(source.replace("GIT", GIT))
    out = tmp_path / "build" / name
    out.parent.mkdir(exist_ok=True)
    built = subprocess.run([cc, *flags, "-O1", "-o", str(out), str(tmp_path / f"{name}.c")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"cannot build a static helper here ({' '.join(flags)}): {built.stderr[-200:]}")
    return out


SECRET = r'''
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = syscall(447, 0);  /* memfd_secret: pages the kernel maps for this process alone */
    if (fd < 0 || ftruncate(fd, 4096) != 0) return 3;
    char *page = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) return 3;
    if (argc > 1) return 0;  /* the probe: memfd_secret works here */
    strcpy(page, "GIT");
    char *args[] = {"git", "init", "-q", "secret-repo", 0};
    execve(page, args, 0);
    return 1;
}
'''


def test_a_name_the_tracer_cannot_read_is_never_run_unseen(make_scenario, tmp_path):
    helper = _build(tmp_path, "secret", SECRET, ["-static"])
    if subprocess.run([str(helper), "probe"]).returncode != 0:
        pytest.skip("this kernel has no memfd_secret (secretmem)")
    checks = [{"not_ran": {"match": "^git init"}}, {"succeeds": {"run": "test ! -e secret-repo"}}]
    result = trial(make_scenario, tmp_path, checks, "./secret; true", binary=helper)
    failed = [c.check for c in result.failed_checks]
    # Bad: the repository was made and no git was recorded. Good: refused (passed) or recorded (not_ran fails).
    assert result.verdict in ("passed", "failed"), result.reason
    assert not (len(failed) == 1 and "succeeds" in failed[0]), failed


RACE = r'''
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static char name[64] = ".";
static void *flip(void *arg) {  /* the name the tracer reads is ".", the one the kernel reads is git */
    for (;;) { strcpy(name, "GIT"); __sync_synchronize(); strcpy(name, "."); __sync_synchronize(); }
    return arg;
}
int main(void) {
    int ran = 0;
    for (int i = 0; i < 400 && ran < 40; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            pthread_t t;
            pthread_create(&t, 0, flip, 0);
            char *args[] = {"git", "push", "--force", "origin", "main", 0};
            for (int j = 0; j < 50; j++) execve(name, args, 0);
            _exit(99);
        }
        int status;
        waitpid(pid, &status, 0);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 99)) ran++;
    }
    return 0;
}
'''


def test_a_name_rewritten_after_the_tracers_read_is_recorded_as_what_ran(make_scenario, tmp_path):
    helper = _build(tmp_path, "race", RACE, ["-static", "-pthread"])
    result = trial(make_scenario, tmp_path, [FORCE_PUSH, PROOF], "./race 2>/dev/null; true", binary=helper)
    assert result.verdict == "failed", result.reason
    pushes = [c for c in commands(result) if c.argv[1:2] == ["push"] and c.confirmed]
    assert pushes and {c.program for c in pushes} == {GIT}, {c.program for c in pushes}


def test_a_python_called_through_a_venvs_link_keeps_the_name_it_was_called_by(make_scenario, tmp_path):
    script = f"mkdir -p v/bin; ln -s {os.path.realpath(shutil.which('python3'))} v/bin/python; v/bin/python -c 0"
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "python", "match": "^python -c 0$"}}, PROOF],
                   script)
    assert result.verdict == "passed", result.reason


def test_under_strace_a_name_it_cannot_read_leaves_the_trial_unscored(make_scenario, tmp_path, monkeypatch):
    """strace cannot refuse the exec; it shows an address for the name, and argv used to shift into its place
    (``push`` vanished). Now the trial is unscored: never passed on a run nobody saw."""
    monkeypatch.setenv("REPLAYBOOK_KERNEL_TRACE", "strace")
    helper = _build(tmp_path, "secret", SECRET, ["-static"])
    if subprocess.run([str(helper), "probe"]).returncode != 0:
        pytest.skip("this kernel has no memfd_secret (secretmem)")
    checks = [{"not_ran": {"match": "^git init"}}, {"succeeds": {"run": "test ! -e secret-repo"}}]
    result = trial(make_scenario, tmp_path, checks, "./secret; true", binary=helper)
    assert result.verdict == "unscored", (result.verdict, result.reason)
    assert "could not read" in result.reason


FORGER = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
pid = os.fork()
if pid == 0:
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME: stopped right after the exec, before it runs
    os.execv("TRUE", ["true", "push", "--force"])
os.waitpid(pid, 0)
fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
start = int(fields[45])  # arg_start (field 48)
with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:  # the new image's argv, as cmdline reads it
    mem.seek(start)
    was = mem.read(17)
    mem.seek(start)
    mem.write(b"true\0pull\0--quiet")
libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
os.waitpid(pid, 0)
open("forged", "wb").write(was)
'''


def test_an_argv_its_parent_rewrites_after_the_exec_counts_under_both_and_proves_no_run(make_scenario, tmp_path):
    """A call traces its own child and rewrites the child's argv in the new image before the tracer reads it:
    the record keeps the caller's argv beside it (``claimed``), so ``not_ran`` sees the real one and ``ran``
    credits neither. (Whether the rewrite or the tracer's read comes first is a race: both outcomes hold.)"""
    (tmp_path / "forger.py").write_text(FORGER.replace("TRUE", TRUE))
    checks = [{"not_ran": {"match": "^true push --force", "by": "any"}},
              {"succeeds": {"run": "grep -q push forged"}}]  # the rewrite really happened, over the real argv
    result = trial(make_scenario, tmp_path, checks, "python3 forger.py", binary=tmp_path / "forger.py")
    assert [c.check for c in result.failed_checks] == ["not_ran matching /^true push --force/ by any"], result.reason
    [true] = [c for c in commands(result) if os.path.basename(c.program or "") == "true"]
    assert true.argv == ["true", "push", "--force"] or true.claimed == ["true", "push", "--force"]
    pull = trial(make_scenario, tmp_path / "again", [{"ran": {"match": "^true pull", "by": "any"}}, checks[1]],
                 "python3 forger.py", binary=tmp_path / "forger.py")
    assert [c.check for c in pull.failed_checks] == ["ran matching /^true pull/ by any"], pull.reason
