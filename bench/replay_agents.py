"""Time per replay for every real agent (claude-code, codex, mini-swe-agent, opencode), next to the builtin agent, one run.

Method: for each bundled scenario in ``_common.BUNDLED``, with its rule in the
playbook (the branch a gate must pass), each iteration runs one ``run_trial``
per agent, round-robin, so every agent sees the same load. Times are the wall
time of ``run_trial``; "harness + agent" is that minus the scenario's own
commands (``_common.measured_trial``). Each CLI is the pinned one from the
cache (``replaybook agent install``'s code installs it when missing). One
warm-up per agent, then medians; the ratio is each agent's median over the
builtin's, from the same run.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

from _common import BUNDLED, machine, measured_trial, median, ms, playbook_text, progress, say, scenario_dir, table

from bot.replay import agents as agents_mod
from bot.replay.agents import install
from bot.replay.engine import ReplayOptions
from bot.scenario import spec as sc

REAL = ("claude-code", "codex", "mini-swe-agent", "opencode")


def bench(runs: int, names: tuple[str, ...], scenarios: tuple[str, ...] = BUNDLED) -> None:
    for name in names:
        if name in install.PINS:
            install.install(name)
    agents = {name: agents_mod.make(name) for name in (*names, "builtin")}
    order = list(agents)
    times: dict[str, list[float]] = defaultdict(list)
    overhead: dict[str, list[float]] = defaultdict(list)
    verdicts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    per_scenario: dict[tuple[str, str], list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as tmp:
        opts = {name: ReplayOptions(agent=name, runs_dir=Path(tmp)) for name in order}
        first = sc.load(scenario_dir(scenarios[0]))
        for name in order:
            measured_trial(first, "", opts[name], 0, agents[name])
        for sid in scenarios:
            loaded = sc.load(scenario_dir(sid))
            text = playbook_text(sid, with_rule=True)
            for i in range(runs):
                for name in order:
                    got = measured_trial(loaded, text, opts[name], i + 1, agents[name])
                    times[name].append(got["total"])
                    overhead[name].append(got["overhead"])
                    per_scenario[(sid, name)].append(got["total"])
                    verdicts[name][got["verdict"] if got["verdict"] != "unscored" else f"unscored ({got['status']})"] += 1
                progress(f"{sid} {i + 1}/{runs}: " + ", ".join(f"{n} {per_scenario[(sid, n)][-1]:.2f}s" for n in order))
    base = median(times["builtin"])
    versions = ", ".join(f"{n} {install.PINS[n].version}" for n in names if n in install.PINS)
    say(f"## Replay time per agent vs builtin, simulated model ({versions})\n\n{machine()}\n")
    say(table(["agent", "median s per replay", "median harness+agent ms", "x builtin", "verdicts", "N"],
              [[n, f"{median(times[n]):.2f}", ms(median(overhead[n])), f"{median(times[n]) / base:.2f}x",
                ", ".join(f"{k} {v}" for k, v in sorted(verdicts[n].items())), len(times[n])] for n in order]))
    say("\nPer scenario (median s):\n")
    say(table(["scenario", *order], [[sid, *[f"{median(per_scenario[(sid, n)]):.2f}" for n in order]]
                                     for sid in scenarios]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs per scenario and agent")
    parser.add_argument("--agent", action="append", choices=REAL, help="agents to time (default: all four)")
    parser.add_argument("--scenario", action="append", choices=BUNDLED, help="scenarios (default: all four)")
    args = parser.parse_args()
    bench(args.runs, tuple(args.agent or REAL), tuple(args.scenario or BUNDLED))


if __name__ == "__main__":
    main()
