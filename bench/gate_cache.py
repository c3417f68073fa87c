"""What the replay cache saves: admitting the four seed rules one after another.

Each variant starts from the same state: a fresh scratch workspace holding the
bundled scenarios, their incidents and the four seed rules in
``playbook/proposed/``. It gates rule-0001..0004 in turn with ``run_gate``
(own scenario as a sequential test, then the whole suite) and admits each rule
the gate admits, so later gates replay against a longer playbook.

* **no cache**: every replay runs;
* **cold cache**: an empty cache folder; runs shared within the sequence
  (a gate's suite runs with its rule are the next gate's before-runs and
  baselines) are replayed once;
* **warm cache**: the whole sequence again, in another fresh workspace, with
  the cache the cold run filled. Keys are by content, so no model call is due.

Replays use the builtin agent and the SIMULATED model (noise 0, seed 0).

    python bench/gate_cache.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from _common import machine

from bot._util import records
from bot._util.markdown import table
from bot.cli.demo_loop import build_workspace
from bot.gate.decision import GateOptions, GateResult, run_gate
from bot.incident.store import Incident, IncidentStore
from bot.playbook import rule as rules_mod
from bot.playbook.store import Playbook
from bot.replay.engine import ReplayOptions

SEED_RULES = ("rule-0001", "rule-0002", "rule-0003", "rule-0004")
# pytest-benchmark is installed here and autoloads into every `python -m pytest` a
# fixture runs: ~1.0-1.4 s a call, against ~0.3-0.5 s without autoload.
FAST_PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
ADMIT_ON = date(2026, 11, 30)


def workspace(folder: Path) -> Playbook:
    """A scratch repository: bundled scenarios, their incidents stored, the seed rules proposed."""
    build_workspace(folder)  # also writes the demo's .replaybook.yml (cap 3); the cap below is what counts
    store = IncidentStore(folder / "incidents")
    book = Playbook(folder / "playbook", root=folder, cap=60, incidents=store)
    proposed = book.dir("proposed")
    proposed.mkdir(parents=True)
    for scenario in sorted((folder / "scenarios").iterdir()):
        if not (scenario / "rule.yaml").is_file():
            continue
        for path in sorted((scenario / "incidents").glob("*.yaml")):
            store.add(records.load(Incident, path, what="incident"))
        rule = rules_mod.load(scenario / "rule.yaml", named_by_id=False)
        shutil.copyfile(scenario / "rule.yaml", proposed / f"{rule.id}.yaml")
    return book


@dataclass
class Totals:
    variant: str
    model_calls: int = 0
    replays: int = 0
    cache_hits: int = 0
    wall_s: float = 0.0
    decisions: list[str] = field(default_factory=list)

    def row(self) -> list:
        return [self.variant, self.model_calls, self.replays, self.cache_hits, f"{self.wall_s:.1f}",
                ", ".join(self.decisions)]


def admit_all(variant: str, folder: Path, cache_dir: Path | None, jobs: int) -> Totals:
    """Gate and admit the seed rules in order, in a fresh workspace at ``folder``."""
    book = workspace(folder)
    replay = ReplayOptions(agent="builtin", env_allow=(FAST_PYTEST,))
    opts = GateOptions(replay=replay, jobs=jobs, cache_dir=cache_dir)
    totals = Totals(variant)
    start = time.perf_counter()
    for rule_id in SEED_RULES:
        path = book.dir("proposed") / f"{rule_id}.yaml"
        result: GateResult = run_gate(book, path, folder / "scenarios", opts,
                                      progress=lambda text: print(f"  {variant} {rule_id}: {text}", file=sys.stderr,
                                                                  flush=True))
        if result.decision == "admit":
            book.admit(path, on=ADMIT_ON)
        totals.model_calls += result.model_calls
        totals.replays += result.replays
        totals.cache_hits += result.cache_hits
        totals.decisions.append(f"{rule_id} {result.decision}")
        if result.decision != "admit":
            print(f"  {variant} {rule_id}: {result.decision}: {result.reason}", file=sys.stderr, flush=True)
    totals.wall_s = time.perf_counter() - start
    return totals



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="replays run at once within a gate (default 2)")
    args = parser.parse_args(argv)
    os.environ[FAST_PYTEST] = "1"  # let through to the sandbox by env_allow; part of the cache key
    with tempfile.TemporaryDirectory(prefix="replaybook-bench-") as tmp:
        tmp = Path(tmp)
        cache = tmp / "cache"
        rows = [admit_all("no cache", tmp / "a", None, args.jobs),
                admit_all("cold cache", tmp / "b", cache, args.jobs),
                admit_all("warm cache (same sequence again)", tmp / "c", cache, args.jobs)]
    print("## The replay cache: admitting the four seed rules in turn (SIMULATED model)\n")
    print(table(["variant", "model calls", "replays", "cache hits", "wall time (s)", "decisions"],
                [t.row() for t in rows], width=120))
    print(f"\nEach variant in a fresh workspace, `jobs={args.jobs}`, suite = the four bundled scenarios. "
          f"{FAST_PYTEST}=1 is set and let through to the sandboxes, so the fixtures' `python -m pytest` "
          f"does not autoload pytest-benchmark (~0.3-0.5 s a call instead of ~1.0-1.4 s). {machine()}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
