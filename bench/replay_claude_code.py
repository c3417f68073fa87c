"""Time per replay with the real Claude Code CLI against the simulated model, next to the builtin agent.

Method: for each bundled scenario, with and without its rule in the playbook,
each iteration runs one ``run_trial`` with ``claude-code`` and one with
``builtin``, back to back, so both see the same load. Times are the wall time
of ``run_trial``; "harness + agent" is that minus the scenario's own commands
(see ``_common.measured_trial``), i.e. what the agent program itself costs on
top of the harness. The CLI is the pinned one (``find_cli()``, else
``install_cli()`` from the npm registry). One warm-up per agent, then medians.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

from _common import BUNDLED, machine, measured_trial, median, ms, playbook_text, progress, say, scenario_dir, table

from bot.replay import agents as agents_mod
from bot.replay.agents import claude_code
from bot.replay.engine import ReplayOptions
from bot.scenario import spec as sc

AGENTS = ("claude-code", "builtin")


def bench(runs: int) -> None:
    binary = claude_code.find_cli() or claude_code.install_cli()
    agents = {"claude-code": claude_code.ClaudeCodeAgent(binary), "builtin": agents_mod.make("builtin")}
    rows, overall = [], defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-cc-") as tmp:
        opts = {name: ReplayOptions(agent=name, runs_dir=Path(tmp)) for name in AGENTS}
        first = sc.load(scenario_dir(BUNDLED[0]))
        for name in AGENTS:  # warm-up: node's and Python's caches, the shim cache
            measured_trial(first, "", opts[name], 0, agents[name])
        for sid in BUNDLED:
            loaded = sc.load(scenario_dir(sid))
            for with_rule in (True, False):
                text = playbook_text(sid, with_rule=with_rule)
                got: dict[str, list[dict]] = defaultdict(list)
                for i in range(runs):
                    for name in AGENTS:
                        got[name].append(measured_trial(loaded, text, opts[name], i + 1, agents[name]))
                    progress(f"{sid} rule={with_rule} {i + 1}/{runs}: " + ", ".join(
                        f"{n} {got[n][-1]['total']:.2f}s" for n in AGENTS))
                cc, bi = got["claude-code"], got["builtin"]
                for name in AGENTS:
                    overall[name] += [r["total"] for r in got[name]]
                cc_t, bi_t = median([r["total"] for r in cc]), median([r["total"] for r in bi])
                rows.append([sid, "with" if with_rule else "without", _verdicts(cc), f"{cc_t:.2f}",
                             ms(median([r["overhead"] for r in cc])), _verdicts(bi), f"{bi_t:.2f}",
                             ms(median([r["overhead"] for r in bi])), f"{cc_t / bi_t:.2f}x",
                             f"{cc[0]['model_calls']}/{bi[0]['model_calls']}", runs])
    cc_all, bi_all = median(overall["claude-code"]), median(overall["builtin"])
    say(f"## Replay time: Claude Code {claude_code.PINNED_VERSION} vs builtin, simulated model\n\n{machine()}\n")
    say(table(["scenario", "rule", "claude-code verdict", "claude-code s", "claude-code harness+agent ms",
               "builtin verdict", "builtin s", "builtin harness+agent ms", "ratio", "model calls cc/builtin", "N"],
              rows))
    say(f"\nOverall median per replay: claude-code {cc_all:.2f} s, builtin {bi_all:.2f} s "
        f"({cc_all / bi_all:.2f}x), over {len(overall['builtin'])} replays each.")


def _verdicts(results: list[dict]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for r in results:
        counts[r["verdict"] if r["verdict"] != "unscored" else f"unscored ({r['status']})"] += 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs per scenario, rule and agent")
    bench(parser.parse_args().runs)


if __name__ == "__main__":
    main()
