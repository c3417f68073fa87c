"""Issue 54's targets (issue 46's, tightened) for the noisy preset: the summary every policy reports, the paired test over seeds, the verdicts.

The seeds: a reporting run uses seeds ``REPORT_FROM + i`` (i = 0 … n − 1) and
refuses any seed below ``REPORT_FROM``; those are for tuning only
(``--tuning``), and such a run is labelled so.
"""

from __future__ import annotations

import math

from bot.gate import stats
from loopbench import params

REPORT_FROM = 1000


def seed_rule(start: int, n: int, tuning: bool) -> tuple[list[int], str]:
    """The seeds of a run and the rule that chose them; ValueError for a reporting run on tuning seeds."""
    seeds = list(range(start, start + n))
    if tuning:
        if seeds[-1] >= REPORT_FROM:
            raise ValueError(f"--tuning runs seeds below {REPORT_FROM} only (asked {seeds[0]}–{seeds[-1]})")
        return seeds, f"TUNING seeds {start} + i, i = 0..{n - 1} (below {REPORT_FROM}; never reported)"
    if start < REPORT_FROM:
        raise ValueError(f"seeds below {REPORT_FROM} are tuning seeds: a reporting run starts at {REPORT_FROM} or "
                         f"above (asked --seed {start}); add --tuning to run them, labelled as tuning")
    return seeds, f"reporting seeds {start} + i, i = 0..{n - 1} (fixed rule; tuning used seeds below {REPORT_FROM})"


def wilson_upper(k: int, n: int, z: float = 1.96) -> float | None:
    return round(stats.wilson(k, n, z)[1], 4) if n else None


def wilcoxon_less(x: list[float], y: list[float]) -> dict:
    """One-sided Wilcoxon signed-rank test that x is below y, paired by seed (zero differences dropped, mid-ranks
    for ties, the normal approximation with the tie correction and a continuity correction)."""
    d = [a - b for a, b in zip(x, y) if a != b]
    n = len(d)
    if n == 0:
        return {"test": "Wilcoxon signed-rank, one-sided", "n": 0, "p": 1.0}
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks = [0.0] * n
    i, ties = 0, 0.0
    while i < n:
        j = i
        while j + 1 < n and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2 + 1
        size = j - i + 1
        ties += size ** 3 - size
        i = j + 1
    w_plus = sum(r for r, v in zip(ranks, d) if v > 0)
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24 - ties / 48)
    z = (w_plus - mean + 0.5) / sd if sd else 0.0  # small W+ (x below y) gives a small p
    return {"test": "Wilcoxon signed-rank, one-sided (normal approximation)", "n": n, "w_plus": w_plus,
            "z": round(z, 3), "p": round(0.5 * math.erfc(-z / math.sqrt(2)), 6)}


def sign_less(x: list[float], y: list[float]) -> dict:
    """One-sided exact sign test that x is below y, paired by seed (ties dropped)."""
    below = sum(a < b for a, b in zip(x, y))
    n = below + sum(a > b for a, b in zip(x, y))
    p = sum(math.comb(n, k) for k in range(below, n + 1)) / 2 ** n if n else 1.0
    return {"test": "sign test, one-sided, exact", "n": n, "below": below, "p": round(p, 6)}


def summary(s: dict) -> dict:
    """The issue's per-policy summary, from ``seeds.figures`` (sums over the seeds)."""
    gated, adm, rep = s["gated"], s["admitted"], s["replays"]
    out = {"candidates_gated": gated, "admissions": adm, "harmful_admitted": s["harmful_ever"],
           "harmful_at_design_drop": s.get("harmful_big", 0),
           "useless_admitted": s["useless_admitted"], "replays": rep, "failures_last4": s["failures_last4"],
           "repeat_share_last4": s["repeat_share_last4"],
           "replays_per_gated_candidate": round(rep / gated, 2) if gated else None,
           "replays_per_admission": round(rep / adm, 2) if adm else None,
           "harmful_rate": round(s["harmful_ever"] / adm, 4) if adm else None,
           "harmful_wilson_upper95": wilson_upper(s["harmful_ever"], adm)}
    if s.get("gates_by"):
        out["replays_by_purpose"] = by_purpose(s["replays_by"], s["gates_by"])
    for agent, price in params.AGENTS.items():
        usd = params.replay_usd(price)
        out[f"usd_per_admission {agent}"] = round(rep * usd / adm, 2) if adm else None
        out[f"usd_per_gated_candidate {agent}"] = round(rep * usd / gated, 2) if gated else None
    return out


OUTCOMES = ("admitted", "rejected_own", "rejected_suite", "inconclusive", "error")


def by_purpose(replays_by: dict, gates_by: dict) -> dict:
    """Fresh gate replays by purpose (``simgate.PURPOSES``), each split by where its gate ended (``replays_by``:
    "outcome purpose" -> replays), plus the gate runs of each outcome (``gates``); ``total`` sums a row."""
    from loopbench.simgate import PURPOSES

    outcomes = [o for o in OUTCOMES if gates_by.get(o)]
    out = {p: {"total": sum(replays_by.get(f"{o} {p}", 0) for o in outcomes),
               **{o: replays_by.get(f"{o} {p}", 0) for o in outcomes}} for p in PURPOSES}
    out["gates"] = {"total": sum(gates_by.values()), **{o: gates_by[o] for o in outcomes}}
    return out


