"""Local replays per hour: today's server (one sequence, trials one after another, no snapshots) against sequences
of one context (N trials at once, each on the free sequence sharing the longest prefix, prefixes shared across
sequences through ``--snapshots`` state snapshots), side by side (issue 55 item 4).

    python bench/local_throughput.py [--rounds 3] [--trials 4] [--sequences 4] [--turns 3] [--snapshots 4]

Needs `replaybook model install local`. A "trial" is the builtin agent's conversation, model side: its system
prompt (the rule, in the `with` arm, after what the arms share) and tools, the task, then ``--turns`` answers, each
one forced tool call (``tool_choice`` any, at the server's default sampling), each followed by a fixed tool result.
Both servers run in this process, their engines in the engine's jail; each round runs the same trials on each
side, the sides' order alternating, and the figure is the median over rounds of the per-round ratio of wall
times (= the ratio of replays per hour). What the harness adds to a replay (sandbox, trace, checks: about 1% of
a local replay's wall time, bench/README.md "A real model") is left out: this measures the model's side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import _common

from bot.model import served
from bot.model.local import install
from bot.model.local.server import serve
from bot.replay.agents import builtin
from bot.replay.sandbox.isolation import engine_jail

TASK = ("tests/test_imports.py fails on app/exporters/xml_export.py: the XML feed was retired and app/xml_schema.py "
        "was deleted. Remove the dead export code left behind in app/exporters/ so the test suite passes again.")
RULE = ("Playbook rules for this task, learned from this project's past failures.\n- [rule-0002] Before deleting a "
        "module that nothing imports, search the whole repository, including config files, registries and string "
        "literals, for its module name, since plugins are often loaded by name at runtime.")
RESULT = ("exit code 0\napp/exporters/__init__.py\napp/exporters/csv_export.py\napp/exporters/ledger_v1.py\n"
          "app/exporters/xml_export.py\napp/exporters/xml_escape.py\nconfig/exporters.ini\ntests/test_imports.py\n")


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url + "/v1/messages", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "x-api-key": "bench"})
    with urllib.request.urlopen(request, timeout=1800) as answer:
        return json.load(answer)


def trial(url: str, arm: str, turns: int) -> int:
    """One trial's model side; the tokens generated."""
    system = builtin.SYSTEM + ("\n\n" + RULE if arm == "with" else "")
    history: list[dict] = [{"role": "user", "content": TASK}]
    out = 0
    for turn in range(turns):
        reply = _post(url, {"model": "local", "max_tokens": 128, "system": system, "messages": history,
                            "tools": builtin.TOOLS, "tool_choice": {"type": "any"}})
        out += reply["usage"]["output_tokens"]
        history.append({"role": "assistant", "content": reply["content"]})
        uses = [b for b in reply["content"] if b.get("type") == "tool_use"]
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": u["id"], "content": RESULT}
                                                    for u in uses] or "Answer with one tool call."})
    return out


def side(running, arms: list[str], jobs: int, turns: int) -> tuple[float, int, float]:
    """(wall seconds, tokens generated, the engine's CPU seconds) of one side's trials."""
    began, cpu = time.monotonic(), running.stats().cpu_s
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        tokens = sum(pool.map(lambda arm: trial(running.base_url, arm, turns), arms))
    return time.monotonic() - began, tokens, running.stats().cpu_s - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=4, help="trials a side a round (half of them each arm)")
    parser.add_argument("--sequences", type=int, default=4)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--snapshots", type=int, default=4,
                        help="state snapshots the sequences side's engine keeps to share prefixes (0: none)")
    args = parser.parse_args()
    model = install.locate()
    arms = ["with", "without"] * (args.trials // 2)
    threads = served.threads()
    _common.progress(f"{model.label}; {args.trials} trials of {args.turns} turns a side a round; {threads} engine "
                     f"threads; {_common.machine()}")
    load_before = os.getloadavg()[0]
    rows = []
    with serve(model, jail=engine_jail, api_key="bench", threads=threads, snapshots=0) as today, \
            serve(model, jail=engine_jail, api_key="bench", threads=threads, sequences=args.sequences,
                  snapshots=args.snapshots) as now:
        for r in range(args.rounds):
            order = [("today", today, 1), ("sequences", now, args.sequences)]
            got = {}
            for name, running, jobs in (order if r % 2 == 0 else order[::-1]):
                got[name] = side(running, arms, jobs, args.turns)
                _common.progress(f"round {r}: {name}: {got[name][0]:.0f} s, {got[name][1]} tokens out, "
                                 f"{got[name][2]:.0f} engine CPU s, load {os.getloadavg()[0]:.1f}")
            rows.append(got)
        reuse = {name: running.stats() for name, running in (("today", today), ("sequences", now))}
    ratios = [row["today"][0] / row["sequences"][0] for row in rows]
    cpu_ratios = [row["today"][2] / row["sequences"][2] for row in rows if row["sequences"][2] > 0]
    per_hour = {name: statistics.median(3600 * args.trials / row[name][0] for row in rows) for name in ("today", "sequences")}
    print(_common.table(["side", "replays (model side) / hour, median of rounds", "wall s a round (median)",
                         "engine CPU s a round (median)",
                         "prompt tokens reused (from snapshots) / evaluated anew (all rounds)"],
                        [[name, f"{per_hour[name]:.0f}", f"{statistics.median(row[name][0] for row in rows):.0f}",
                          f"{statistics.median(row[name][2] for row in rows):.0f}",
                          f"{sum(c.reused_tokens for c in reuse[name].calls)} "
                          f"({reuse[name].snapshot_tokens}) / "
                          f"{sum(c.evaluated_tokens for c in reuse[name].calls)}"]
                         for name in ("today", "sequences")]))
    print(f"\n**sequences ÷ today, median of per-round ratios: {statistics.median(ratios):.2f}x** "
          f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)}); in engine CPU seconds "
          f"{statistics.median(cpu_ratios) if cpu_ratios else float('nan'):.2f}x; {args.sequences} sequences, {args.trials} trials of "
          f"{args.turns} turns a side a round, {args.rounds} rounds, {args.snapshots} snapshots; load average before / after: "
          f"{load_before:.1f} / {os.getloadavg()[0]:.1f} (2 cores)")


if __name__ == "__main__":
    sys.exit(main())
