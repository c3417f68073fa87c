"""One measurement for bench/floor.py, run in its own process against one copy of the code.

``PYTHONPATH`` picks the copy (this worktree, or the "before" one); this file
imports only ``bot`` and ``_cpu`` (standard library), never ``_common``, so it runs against either. Prints one
JSON line: wall seconds and CPU seconds per sample, the CPU of this process and of everything it
starts, sandboxed processes included (``_cpu.Meter``: a cgroup of its own; ``cpu_source`` says
``machine`` where none could be made, and then the figure is the whole machine's busy time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

FLOOR_SH = r"""
set -e
fixture=$1; work=$(mktemp -d "${2:-/tmp}/floor-XXXXXX")
cp -a "$fixture/." "$work/"
cd "$work"
export GIT_AUTHOR_NAME=f GIT_AUTHOR_EMAIL=f@l GIT_COMMITTER_NAME=f GIT_COMMITTER_EMAIL=f@l
git init -q && git add -A && git commit -qm base
bash -c 'ls' > /dev/null
bash -c 'cat file_0.txt' > /dev/null
bash -c "python3 -c 'print(1)' | tee result.txt" > /dev/null
grep -qx 1 result.txt
cd / && rm -rf "$work"
"""


sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cpu import Meter  # noqa: E402  (standard library only, like this file)

METER: Meter | None = None


def cpu() -> float:
    return METER.read()


def floor_sample(fixture: Path, tmp: str) -> None:
    subprocess.run(["bash", "-c", FLOOR_SH, "floor", str(fixture), tmp], check=True)


#: The isolated floor: the same work inside one bwrap per sample, with every namespace a trial's sandbox
#: unshares, a private /tmp and nothing of the host writable: what one sandbox per trial cannot go below.
ISOLATED = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-all", "--die-with-parent", "--new-session"]


def isolated_sample(fixture: Path) -> None:
    subprocess.run([*ISOLATED, "bash", "-c", FLOOR_SH, "floor", str(fixture), "/tmp"], check=True)


def replay_sample_factory(scenario: Path, sandbox: str):
    from bot.replay import agents, engine
    from bot.scenario import spec as sc

    loaded = sc.load(scenario)
    agent = agents.make("builtin")
    opts = engine.ReplayOptions(sandbox=sandbox)

    def sample(i: int) -> None:
        result = engine.run_trial(loaded, "", opts, i, agent)
        if result.verdict != "passed":
            raise SystemExit(f"replay did not pass: {result.reason}")

    return sample


def without_the_kernel_trace() -> None:
    """For the trace's share of a sample: the trial's sandbox starts without strace around it.

    A counterfactual for this bench only (a replay without its trace could not be scored by ``ran``
    checks; the floor scenario's check is ``succeeds``, which runs its own command)."""
    from bot.replay.sandbox import session
    from bot.replay.sandbox import workspace as sandbox

    class Untraced(session.Session):
        def __init__(self, backend, plan, *, cwd, python, trace_dir, **engine):
            super().__init__(backend, plan, cwd=cwd, python=python, trace_dir=None)  # neither engine

    sandbox.Session = Untraced


def measure(sample, n: int, width: int) -> dict:
    """``n`` samples, ``width`` at once; per-sample wall and CPU."""
    sample(0)  # warm: shims, caches, the baseline template
    start_wall, start_cpu = time.perf_counter(), cpu()
    done = 0
    while done < n:
        batch = min(width, n - done)
        threads = [threading.Thread(target=sample, args=(done + k + 1,)) for k in range(batch)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done += batch
    wall, used = time.perf_counter() - start_wall, cpu() - start_cpu
    return {"wall_per_sample": wall / n, "cpu_per_sample": used / n}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["floor", "isolated", "replay", "untraced"])
    parser.add_argument("--scenario", type=Path, required=True)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--width", type=int, default=1)
    parser.add_argument("--sandbox", default="bwrap")
    args = parser.parse_args()
    global METER
    METER = Meter()
    if args.what == "floor":
        tmp = os.environ.get("REPLAYBOOK_TMPDIR") or "/tmp"
        out = measure(lambda i: floor_sample(args.scenario / "repo", tmp), args.n, args.width)
    elif args.what == "isolated":
        out = measure(lambda i: isolated_sample(args.scenario / "repo"), args.n, args.width)
    else:
        if args.what == "untraced":
            without_the_kernel_trace()
        out = measure(replay_sample_factory(args.scenario, args.sandbox), args.n, args.width)
    import bot

    out["bot"] = str(Path(bot.__file__).parent.parent)
    out["cpu_source"] = METER.source
    METER.close()
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
