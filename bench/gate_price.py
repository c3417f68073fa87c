"""What a gate costs and what each budget buys, exactly (``bot.gate.price``): the tables of docs/gate.md,
"The price of a gate".

For a suite of ``--suite`` scenarios (the rule's own scenario among them, so ``--suite`` - 1 judged), every
suite scenario at 0.9 with its baseline cached (or carried from the last admission, ``bot.gate.reuse``), this
prints, for each own-scenario test and suite design, the chance of admitting a rule with no effect, a real one, a
harmful one (it also takes one suite scenario from 0.9 to 0.5), and the replays a candidate costs, with no budget
and with each budget of ``--budgets`` fresh replays. ``--reach R``: only R suite scenarios are judged (the rule's
scope reaches them; see docs/gate.md for when that holds).

    python bench/gate_price.py [--suite 30] [--reach 29 5] [--budgets 40 60 100 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.gate import price, stats  # noqa: E402

CASES = {"no effect (0.5 → 0.5)": (0.5, 0.5, None), "useless (0.4 → 0.46)": (0.4, 0.46, None),
         "real (0.4 → 0.85)": (0.4, 0.85, None), "real (0 → 0.9)": (0.0, 0.9, None),
         "harmful (0.4 → 0.85; one suite scenario 0.9 → 0.5)": (0.4, 0.85, (0.9, 0.5)),
         "harmful, smaller (… 0.9 → 0.7)": (0.4, 0.85, (0.9, 0.7))}
OWN = {"paired": stats.PairedTest(), "baseline": stats.BaselineTest()}
SUITE = {"default": stats.SuiteTest(), "lean (accept at −1.0)": replace(stats.SuiteTest(), accept_at=-1.0)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", type=int, default=30)
    p.add_argument("--reach", type=int, nargs="+", default=None)
    p.add_argument("--budgets", type=int, nargs="+", default=[40, 60, 100, 200])
    args = p.parse_args(argv)
    started = time.time()
    reach = args.reach or [args.suite - 1, 5]
    heads = " | ".join(f"B={b}: P(admit) / E[replays]" for b in args.budgets)
    print(f"| own test | suite | judged | rule | P(admit), no budget | E[replays] | {heads} |")
    print("|" + "---|" * (6 + len(args.budgets)))
    for own_name, own_test in OWN.items():
        for suite_name, suite in SUITE.items():
            for r in reach:
                clean = price.suite_dist(suite, 0.9, 0.9, r)
                for name, (pb, pa, harm) in CASES.items():
                    own = price.own_dist(own_test, pb, pa)
                    scenarios = ([price.suite_dist(suite, *harm, r)] + [clean] * (r - 1)) if harm else [clean] * r
                    cells = [price.gate_price(own, scenarios, b) for b in args.budgets]
                    whole = price.gate_price(own, scenarios)
                    row = " | ".join(f"{c.p_admit:.4f} / {c.expected_replays:.1f}" for c in cells)
                    print(f"| {own_name} | {suite_name} | {r} | {name} | {whole.p_admit_unbounded:.4f} | "
                          f"{whole.expected_unbounded:.1f} | {row} |")
    print(f"\n{time.time() - started:.0f} s; `python bench/gate_price.py {' '.join(argv or sys.argv[1:])}`".rstrip())


if __name__ == "__main__":
    main()
