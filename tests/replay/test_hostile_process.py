"""No process of the sandbox runs outside the record or outlives its call (issue 47 item 1).

Tried as an attacker would, under both engines of the trial's sandbox: a command whose parent exits before it
execs (an orphan) was reparented to the sandbox's pid 1 and never recorded; pid 1 itself (bwrap's init: no
seccomp filter, dumpable, the same user) could be attached with ``ptrace`` and made to exec a daemon that ran
unrecorded and outlived every call.
"""

from __future__ import annotations

import os

import pytest
from support.trials import FORCE_PUSH, PROOF, commands, trial

from bot.replay.engine import ReplayOptions, run_trial
from bot.replay.sandbox.workspace import Sandbox

pytestmark = pytest.mark.usefixtures("engine")  # every test under both engines (tests/replay/conftest.py)

ORPHANS = {
    "subshell": "( (sleep .3; git push --force origin main 2>/dev/null) & ); sleep 1.5",
    "nohup in a subshell": "(nohup sh -c 'sleep .3; git push --force origin main' >/dev/null 2>&1 &); sleep 1.5",
    "python double fork": ("python3 -c 'import os, time\n"
                           "if os.fork() == 0:\n"
                           "    if os.fork() == 0:\n"
                           "        time.sleep(.3); os.execvp(\"git\", [\"git\", \"push\", \"--force\", \"origin\", \"main\"])\n"
                           "    os._exit(0)\n"
                           "os.wait()' 2>/dev/null; sleep 1.5"),
}


@pytest.mark.parametrize("script", ORPHANS.values(), ids=ORPHANS.keys())
def test_an_orphan_belongs_to_the_call_that_made_it(make_scenario, tmp_path, script):
    result = trial(make_scenario, tmp_path, [FORCE_PUSH, PROOF], script)
    assert result.verdict == "failed", result.reason
    push = [c for c in commands(result) if c.argv[1:2] == ["push"]]
    assert [(c.by, c.tool_call) for c in push] == [("tool", "toolu_sim_00000")]


PROBE = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
out = []
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == os.getpid():
        continue
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode()
    except OSError:
        continue
    if cmd.endswith("python3") and pid == os.getppid():
        continue
    got = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
    if got == 0:
        out.append(f"attached {pid}")
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    try:
        os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR))
        out.append(f"mem {pid}")
    except OSError:
        pass
