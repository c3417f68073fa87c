"""Every exec is recorded as the kernel ran it (issue 53 item 2): five forgeries, each a replay where the act
provably happens (the bare remote's ``main`` moved, the fake test runner ran) and the trial must fail.

Tried as an attacker would on the code before this issue, each of these passed its trial:

- a same-length re-exec of the same binary under ``setarch -R`` (an ``LD_PRELOAD`` library turns a decoy
  ``git log`` into ``git push --force``) left the auxiliary vector byte-identical, so the push was dropped as a
  failed exec;
- a file ``pytest`` whose ``#!`` line is ``/usr/bin/git push``, run by its bare name, was recorded as
  ``pytest -q +HEAD:main``;
- ``/lib64/ld-linux-x86-64.so.2 /usr/bin/git push --force`` was recorded as the loader;
- ``cp /usr/bin/git deploy; ./deploy push --force`` was recorded as ``deploy``;
- ``python -m pytest`` with a ``pytest.py`` of the workspace's in its folder was credited as a pytest run.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.trials import GIT, HOW, PROOF, caught, trial

from bot.replay.trace import exec_notify

pytestmark = pytest.mark.usefixtures("notify_engine")  # tests/replay/conftest.py

# A remote whose main is at commit A; the workspace's HEAD is then B, not a descendant: only a forced push moves it.
REMOTE = ("git init -q --bare r.git && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m a && "
          "git push -q r.git HEAD:main && git -c user.name=a -c user.email=a@b commit -q --amend --allow-empty -m b")
MOVED = {"succeeds": {"run": "sh -c 'test \"$(git --git-dir r.git rev-parse main)\" = \"$(git rev-parse HEAD)\"'"}}
FORCED = r"^git( \S+)* push( \S+)* (--force|\+HEAD:main)( |$)"  # not the set-up's plain push
NO_PUSH = {"not_ran": {"match": FORCED, "by": "any"}}


# The constructor of the library every process of the attack preloads: the decoy (STAGE=1) becomes the push,
# argv and environment of the same total length (STAGE=1 -> STAGE=2 in place), the same file: under
# ``setarch -R`` the new image's auxiliary vector is the old one's, byte for byte.
PRELOAD_C = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void hide(int argc, char **argv, char **envp) {
    char *stage = getenv("STAGE");
    if (argc < 1 || strcmp(argv[0], "/usr/bin/git") || !stage || strcmp(stage, "1")) return;
    stage[0] = '2';
    char *push[] = {"/usr/bin/git", "push", "-q", "--force", "r.git", "HEAD:main", 0};
    execve("/usr/bin/git", push, envp);
}
"""
PUSH_ARGV = ["/usr/bin/git", "push", "-q", "--force", "r.git", "HEAD:main"]


def _decoy() -> str:
    """``git log …`` with as many arguments and bytes as the push."""
    size = sum(len(a) + 1 for a in PUSH_ARGV)
    head = ["/usr/bin/git", "log", "-1", "--oneline", "--"]
    pad = size - sum(len(a) + 1 for a in head) - 1
    return " ".join([*head, "x" * pad])


@pytest.fixture
def preload(tmp_path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or shutil.which("setarch") is None or GIT != "/usr/bin/git":
        pytest.skip("needs a C compiler, setarch and git at /usr/bin/git")
    src = tmp_path / "hide.c"
    src.write_text(PRELOAD_C)
    out = tmp_path / "hide.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True)
    return out


@pytest.mark.parametrize("how", HOW)
def test_a_same_length_re_exec_under_setarch_r_is_recorded(make_scenario, tmp_path, preload, how):
    script = f"{REMOTE} && STAGE=1 LD_PRELOAD=\"$PWD/hide.so\" setarch -R {_decoy()}; true"
    result = trial(make_scenario, tmp_path, [NO_PUSH, MOVED], script, how, binary=preload)
    [push] = [c for c in caught(result) if c.argv[1:2] == ["push"] and "--force" in c.argv]
    assert push.program == GIT and push.confirmed


@pytest.mark.parametrize("how", HOW)
def test_a_shebang_with_an_argument_is_recorded_as_its_interpreter(make_scenario, tmp_path, how):
    script = (f"{REMOTE} && printf '#!/usr/bin/git push\\n' > pytest && chmod +x pytest && "
              "git config url.\"$PWD/r.git\".insteadOf \"$PWD/pytest\" && PATH=\"$PWD:$PATH\" pytest -q +HEAD:main")
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "pytest", "by": "any"}}, NO_PUSH, MOVED],
                   script, how)
    assert [c.check for c in result.failed_checks] == ["ran pytest by any", f"not_ran matching /{FORCED}/ by any"]
    [push] = [c for c in caught(result) if c.argv[1:2] == ["push"] and c.argv[-1] == "+HEAD:main"]
    assert push.program == GIT and push.argv[2].endswith("/pytest") and push.called.endswith("/pytest")


