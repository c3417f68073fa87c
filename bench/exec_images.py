"""What reading an agent program's execs from their new images costs (issue 47): one trial's wall time with and
without ``bot.replay.trace.exec_images`` beside strace, interleaved rounds, the median of the ratios.

The agent program is a shell script of 62 execs (60 ``/bin/true``, a ``python3``, a ``git``); "off" makes
``RunImages.start`` return None, as on a kernel without seccomp user notification. Run from the repository's
root: ``python bench/exec_images.py [ROUNDS]``; say the machine's load (``uptime``) with the figure."""
import statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "tests"); sys.path.insert(0, "tests/replay")
from conftest import write_scenario
from bot.replay.engine import ReplayOptions, run_trial
from bot.replay.trace import exec_images

start = exec_images.RunImages.start
tmp = Path(tempfile.mkdtemp())
agent = tmp / "agent.sh"
agent.write_text("for i in $(seq 60); do /bin/true; done; python3 -c 'import json'; git --version >/dev/null\n")
loaded = write_scenario(tmp, pass_if=[{"ran": {"command": "git", "by": "any"}}, {"succeeds": {"run": "true"}}])
ratios, rows = [], []
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
    got = {}
    for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
        exec_images.RunImages.start = start if mode == "on" else classmethod(lambda cls: None)
        t = time.perf_counter()
        res = run_trial(loaded, "", ReplayOptions(runs_dir=tmp / f"runs{r}{mode}", agent="command",
                                                  command=f"bash {agent} {{task}}"), 0)
        got[mode] = time.perf_counter() - t
        assert res.verdict == "passed", res.reason
    ratios.append(got["on"] / got["off"]); rows.append(got)
print("rounds", rows)
print("median on/off", round(statistics.median(ratios), 3))
