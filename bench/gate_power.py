"""The power of the gate's suite check, measured with real replays against the noisy simulated model.

A suite of ``K`` scenarios that the agent passes 90% of the time (the
simulated model takes the other branch with probability 0.1). Two planted
candidate rules:

* **harmless**: its text is in no scenario's policy, so every scenario stays at 0.9;
* **harmful**: its text is the first scenario's ``branch_on``; that scenario's
  branches pass 0.95 (without the text) and 0.45 (with it) by a bash
  ``$RANDOM`` draw, so with the noise it passes 0.9 without the rule and 0.5 with it.

Each simulated gate judges the whole suite as ``run_gate`` does
(``bot.gate.decision._judge``: the baseline batch, then the candidate's sequential
trials), with its own seed and no cache, so every gate is independent. The
same is done for today's design (3 baseline and 3 candidate trials per
scenario, a one-sided binomial test at 5%), and both are printed beside
their exact operating characteristics.

    python bench/gate_power.py [--gates 40] [--jobs 2] [--suite 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from bot._util.markdown import table
from bot.gate import decision as gate_mod
from bot.gate import stats
from bot.gate.decision import GateOptions, Runner, Side
from bot.replay.engine import ReplayOptions
from bot.scenario import spec as sc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gate_error_rates import machine  # noqa: E402

NOISE = 0.1  # every scenario passes 0.9 of the time without the harm
HARM_BRANCH = "the harmful words"
RULES = {"harmless": "When a task says make it right, write right.txt.",
         "harmful": f"When a task says make it right, say {HARM_BRANCH}."}


def coin(in_20: int) -> list[dict]:
    """Steps that pass ``in_20`` times in 20 (a bash ``$RANDOM`` draw, fresh in every replay)."""
    return [{"bash": f"[ $((RANDOM % 20)) -lt {in_20} ] && echo ok > right.txt; true"}, {"say": "done"}]


def suite(root: Path, k: int) -> list[sc.LoadedScenario]:
    """``k`` scenarios passed by writing right.txt; the first one is the harmful rule's victim."""
    out = []
    for i in range(k):
        sid = f"suite-{i}"
        folder = root / "scenarios" / sid
        (folder / "repo").mkdir(parents=True)
        (folder / "repo" / "README.md").write_text("fixture\n", encoding="utf-8")
        branch = HARM_BRANCH if i == 0 else f"words of scenario {i} that no rule says"
        if i == 0:  # 0.9 × 0.95 + 0.1 × 0.45 = 0.9 without the harmful text, 0.9 × 0.45 + 0.1 × 0.95 = 0.5 with it
            policy = {"branch_on": branch, "with_rule": coin(9), "without_rule": coin(19)}
        else:  # the rule's branch is taken only on a flip (0.1), and fails
            policy = {"branch_on": branch, "with_rule": [{"bash": "echo no > wrong.txt"}, {"say": "done"}],
                      "without_rule": coin(20)}
        scenario = {"id": sid, "task": "make it right", "repo": "repo",
                    "pass_if": [{"succeeds": {"run": "test -f right.txt"}}],
                    "budget": {"max_turns": 5, "timeout_s": 60, "max_cost_usd": 1.0}}
        (folder / "policy.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
        (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
        out.append(sc.load(folder))
    return out


@dataclass
class Gate:
    regressed: bool
    baseline_runs: int
    candidate_runs: int


def ours(scenarios, rule: str, seed: int) -> Gate:
    opts = GateOptions(replay=ReplayOptions(noise=NOISE, seed=seed), cache_dir=None, jobs=1)
    runner = Runner(opts)
    entries = [gate_mod._judge(runner, opts, opts.suite, len(scenarios), s, "", rule) for s in scenarios]
    return Gate(any(e.regressed for e in entries), sum(e.baseline.n for e in entries),
                sum(e.candidate.n for e in entries if e.candidate))


def today(scenarios, rule: str, seed: int, n: int = 3) -> Gate:
    """The design this replaces: n baseline and n candidate trials, a one-sided binomial test at 5%."""
    opts = GateOptions(replay=ReplayOptions(noise=NOISE, seed=seed), cache_dir=None, jobs=1)
    runner = Runner(opts)
    regressed, base, cand = False, 0, 0
    for s in scenarios:
        b = runner.fixed(Side("baseline", s.scenario.id), s, "", n, opts.replay)
        base += b.n
        if b.passes == 0:
            continue
        c = runner.fixed(Side("with rule", s.scenario.id), s, rule, n, opts.replay)
        cand += c.n
        regressed |= today_regressed(b.passes, b.n, c.passes, c.n)
    return Gate(regressed, base, cand)


def today_regressed(bp: int, bn: int, cp: int, cn: int, alpha: float = 0.05) -> bool:
    rate = bp / bn
    return sum(math.comb(cn, i) * rate**i * (1 - rate) ** (cn - i) for i in range(cp + 1)) < alpha


def today_exact(rates: list[tuple[float, float]], n: int = 3) -> tuple[float, float]:
    """Exact P(regression found) and expected trials (baseline + candidate) of today's design."""
    clean, runs = 1.0, 0.0
    for b, c in rates:
        p_reg, p_judged = 0.0, 0.0
        for bp in range(1, n + 1):
            wb = math.comb(n, bp) * b**bp * (1 - b) ** (n - bp)
            p_judged += wb
            p_reg += wb * sum(math.comb(n, cp) * c**cp * (1 - c) ** (n - cp)
                              for cp in range(n + 1) if today_regressed(bp, n, cp, n))
        clean *= 1 - p_reg
        runs += n + n * p_judged
    return 1 - clean, runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=40, help="simulated gates per rule and design (default 40)")
    parser.add_argument("--jobs", type=int, default=2, help="gates run at once, in threads (default 2)")
    parser.add_argument("--suite", type=int, default=3, help="suite scenarios (default 3, as the bundled suite)")
    args = parser.parse_args(argv)
    test = stats.SuiteTest()
    rates = {"harmless": [(0.9, 0.9)] * args.suite, "harmful": [(0.9, 0.5)] + [(0.9, 0.9)] * (args.suite - 1)}
    with tempfile.TemporaryDirectory(prefix="replaybook-bench-") as tmp:
        scenarios = suite(Path(tmp), args.suite)
        work = [(design, rule, g) for design in ("ours", "today") for rule in RULES for g in range(args.gates)]
        print(f"Running {len(work)} simulated suite checks ({args.suite} scenarios each), {args.jobs} at a time…",
              file=sys.stderr, flush=True)
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            runs = list(pool.map(lambda w: (w, (ours if w[0] == "ours" else today)(
                scenarios, RULES[w[1]], seed=1_000 * (w[2] + 1) + (w[0] == "today") + 2 * (w[1] == "harmful"))),
                work))
        wall = time.perf_counter() - start
    rows = []
    for design in ("ours", "today"):
        for rule in RULES:
            gates = [g for (d, r, _), g in runs if d == design and r == rule]
            found = sum(g.regressed for g in gates)
            wrong = found if rule == "harmless" else len(gates) - found
            lo, hi = stats.wilson(wrong, len(gates))
            if design == "ours":
                p_reg, exp_cand = stats.suite_characteristics(test, rates[rule])
                exp_base = stats.suite_baseline_runs(test, rates[rule])  # the baseline on demand, none cached
            else:
                p_reg, exp_total = today_exact(rates[rule])
                exp_base, exp_cand = 3 * args.suite, exp_total - 3 * args.suite
            exact_wrong = p_reg if rule == "harmless" else 1 - p_reg
            label = "rejected (regression)" if rule == "harmless" else "admitted"
            rows.append([design, rule, label, f"{wrong}/{len(gates)}", f"{lo:.3f}–{hi:.3f}", f"{exact_wrong:.4f}",
                         f"{sum(g.candidate_runs for g in gates) / len(gates):.1f}", f"{exp_cand:.1f}",
                         f"{sum(g.baseline_runs for g in gates) / len(gates):.1f}", f"{exp_base:.1f}"])
    print(f"## Suite check power: SIMULATED model, real replays, no cache ({args.suite} suite scenarios at 0.9)\n")
    print(table(["design", "rule", "wrong decision", "observed", "95% Wilson", "exact",
                 "candidate runs", "exact E", "baseline runs", "exact"], rows))
    replays = sum(g.baseline_runs + g.candidate_runs for _, g in runs)
    print(f"\n{replays} replays in {wall:.0f} s. {machine()}.")
    print("Targets: harmful admitted ≤ 5%; harmless rejected ≤ 5%; expected suite replays ≤ 2× today's. "
          "Baseline runs are shared by every candidate until the playbook changes (cached); candidate runs are "
          "paid by each gate.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
