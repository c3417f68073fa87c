"""The admit gate's error rates, measured with real replays against the noisy simulated model.

For each effect size (the pass rate of the rule's own scenario without the
rule, ``p_before``, and with it, ``p_after``) this runs ``--gates`` complete
gates of our sequential test and of the seed article's single-run gate (one
run each way, ``SequentialTest(1, 0, 1, 1)``). Every gate is real work: the
builtin agent in a sandbox, answered by the simulated model, through
``Runner.sequential`` with no cache.

The simulated model takes the rule's branch when the system prompt holds the
policy's ``branch_on``, and the OTHER branch with probability ``noise``. So the
before side replays without the rule at ``noise = p_before`` and the after side
with the rule at ``noise = 1 - p_after``.

The flip is drawn from (seed, scenario, trial index) alone, so two sides
replayed with the same seed draw the same numbers: a before-run that failed at
``noise = n`` is exactly an after-run that passes at the same noise. The sides
get different seeds here (``operating_characteristics`` assumes independent
trials); ``--shared-seed`` gives both sides one seed, as ``run_gate`` does with
its single ``ReplayOptions``, to show what that coupling costs.

    python bench/gate_error_rates.py [--gates 100] [--jobs 2] [--shared-seed]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import yaml
from _common import machine

from bot._util.markdown import table
from bot.gate import stats
from bot.gate.decision import GateOptions, Runner, Side
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.replay.engine import ReplayOptions
from bot.scenario import spec as sc

SCENARIO = "bench-own"
BRANCH_ON = "write right.txt"
RULE = "When a task says make it right, write right.txt and never wrong.txt."
EFFECTS = ((0.5, 0.5), (0.3, 0.3), (0.0, 0.9), (0.0, 0.7), (0.1, 0.9), (0.0, 1.0))
DESIGNS = {"sequential (ours)": stats.SequentialTest(), "single run (seed article)": stats.SequentialTest(1, 0, 1, 1)}


def mini_scenario(root: Path) -> Path:
    """A scenario passed by writing right.txt and failed by writing wrong.txt: a replay costs ~0.1 s."""
    folder = root / "scenarios" / SCENARIO
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "README.md").write_text("fixture\n", encoding="utf-8")
    policy = {"branch_on": BRANCH_ON,
              "with_rule": [{"bash": "echo ok > right.txt"}, {"say": "done"}],
              "without_rule": [{"bash": "echo no > wrong.txt"}, {"say": "done"}]}
    scenario = {"id": SCENARIO, "task": "make it right", "repo": "repo",
                "pass_if": [{"succeeds": {"run": "test -f right.txt"}}, {"exists": ["README.md"]}],
                "budget": {"max_turns": 5, "timeout_s": 60, "max_cost_usd": 1.0}}
    (folder / "policy.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
    (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
    return folder


def playbook_texts(root: Path) -> tuple[str, str]:
    """The rendered playbook without and with the candidate, as the gate builds them."""
    book = Playbook(root / "playbook", root=root)
    rule = Rule(id="rule-0001", rule=RULE, cites=["inc-a", "inc-b"], replay=f"scenarios/{SCENARIO}",
                created=date(2026, 11, 1))
    before, after = book.render_text([]), book.render_text([rule])
    assert BRANCH_ON not in before and BRANCH_ON in after
    return before, after


@dataclass
class Outcome:
    admitted: bool
    runs: int  # scored replays of the rule's own scenario
    unscored: int


def one_gate(loaded: sc.LoadedScenario, texts: tuple[str, str], test: stats.SequentialTest,
             p_before: float, p_after: float, seeds: tuple[int, int]) -> Outcome:
    """Both sides of one gate on the rule's own scenario (the suite is not part of this test)."""
    runner = Runner(GateOptions(cache_dir=None, jobs=1))  # one trial at a time: exact curtailment
    before = runner.sequential(Side("before", SCENARIO), loaded, texts[0], test.before, test.before_n,
                               ReplayOptions(noise=p_before, seed=seeds[0]))
    sides = [before]
    if before.outcome == "pass":
        sides.append(runner.sequential(Side("after", SCENARIO), loaded, texts[1], test.after, test.after_n,
                                       ReplayOptions(noise=round(1 - p_after, 12), seed=seeds[1])))
    admitted = all(s.outcome == "pass" for s in sides) and len(sides) == 2
    return Outcome(admitted, sum(s.n for s in sides), sum(s.unscored for s in sides))


def seeds_for(gate: int, cell: int, shared: bool) -> tuple[int, int]:
    base = 1_000_000 * (cell + 1) + 2 * gate
    return (base, base) if shared else (base, base + 1)


def measure(loaded, texts, gates: int, jobs: int, shared: bool) -> list[list]:
    cells = [(name, test, pb, pa) for pb, pa in EFFECTS for name, test in DESIGNS.items()]
    work = [(c, g) for c in range(len(cells)) for g in range(gates)]

    def run(item):
        c, g = item
        _, test, pb, pa = cells[c]
        return c, one_gate(loaded, texts, test, pb, pa, seeds_for(g, c, shared))

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run, work))
    rows = []
    for c, (name, test, pb, pa) in enumerate(cells):
        outs = [o for ci, o in results if ci == c]
        k = sum(o.admitted for o in outs)
        lo, hi = stats.wilson(k, len(outs))
        exact = stats.operating_characteristics(test, pb, pa)
        label = f"{pb:g} → {pa:g}" + (" (no effect)" if pb == pa else "")
        rows.append([label, name, f"{k}/{len(outs)}", f"{k / len(outs):.3f}", f"{lo:.3f}–{hi:.3f}",
                     f"{exact.p_admit:.4f}", f"{sum(o.runs for o in outs) / len(outs):.2f}",
                     f"{exact.expected_runs:.2f}", sum(o.unscored for o in outs)])
    return rows



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=100, help="gates per effect size and design (default 100)")
    parser.add_argument("--jobs", type=int, default=2, help="gates run at once, in threads (default 2)")
    parser.add_argument("--shared-seed", action="store_true",
                        help="one seed for both sides, as run_gate uses (the flips are then coupled)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="replaybook-bench-") as tmp:
        root = Path(tmp)
        loaded = sc.load(mini_scenario(root))
        texts = playbook_texts(root)
        print(f"Running {args.gates} gates × {len(EFFECTS)} effect sizes × {len(DESIGNS)} designs, "
              f"{args.jobs} at a time…", file=sys.stderr, flush=True)
        start = time.perf_counter()
        rows = measure(loaded, texts, args.gates, args.jobs, args.shared_seed)
        wall = time.perf_counter() - start
    seeds = "one seed for both sides (coupled flips, as in run_gate)" if args.shared_seed else \
        "independent seeds per side and per gate"
    print(f"## Gate error rates: SIMULATED model, real replays, no cache ({seeds})\n")
    exact = "exact P(admit), if the sides were independent" if args.shared_seed else "exact P(admit)"
    print(table(["p_before → p_after", "gate", "admitted", "rate", "95% Wilson", exact,
                 "mean runs", "exact E[runs]", "unscored"], rows))
    replays = sum(float(r[6]) * args.gates for r in rows)
    print(f"\n{replays:.0f} replays in {wall:.0f} s ({wall / replays * args.jobs * 1000:.0f} ms each, "
          f"{args.jobs} at a time). {machine()}.")
    print("Targets: a no-effect rule admitted ≤ 2.5% of the time; a real rule (0 → 0.9) ≥ 90%; "
          "≤ 8 expected runs. \"mean runs\" counts replays of the rule's own scenario, both sides.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
