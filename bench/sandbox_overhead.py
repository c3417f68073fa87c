"""What isolation costs: one replay under bwrap against --sandbox none, side by side.

Method: for each bundled scenario (builtin agent, simulated model, the rule
in the playbook, so the ``with_rule`` branch a gate must pass), ``run_trial``
is run alternately with ``sandbox="bwrap"`` and ``sandbox="none"``, ``--runs``
times each after one warm-up of each; the pairs interleave so machine noise
hits both alike. Reported: the median wall time of each, the median of the
paired differences (the sandbox's cost per replay), and the process launches
behind it (each tool call and each ``succeeds`` is one bwrap).

Then the scenario environment (``requirements: [pytest==8.3.4]``): a cold
build (its cache folder removed; uv's own download cache stays warm, as on any
machine that built one before) against venv+pip, and a warm lookup.

    python bench/sandbox_overhead.py --runs 15
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BUNDLED, machine, median, playbook_text, scenario_dir, table

from bot.replay import engine
from bot.replay.sandbox import toolchain
from bot.scenario import spec as sc

TARGET_MS = 30.0


def replay_pairs(runs: int) -> list[list[str]]:
    rows = []
    for scenario_id in BUNDLED:
        loaded = sc.load(scenario_dir(scenario_id))
        text = playbook_text(scenario_id, with_rule=True)
        times: dict[str, list[float]] = {"bwrap": [], "none": []}
        for i in range(runs + 1):
            for backend in (("bwrap", "none") if i % 2 else ("none", "bwrap")):
                start = time.perf_counter()
                result = engine.run_trial(loaded, text, engine.ReplayOptions(sandbox=backend), i)
                elapsed = time.perf_counter() - start
                assert result.verdict == "passed", (backend, result.reason)
                if i:  # the first round warms caches
                    times[backend].append(elapsed)
        diffs = [b - n for b, n in zip(times["bwrap"], times["none"])]
        rows.append([scenario_id, f"{median(times['none']) * 1000:.0f}", f"{median(times['bwrap']) * 1000:.0f}",
                     f"{median(diffs) * 1000:+.1f}", f"{median(times['bwrap']) / median(times['none']):.2f}×"])
    return rows


def env_build(reqs: list[str], runs: int) -> list[list[str]]:
    cold_uv, cold_pip, warm = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            toolchain.prepare(reqs, cache_dir=Path(tmp))
            cold_uv.append(time.perf_counter() - start)
            start = time.perf_counter()
            toolchain.prepare(reqs, cache_dir=Path(tmp))
            warm.append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            subprocess.run([toolchain.base_interpreter(), "-m", "venv", f"{tmp}/v"], check=True)
            subprocess.run([f"{tmp}/v/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--only-binary=:all:", *reqs], check=True, capture_output=True)
            cold_pip.append(time.perf_counter() - start)
    return [["cold, uv (ours)", f"{median(cold_uv):.2f} s"], ["cold, venv + pip", f"{median(cold_pip):.2f} s"],
            ["warm (cached)", f"{median(warm) * 1000:.1f} ms"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--env-runs", type=int, default=3)
    args = parser.parse_args()
    print(f"# Sandbox overhead per replay\n\n{machine()}; {args.runs} interleaved pairs per scenario, medians.\n")
    rows = replay_pairs(args.runs)
    print(table(["scenario", "none (ms)", "bwrap (ms)", "paired Δ (ms)", "ratio"], rows))
    worst = max(float(r[3]) for r in rows)
    verdict = "meets" if worst <= TARGET_MS else "MISSES"
    print(f"\nWorst paired Δ {worst:+.1f} ms: {verdict} the target of {TARGET_MS:.0f} ms per replay.\n")
    print("## Scenario environment (pytest==8.3.4)\n")
    print(table(["build", "median"], env_build(["pytest==8.3.4"], args.env_runs)))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