def no_effect_admit(opts) -> dict:
    """The product's own test, its exact chance of admitting a no-effect rule (``bot.gate.price.own_dist``, the
    gate helper's computation, where it exists; else ``bot.gate.stats``), worst over pass rates 0.05–0.95."""
    test = opts.test.paired if isinstance(opts.test, stats.AutoTest) else opts.test
    grid = [i / 20 for i in range(1, 20)]
    try:
        from bot.gate.price import own_dist

        def admit(p: float) -> float:
            return sum(own_dist(test, p, p)[0].values())
        how = "bot.gate.price.own_dist"
    except ImportError:  # before the gate helper's computation
        def admit(p: float) -> float:
            if isinstance(test, stats.PairedTest):
                return stats.paired_characteristics(test, p, p).p_admit
            return stats.operating_characteristics(test, p, p).p_admit
        how = "bot.gate.stats"
    worst = max(grid, key=admit)
    return {"p_admit": round(admit(worst), 5), "at_pass_rate": worst, "test": test.describe(), "computed_by": how}


def ranking(summaries: dict[str, dict]) -> str:
    """Policies from fewest last-4-week failures to most."""
    order = sorted(summaries, key=lambda n: (summaries[n]["failures_last4"], n))
    return " < ".join(f"{n} {summaries[n]['failures_last4']}" for n in order)


def evaluate(summaries: dict[str, dict], per_seed_last4: dict[str, list[int]], no_effect: dict,
             pooled: bool = True) -> list[dict]:
    """Issue 54's targets for ``replaybook`` (``pooled``: the figures of every block together, where the harmful
    rate's Wilson upper bound and the paired test's p are read; a block is held to the rest)."""
    r, out = summaries.get("replaybook"), []
    if not r:
        return out
    sonnet, haiku = (f"usd_per_admission {a}" for a in params.AGENTS)
    out.append({"target": "replays per gated candidate ≤ 30", "key": "per_gated",
                "value": r["replays_per_gated_candidate"], "met": (r["replays_per_gated_candidate"] or 0) <= 30})
    out.append({"target": "replays per admission ≤ 60", "key": "per_admission",
                "value": f"{r['replays_per_admission']} (${r[sonnet]} Sonnet-class, ${r[haiku]} Haiku-class)",
                "met": r["replays_per_admission"] is not None and r["replays_per_admission"] <= 60})
    upper = r["harmful_wilson_upper95"]
    out.append({"target": "harmful ≤ 1% of admissions" + (", Wilson 95% upper ≤ 1.5%" if pooled else ""),
                "key": "harmful",
                "value": f"{r['harmful_admitted']}/{r['admissions']} = {100 * (r['harmful_rate'] or 0):.2f}%, "
                         f"upper {100 * (upper if upper is not None else 1):.2f}%",
                "met": (r["harmful_rate"] or 0) <= 0.01 and (not pooled or (upper if upper is not None else 1) <= 0.015)})
    out.append({"target": "no-effect rule admitted ≤ 2.5% (exact)", "key": "no_effect",
                "value": f"{100 * no_effect['p_admit']:.2f}% (worst at pass rate {no_effect['at_pass_rate']})",
                "met": no_effect["p_admit"] <= 0.025})
    if "single_run_fair" in per_seed_last4:
        w = wilcoxon_less(per_seed_last4["replaybook"], per_seed_last4["single_run_fair"])
        sign = sign_less(per_seed_last4["replaybook"], per_seed_last4["single_run_fair"])
        lower = r["failures_last4"] < summaries["single_run_fair"]["failures_last4"]
        out.append({"target": "last-4-week failures below single_run_fair (paired over seeds"
                              + (", p < 0.05)" if pooled else ": lower)"), "key": "failures",
                    "value": f"{r['failures_last4']} vs {summaries['single_run_fair']['failures_last4']}; "
                             f"Wilcoxon p = {_p(w['p'])} (n {w['n']}); sign test p = {_p(sign['p'])}",
                    "met": lower and (not pooled or w["p"] < 0.05), "tests": [w, sign]})
    if "oracle" in summaries:
        o = summaries["oracle"]["repeat_share_last4"]
        out.append({"target": "repeat share, last 4 weeks ≤ 1.5× the oracle's", "key": "repeat_share",
                    "value": f"{100 * r['repeat_share_last4']:.1f}% vs oracle {100 * o:.1f}% "
                             f"({r['repeat_share_last4'] / o:.2f}×)" if o else "oracle 0",
                    "met": bool(o) and r["repeat_share_last4"] <= 1.5 * o})
    return out


def _p(p: float) -> str:
    return "< 1e-6" if p < 1e-6 else f"{p:.3g}"


def across_blocks(pooled: list[dict], blocks: list[list[dict]]) -> list[dict]:
    """Each target held only if it holds pooled and in every block: its pooled row, each block's value and verdict."""
    out = []
    for row in pooled:
        each = [next((t for t in b if t["key"] == row["key"]), None) for b in blocks]
        out.append({"target": row["target"], "key": row["key"], "pooled": row["value"], "pooled_met": row["met"],
                    "blocks": [t["value"] if t else None for t in each],
                    "blocks_met": [bool(t and t["met"]) for t in each],
                    "met": row["met"] and all(t and t["met"] for t in each)})
    return out