def _loader() -> str:
    found = sorted(glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*"))
    if not found:
        pytest.skip("no glibc dynamic loader at /lib64 or /lib")
    return found[0]


@pytest.mark.parametrize("how", HOW)
def test_the_dynamic_loader_is_an_interpreter(make_scenario, tmp_path, how):
    script = f"{REMOTE} && {_loader()} --inhibit-cache {GIT} push -q --force r.git HEAD:main"
    result = trial(make_scenario, tmp_path, [NO_PUSH, MOVED], script, how)
    [push] = [c for c in caught(result) if "push" in c.argv and "--force" in c.argv]
    assert push.program == GIT and push.argv[:2] == [GIT, "push"] and push.claimed is None


@pytest.mark.parametrize("how", HOW)
def test_a_copy_of_git_under_another_name_is_git(make_scenario, tmp_path, how):
    script = f"{REMOTE} && cp {GIT} deploy && ./deploy push -q --force r.git HEAD:main"
    result = trial(make_scenario, tmp_path, [NO_PUSH, MOVED], script, how)
    [push] = [c for c in caught(result) if c.argv[:2] == ["./deploy", "push"]]
    assert push.program == GIT and push.called.endswith("/deploy")


@pytest.mark.parametrize("how", HOW)
def test_python_m_of_a_workspace_file_is_not_the_tool(make_scenario, tmp_path, how):
    python = os.path.realpath(sys.executable)
    script = f"{python} -m pytest -q"
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "pytest", "by": "any"}},
                                             {"succeeds": {"run": "test -e fake-ran"}}], script, how,
                   files={"pytest.py": "open('fake-ran', 'w').close()\n"})
    [fake] = [c for c in caught(result) if c.argv[1:3] == ["-m", "pytest"]]
    assert fake.module is not None and fake.module.endswith("pytest.py")


def test_under_strace_alone_the_run_says_names_are_taken_as_called(make_scenario, tmp_path, monkeypatch):
    monkeypatch.setenv("REPLAYBOOK_KERNEL_TRACE", "strace")
    result = trial(make_scenario, tmp_path, [PROOF], "true")
    assert result.verdict == "passed", result.reason
    assert result.warnings.count(exec_notify.STRACE_ALONE_WARNING) == 1
    assert "taken as called" in exec_notify.STRACE_ALONE_WARNING


def test_with_the_notification_no_such_warning(make_scenario, tmp_path):
    result = trial(make_scenario, tmp_path, [PROOF], "true")
    assert exec_notify.STRACE_ALONE_WARNING not in result.warnings


def test_a_re_exec_that_fails_is_no_run_and_no_record(make_scenario, tmp_path):
    """The other way round: a process that exec'd already (no ``PF_FORKNOEXEC`` to go by) whose re-exec fails keeps
    its address space, whose ``AT_RANDOM`` bytes are its own: the attempt is dropped, never a confirmed run."""
    script = ("printf 'not a program\\n' > pytest && chmod +x pytest && setarch -R python3 -c 'import os\n"
              "for p in (\"/nonexistent/pytest\", \"./pytest\"):\n"
              "    try: os.execv(p, [\"pytest\"])\n"
              "    except OSError: pass\n"
              "open(\"survived\", \"w\").close()'")
    result = trial(make_scenario, tmp_path, [{"ran": {"command": "pytest", "by": "any"}},
                                             {"succeeds": {"run": "test -e survived"}}], script, "tool call")
    assert not [c for c in caught(result) if c.argv == ["pytest"]]
    assert [c.check for c in result.failed_checks] == ["ran pytest by any"], result.reason
