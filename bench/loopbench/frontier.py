"""The measured frontier: replaybook at each of a fixed list of gate settings, on the same reporting seeds.

Each variant is the product's gate with settings it ships (``gate.own_test``, ``gate.unreached``,
``gate.budget``, the suite test's accept boundary), run through the product's decision code
(``loopbench.simgate``) on the first N reporting seeds. What each buys: replays per gated candidate and per
admission against the harmful rate (with its Wilson upper bound) and the last-4-week failures.
"""

from __future__ import annotations

from bot._util.markdown import table
from loopbench import seeds as seeds_mod
from loopbench import targets

# (label, --own-test, --unreached-once, --budget, --gate-set items): from the product's defaults to its leanest
VARIANTS = [
    ("product defaults (own test auto: paired)", None, False, None, []),
    ("own test baseline", "baseline", False, None, []),
    ("baseline, suite accept at −1.0 (lean)", "baseline", False, None, ["suite.accept_at=-1.0"]),
    ("baseline, lean, unreached once", "baseline", True, None, ["suite.accept_at=-1.0"]),
    ("baseline, lean, unreached once, budget 200", "baseline", True, 200, ["suite.accept_at=-1.0"]),
    ("baseline, lean, unreached once, budget 60", "baseline", True, 60, ["suite.accept_at=-1.0"]),
]


def run(args, stream_cfg, loop_cfg, noise_cfg, seed_list, run_seeds, gate_table) -> list[dict]:
    """Each variant's replaybook on ``seed_list`` (``run_seeds``, ``gate_table``: bench/loop.py's)."""
    from argparse import Namespace

    rows = []
    for label, own_test, unreached, budget, sets in VARIANTS:
        v = Namespace(**{**vars(args), "own_test": own_test, "unreached_once": unreached, "budget": budget,
                         "gate_set": sets})
        table_, variant = gate_table(v, args.suite_size)
        runs = run_seeds(seed_list, stream_cfg, loop_cfg, noise_cfg, ["replaybook"], v, table_)["replaybook"]
        fig = seeds_mod.figures(seeds_mod.summed(runs))
        s = targets.summary(fig)
        rows.append({"variant": label, "settings": variant, **s,
                     "inconclusive": fig["rejections"].get("inconclusive", 0),
                     "no_effect_admit": targets.no_effect_admit(table_["replaybook"])["p_admit"],
                     "failures_last4_per_seed": [sum(w.failures for w in ws[-4:]) for ws in runs]})
    return rows


def markdown(rows: list[dict], fair_last4: list[int] | None = None) -> list[str]:
    pct = lambda x: "–" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    out = ["## Frontier (replaybook at each setting, the same seeds)", ""]
    body = []
    for r in rows:
        vs = "–"
        if fair_last4:
            w = targets.wilcoxon_less(r["failures_last4_per_seed"], fair_last4[:len(r["failures_last4_per_seed"])])
            vs = f"p = {w['p']:.3g}"
        body.append([r["variant"], r["candidates_gated"], r["admissions"], r["replays_per_gated_candidate"] or "–",
                     r["replays_per_admission"] or "–", f"{r['harmful_admitted']} ({pct(r['harmful_rate'])}, upper "
                     f"{pct(r['harmful_wilson_upper95'])})", r["useless_admitted"], r["inconclusive"],
                     f"{100 * r['no_effect_admit']:.2f}%", r["failures_last4"], pct(r["repeat_share_last4"]), vs])
    out.append(table(["setting", "gated", "admitted", "replays / gated", "replays / admission", "harmful",
                      "useless", "inconclusive gates", "no-effect admit (exact)", "failures, last 4 wk",
                      "repeat share, last 4 wk", "below single_run_fair (Wilcoxon)"], body))
    names = ", ".join(f'"{i + 1}"' for i in range(len(rows)))
    top = max([r["replays_per_admission"] or 0 for r in rows] + [60])
    out += ["", "```mermaid", "xychart-beta", '    title "Replays per admission by setting (1..n as in the table)"',
            f"    x-axis [{names}]", f'    y-axis "replays per admission" 0 --> {int(top * 1.1) + 1}',
            f"    bar [{', '.join(str(round(r['replays_per_admission'] or 0)) for r in rows)}]",
            f"    line [{', '.join('60' for _ in rows)}]", "```", "",
            "```mermaid", "xychart-beta", '    title "Harmful admissions per 100 admissions by setting"',
            f"    x-axis [{names}]", '    y-axis "harmful %" 0 --> 10',
            "    bar [" + ", ".join(f"{100 * (r['harmful_rate'] or 0):.1f}" for r in rows) + "]",
            f"    line [{', '.join('1' for _ in rows)}]", "```"]
    return out
