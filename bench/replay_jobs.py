"""Parallel trials: speed-up of ``jobs=8`` over ``jobs=1`` when every model call takes 1 s.

Method: ``run_trials`` on the bench-only scenario ``bench/scenarios/latency``
(three cheap bash steps and a summary: four model calls per trial, almost no
CPU work), simulated model with ``ReplayOptions(latency_s=1.0)``. Each round
runs the same ``--trials`` with ``jobs=1`` and then with ``--jobs``, back to
back, so both see the same machine load; the speed-up is their wall-time
ratio, and the reported figure is the median over ``--rounds``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import HERE, machine, median, progress, say, table

from bot.replay.engine import ReplayOptions, run_trials
from bot.scenario import spec as sc

TARGET = 6.0
SCENARIO = HERE / "scenarios" / "latency"


def timed_trials(loaded: sc.LoadedScenario, opts: ReplayOptions, trials: int, jobs: int) -> tuple[float, list[str]]:
    start = time.perf_counter()
    results = run_trials(loaded, "", opts, trials=trials, jobs=jobs)
    return time.perf_counter() - start, [r.verdict for r in results]


def bench(trials: int, jobs: int, rounds: int, latency_s: float) -> None:
    loaded = sc.load(SCENARIO)
    rows, ratios = [], []
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as tmp:
        opts = ReplayOptions(agent="builtin", latency_s=latency_s, runs_dir=Path(tmp))
        run_trials(loaded, "", ReplayOptions(agent="builtin", runs_dir=Path(tmp)), trials=1)  # warm-up
        for n in range(rounds):
            serial, v1 = timed_trials(loaded, opts, trials, 1)
            parallel, v8 = timed_trials(loaded, opts, trials, jobs)
            passed = sum(v == "passed" for v in v1 + v8)
            ratios.append(serial / parallel)
            rows.append([n + 1, f"{serial:.1f}", f"{parallel:.1f}", f"{serial / parallel:.2f}x",
                         f"{passed}/{2 * trials}"])
            progress(f"round {n + 1}: jobs=1 {serial:.1f}s, jobs={jobs} {parallel:.1f}s")
    calls = 4  # model calls per trial in bench/scenarios/latency/policy.yaml
    ideal_serial = trials * calls * latency_s
    ideal_parallel = -(-trials // jobs) * calls * latency_s
    say(f"## Parallel trials: jobs={jobs} vs jobs=1, {trials} trials, model latency {latency_s:g} s\n\n{machine()}\n")
    say(table(["round", "jobs=1 wall s", f"jobs={jobs} wall s", "speed-up", "passed"], rows))
    best = median(ratios)
    say(f"\nMedian speed-up {best:.2f}x (target >= {TARGET:g}x: "
        f"{'met' if best >= TARGET else f'missed by {TARGET - best:.2f}x'}). "
        f"Model latency alone: jobs=1 {ideal_serial:.0f} s, jobs={jobs} {ideal_parallel:.0f} s "
        f"(at most {ideal_serial / ideal_parallel:.0f}x).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="jobs=1 / jobs=N pairs, run back to back")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per simulated model call")
    args = parser.parse_args()
    bench(args.trials, args.jobs, args.rounds, args.latency)


if __name__ == "__main__":
    main()
