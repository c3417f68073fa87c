"""A kernel without Landlock ABI 2 is warned of, once a run, in the result's warnings (issue 47).

The kernel is made to refuse Landlock the way a kernel without it does (``ENOSYS`` for
``landlock_create_ruleset``, by a seccomp filter on the harness that every process of the sandbox inherits),
so the trial runs, its calls in no Landlock domain, and the warning says what protection is missing.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from bot.replay.sandbox import isolation

CHILD = r"""
import ctypes, json, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
ins = lambda code, jt, jf, k: struct.pack("=HBBI", code, jt, jf, k)
prog = b"".join([ins(0x20, 0, 0, 0), ins(0x15, 0, 1, 444), ins(0x06, 0, 0, 0x00050000 | 38),
                 ins(0x06, 0, 0, 0x7FFF0000)])  # nr == landlock_create_ruleset: ENOSYS; else allow
buf = ctypes.create_string_buffer(prog, len(prog))
class P(ctypes.Structure): _fields_ = [("n", ctypes.c_ushort), ("f", ctypes.c_void_p)]
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.syscall(317, 1, 0, ctypes.byref(P(len(prog) // 8, ctypes.addressof(buf)))) == 0
from bot.replay.engine import ReplayOptions, run_trial
from bot.replay.sandbox import isolation
from bot.scenario import spec
result = run_trial(spec.load(sys.argv[1]), "", ReplayOptions(runs_dir=sys.argv[2]), 0)
print(json.dumps({"abi": isolation.landlock_abi(), "verdict": result.verdict, "warnings": result.warnings}))
"""


@pytest.fixture
def no_landlock_kernel():
    if platform.machine() != "x86_64":
        pytest.skip("the filter that hides Landlock is written for x86_64")
    if isolation.landlock_abi() < 2:
        pytest.skip("this kernel has no Landlock ABI 2 already: the warning is the normal case here")


def test_a_kernel_without_landlock_abi_2_is_warned_of_once(make_scenario, tmp_path, no_landlock_kernel):
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "true"}}],
                           with_rule=[{"bash": "true"}, {"bash": "true"}, {"say": "done"}])
    done = subprocess.run([sys.executable, "-c", CHILD, str(loaded.folder), str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["abi"] == 0 and got["verdict"] == "passed"
    assert got["warnings"].count(isolation.LANDLOCK_WARNING) == 1
    assert "ptrace" in isolation.LANDLOCK_WARNING and "endpoint bridges" in isolation.LANDLOCK_WARNING


def test_a_kernel_with_it_gives_no_such_warning(make_scenario, tmp_path, no_landlock_kernel):
    from bot.replay.engine import ReplayOptions, run_trial

    loaded = make_scenario(pass_if=[{"succeeds": {"run": "true"}}], with_rule=[{"bash": "true"}, {"say": "done"}])
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    assert isolation.LANDLOCK_WARNING not in result.warnings
