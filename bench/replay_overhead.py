"""Harness overhead per replay: the simulated model and the builtin agent, four bundled scenarios.

Method (two measurements per iteration, side by side):

1. ``run_trial`` exactly as the CLI calls it (``runs_dir`` a temp folder).
   - total: its wall time (``time.perf_counter``).
   - command time: the wall time covered by the agent's depth-0 commands, from
     ``CommandEvent.started_at``/``duration_ms`` in the run's trace.jsonl
     (overlapping commands counted once), PLUS the wall time of every
     ``succeeds`` command, timed by wrapping ``Sandbox.run`` (the calls made with
     ``record=False``). That is the scenario's own work, e.g. pytest.
   - overhead = total - command time. It therefore counts the `bash -c` the
     builtin agent starts per tool call and the PATH shim around each command
     as harness cost (the shim's own start-up is inside ``duration_ms`` only
     after its first line runs), and the ``succeeds`` process start-up as
     scenario time.
2. ``run_trial`` again with ``on_phase`` laps (``engine.PHASES``), timed with
   ``perf_counter``; its total is printed next to the plain run's. The agent
   phase is split into the tool processes (``bash -c`` wall, of which the
   recorded commands are scenario time) and the rest (model calls through the
   SDK and the gateway, file tools, bookkeeping).

Each scenario gets one warm-up of each, then ``--runs`` iterations; medians.
The playbook holds the scenario's rule, so the simulated model takes the
``with_rule`` branch (the one a gate must pass).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import _common
import anthropic
from _common import BUNDLED, machine, measured_trial, median, ms, playbook_text, progress, say, scenario_dir, table
from anthropic.resources.messages import Messages

from bot.replay import agents as agents_mod
from bot.replay import engine
from bot.replay.gateway import server as gateway_mod
from bot.replay.sandbox.workspace import Sandbox
from bot.replay.trace.events import RunDir, read_trace
from bot.scenario import spec as sc

TARGET_S = 0.150
PHASES = (*engine.PHASES[:4], "SDK client setup", "model calls (client side)", "file tools + agent loop",
          "tool process start (bash -c, shims)", *engine.PHASES[5:])


class Laps:
    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.phases: dict[str, float] = defaultdict(float)

    def lap(self, name: str) -> float:
        now = time.perf_counter()
        self.phases[name] += now - self.last
        self.last = now
        return self.phases[name]


def phased_trial(loaded: sc.LoadedScenario, text: str, opts: engine.ReplayOptions, trial: int, agent) -> dict:
    """``engine.run_trial`` with a lap at each phase it reports (``on_phase``), the agent phase split further."""
    with (_common.timed_method(Sandbox, "run") as calls, _common.timed_method(Messages, "create") as creates,
          _common.timed_method(anthropic.Anthropic, "__init__") as inits):
        laps = Laps()
        start = laps.last
        result = engine.run_trial(loaded, text, opts, trial, agent, on_phase=laps.lap)
        total = laps.last - start
        agent_calls = [seconds for record, seconds in calls.items if record]
        succeeds_s = calls.seconds(record=False)
        create_s, init_s = creates.seconds(record=True), inits.seconds(record=True)
    recorded = _common.command_seconds(read_trace(RunDir(Path(result.run_dir)).trace))
    phases = dict(laps.phases)
    agent_s = phases.pop("agent", 0.0)
    tools_s = sum(agent_calls)
    # The agent lap holds the tool processes and the SDK; the end state holds the succeeds commands.
    phases["SDK client setup"] = init_s  # the first Anthropic() of a run builds an SSL context
    phases["model calls (client side)"] = create_s
    phases["file tools + agent loop"] = agent_s - tools_s - create_s - init_s
    phases["tool process start (bash -c, shims)"] = tools_s - recorded
    phases["end state"] = phases.get("end state", 0.0) - succeeds_s
    return {"total": total, "overhead": total - recorded - succeeds_s, "phases": phases,
            "model_calls": result.model_calls}


@contextmanager
def gateway_nodelay():
    """What-if for the Nagle stall (see README): TCP_NODELAY on the gateway's sockets, this process only."""
    handler = gateway_mod._Handler
    before = handler.disable_nagle_algorithm
    handler.disable_nagle_algorithm = True
    try:
        yield
    finally:
        handler.disable_nagle_algorithm = before


def bench(runs: int, what_if: bool) -> None:
    agent = agents_mod.make("builtin")
    rows, phase_rows, overheads = [], defaultdict(dict), []
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        opts = engine.ReplayOptions(agent="builtin", runs_dir=Path(tmp))
        for sid in BUNDLED:
            loaded, text = sc.load(scenario_dir(sid)), playbook_text(sid, with_rule=True)
            measured_trial(loaded, text, opts, 0, agent)  # warm-up: imports, shim cache, page cache
            phased_trial(loaded, text, opts, 0, agent)
            real, phased, fixed = [], [], []
            for i in range(runs):
                real.append(measured_trial(loaded, text, opts, i + 1, agent))
                phased.append(phased_trial(loaded, text, opts, i + 1, agent))
                if what_if:
                    with gateway_nodelay():
                        fixed.append(measured_trial(loaded, text, opts, i + 1, agent))
                progress(f"{sid} {i + 1}/{runs}: run_trial {real[-1]['total']:.2f}s "
                         f"overhead {ms(real[-1]['overhead'])} ms; phased {ms(phased[-1]['overhead'])} ms"
                         + (f"; nodelay {ms(fixed[-1]['overhead'])} ms" if fixed else ""))
            over = median([r["overhead"] for r in real])
            overheads.append(over)
            verdicts = ",".join(sorted({r["verdict"] for r in real}))
            rows.append([sid, verdicts, ms(median([r["total"] for r in real])),
                         ms(median([r["commands"] for r in real])), ms(median([r["succeeds"] for r in real])),
                         ms(over), ms(median([p["overhead"] for p in phased])),
                         *([ms(median([r["overhead"] for r in fixed]))] if what_if else []),
                         phased[0]["model_calls"], runs])
            for name in PHASES:
                phase_rows[name][sid] = median([p["phases"].get(name, 0.0) for p in phased])
    say(f"## Replay overhead: builtin agent, simulated model\n\n{machine()}\n")
    say(table(["scenario", "verdict", "total ms", "agent commands ms", "succeeds ms", "overhead ms",
               "overhead ms (phased)", *(["overhead ms (gateway TCP_NODELAY)"] if what_if else []),
               "model calls", "N"], rows))
    worst = max(overheads)
    verdict = "met" if worst <= TARGET_S else f"missed by {ms(worst - TARGET_S)} ms"
    say(f"\nTarget: median overhead <= {ms(TARGET_S)} ms. Worst scenario: {ms(worst)} ms ({verdict}).\n")
    say("### Overhead by phase (medians of the phased runs, ms)\n")
    say(table(["phase", *BUNDLED], [[name, *(ms(phase_rows[name][s]) for s in BUNDLED)] for name in PHASES]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="measured runs per scenario, after one warm-up")
    parser.add_argument("--no-what-if", dest="what_if", action="store_false",
                        help="skip the third run per iteration with TCP_NODELAY on the gateway")
    args = parser.parse_args()
    bench(args.runs, args.what_if)


if __name__ == "__main__":
    main()