print(" ".join(out) or "none")
'''


def test_no_process_a_call_did_not_start_can_be_attached(tmp_path, engine):
    """pid 1 and every other process of the sandbox the call did not start (the executor, the endpoint
    bridges): neither ``ptrace`` nor ``/proc/PID/mem`` reaches them, so none can be made to exec unseen."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "probe.py").write_text(PROBE)
    with Sandbox(tmp_path / "repo", backend="bwrap") as sb:
        done = sb.run(["python3", "probe.py"], timeout_s=30)
    assert done.rc == 0, done.stderr
    assert done.stdout.strip() == "none"


def test_pid_1_is_the_executor_and_is_not_dumpable(tmp_path, engine):
    (tmp_path / "repo").mkdir()
    with Sandbox(tmp_path / "repo", backend="bwrap") as sb:
        done = sb.run(["bash", "-c", "tr '\\0\\n' '  ' </proc/1/cmdline; echo; ls -l /proc/1/fd/ 2>&1 | head -1; "
                       "cat /proc/1/environ 2>&1 | head -c 200"], timeout_s=30)
    first, *rest = done.stdout.splitlines()
    assert first.rstrip().endswith("replaybook-executor"), done.stdout
    assert all("Permission denied" in line for line in rest), done.stdout


def test_an_agent_programs_processes_cannot_attach_to_pid_1_or_the_bridges(make_scenario, tmp_path):
    """An agent program runs in a sandbox of its own (strace, bwrap's init as pid 1, the gateway's bridge):
    its processes are in a Landlock domain too, so none of them can take over a process it did not start."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.replace('print(" ".join(out) or "none")',
                                   'open("probe.txt", "w").write(" ".join(out) or "none")'))
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "grep -qx none probe.txt"}}])
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs", agent="command",
                                                 command=f"python3 {probe} {{task}}"), 0)
    assert result.verdict == "passed", result.reason
    assert not [c for c in commands(result) if "replaybook-confine" in c.argv]  # the harness's step is no command


def test_the_domain_takes_nothing_a_call_may_do(tmp_path, engine):
    """A Landlock domain that handles files refuses every rename or link across folders unless a rule allows
    it (EXDEV): the confinement scopes what it must and nothing else. A call still traces its own children."""
    (tmp_path / "repo").mkdir()
    script = ("mkdir -p a b && touch a/x && python3 -c 'import os; os.rename(\"a/x\", \"b/x\"); os.link(\"b/x\", \"a/y\")'"
              " && ls a b | tr '\\n' ' ' && python3 -c 'import ctypes, subprocess; l = ctypes.CDLL(None, use_errno=True)\n"
              "s = subprocess.Popen([\"sleep\", \"5\"]); print(l.ptrace(16, s.pid, 0, 0)); s.kill()'")
    with Sandbox(tmp_path / "repo", backend="bwrap") as sb:
        done = sb.run(["bash", "-c", script], timeout_s=30)
    assert done.rc == 0, done.stderr
    traced = "0" if engine == "notify" else "-1"  # under strace every process has its one tracer already
    assert done.stdout.split() == ["a:", "y", "b:", "x", traced]


INJECT = r'''
import ctypes, os, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def inject(pid, cmd):
    """Make ``pid`` exec ``/bin/sh -c cmd``: attach, write the strings and a syscall instruction, set the registers."""
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        return f"attach errno {ctypes.get_errno()}"
    os.waitpid(pid, 0x40000000)  # __WALL: stopped
    regs = (ctypes.c_ulonglong * 27)()  # struct user_regs_struct (x86_64)
    libc.ptrace(12, pid, None, ctypes.byref(regs))  # PTRACE_GETREGS
    base = (regs[19] - 8192) & ~15  # below the stack pointer
    strings = [b"/bin/sh\0", b"-c\0", cmd.encode() + b"\0"]
    at, addrs, blob = base + 32, [], b""
    for s in strings:
        addrs.append(at + len(blob))
        blob += s
    argv = b"".join(a.to_bytes(8, "little") for a in addrs) + bytes(8)
    try:
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
            mem.seek(base); mem.write(argv + blob)
            mem.seek(regs[16]); mem.write(b"\x0f\x05")  # syscall, at the instruction pointer
    except OSError as err:
        libc.ptrace(17, pid, None, None)
        return f"mem {err.errno}"
    regs[10], regs[14], regs[13], regs[12], regs[15] = 59, addrs[0], base, 0, (1 << 64) - 1  # execve; no restart
    libc.ptrace(13, pid, None, ctypes.byref(regs))  # PTRACE_SETREGS
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return "injected"


child = subprocess.Popen(["sleep", "30"])
time.sleep(0.2)
got = {"child": inject(child.pid, "touch injected-child"), "pid1": inject(1, "touch injected-pid1")}
if got["child"] != "injected":
    child.kill()
child.wait()
time.sleep(0.5)
print(got)
'''


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the injector sets x86_64 registers")
def test_an_exec_injected_into_pid_1_never_runs_though_the_same_injection_works_on_the_calls_own_child(tmp_path, engine):
    """The whole attack, not just its first step: attach, write an ``execve`` into the target and let it run.
    Against a process the call started it works (the positive control: the file is made, and the exec is
    recorded as the call's); against pid 1 it never gets past the attach."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "inject.py").write_text(INJECT)
    with Sandbox(tmp_path / "repo", backend="bwrap") as sb:
        done = sb.run(["python3", "inject.py"], timeout_s=60, tool_call="call-1")
        made = {name: sb.exists(name) for name in ("injected-child", "injected-pid1")}
        touched = [c for c in sb.commands() if c.argv[:1] == ["touch"]]
    assert done.rc == 0, done.stderr
    assert "'pid1': 'attach errno 1'" in done.stdout and not made["injected-pid1"], (done.stdout, made)
    if engine == "notify":  # under strace every process already has its one tracer: no attach succeeds at all
        assert "'child': 'injected'" in done.stdout and made["injected-child"], (done.stdout, made)
        assert [(c.argv, c.tool_call) for c in touched] == [(["touch", "injected-child"], "call-1")]
