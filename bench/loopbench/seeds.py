"""Several seeds: weeks summed over seeds, means and ranges, and the noisy preset's report and targets."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields

from bot._util.markdown import table
from loopbench import params, report
from loopbench import targets as targets_mod
from loopbench.run import Week

ADDED = [f.name for f in fields(Week)
         if f.name not in ("week", "rejections", "repeat_causes", "replays_by", "gates_by", "q", "cost_per_admission")]
FIGURES = ("failures", "failures_last4", "repeat_share", "repeat_share_last4", "harmful_ever", "useless_admitted",
           "good_rejected", "playbook_size", "admitted", "replays", "cost_usd", "cost_per_admission")


def summed(per_seed: list[list[Week]]) -> list[Week]:
    """Week by week over the seeds: counts added (cumulative ones too), shares over the sums."""
    out, cost, admitted = [], 0.0, 0
    for weeks in zip(*per_seed):
        w = Week(weeks[0].week)
        for name in ADDED:
            setattr(w, name, sum(getattr(x, name) for x in weeks))
        w.rejections = sum((x.rejections for x in weeks), Counter())
        w.repeat_causes = sum((x.repeat_causes for x in weeks), Counter())
        w.replays_by = sum((x.replays_by for x in weeks), Counter())
        w.gates_by = sum((x.gates_by for x in weeks), Counter())
        w.q = round(sum(x.q for x in weeks) / len(weeks), 4)
        w.cost_usd, w.task_cost_usd = round(w.cost_usd, 6), round(w.task_cost_usd, 6)
        cost, admitted = cost + w.cost_usd, admitted + w.admitted
        w.cost_per_admission = round(cost / admitted, 4) if admitted else None
        out.append(w)
    return out


def figures(weeks: list[Week]) -> dict:
    s = report.summary(weeks)
    s["useless_admitted"] = weeks[-1].useless_admitted if weeks else 0
    s["harmful_big"] = weeks[-1].harmful_big if weeks else 0
    s["good_rejected"] = sum(w.good_rejected for w in weeks)
    s["bad_admitted"] = s["harmful_ever"] + s["useless_admitted"]
    s["repeat_causes_last4"] = dict(sum((w.repeat_causes for w in weeks[-4:]), Counter()).most_common())
    s["reproposals"] = sum(w.reproposals for w in weeks)
    s["escalated"] = sum(w.escalated for w in weeks)
    s["gated"] = sum(w.gated for w in weeks)
    by = sum((w.replays_by for w in weeks), Counter())
    s["replays_by"] = {f"{outcome} {purpose}": n for (outcome, purpose), n in sorted(by.items())}
    s["gates_by"] = dict(sorted(sum((w.gates_by for w in weeks), Counter()).items()))
    return s


def spread(per_seed: list[list[Week]]) -> dict:
    """Each figure's mean and range over the seeds."""
    each = [figures(w) for w in per_seed]
    out = {}
    for key in (*FIGURES, "bad_admitted"):
        values = [e[key] for e in each if e[key] is not None]
        if values:
            out[key] = {"mean": round(sum(values) / len(values), 4), "min": min(values), "max": max(values)}
    return out


def as_json(runs: dict[str, list[list[Week]]], parameters: dict, seeds: list[int], no_effect: dict | None = None,
            per_seed: bool = True) -> dict:
    policies, summaries, last4 = {}, {}, {}
    for name, runs_of in runs.items():
        weeks = summed(runs_of)
        fig = figures(weeks)
        summaries[name] = targets_mod.summary(fig)
        last4[name] = [sum(w.failures for w in ws[-4:]) for ws in runs_of]
        policies[name] = {"summary": summaries[name], "figures": fig, "weeks": [report.week_json(w) for w in weeks],
                          "spread": spread(runs_of), "failures_last4_per_seed": last4[name]}
        if per_seed:
            policies[name]["seeds"] = {str(seed): [report.week_json(w) for w in ws] for seed, ws in zip(seeds, runs_of)}
    return {"simulated": True, "model": report.SIM_NOISY, "parameters": parameters, "policies": policies,
            "ranking": targets_mod.ranking(summaries),
            "targets": targets_mod.evaluate(summaries, last4, no_effect or {"p_admit": 1.0, "at_pass_rate": None})}


def blocks(runs: dict[str, list[list[Week]]], seeds: list[int], size: int, no_effect: dict) -> dict:
    """The seeds in fixed blocks of ``size`` (issue 54: four of 60), each reported on its own, with its targets;
    a target holds only if it holds pooled and in every block (``targets.across_blocks``)."""
    out, verdicts = [], []
    for start in range(0, len(seeds), size):
        part = {n: r[start:start + size] for n, r in runs.items()}
        summaries = {n: targets_mod.summary(figures(summed(r))) for n, r in part.items()}
        last4 = {n: [sum(w.failures for w in ws[-4:]) for ws in r] for n, r in part.items()}
        t = targets_mod.evaluate(summaries, last4, no_effect, pooled=False)
        verdicts.append(t)
        out.append({"seeds": [seeds[start], seeds[min(start + size, len(seeds)) - 1]], "summaries": summaries,
                    "targets": t})
    pooled = {n: targets_mod.summary(figures(summed(r))) for n, r in runs.items()}
    last4 = {n: [sum(w.failures for w in ws[-4:]) for ws in r] for n, r in runs.items()}
    return {"size": size, "blocks": out,
            "targets": targets_mod.across_blocks(targets_mod.evaluate(pooled, last4, no_effect), verdicts)}


def blocks_markdown(data: dict, title: str = "") -> list[str]:
    """Each block's replaybook figures and each target per block and pooled."""
    b = data["blocks"]
    heads = [f"{x['seeds'][0]}–{x['seeds'][1]}" for x in b]
    rows = []
    for name in b[0]["summaries"]:
        for x in b:
            s = x["summaries"][name]
            rows.append([name, f"{x['seeds'][0]}–{x['seeds'][1]}", s["candidates_gated"], s["admissions"],
                         f"{s['harmful_admitted']} ({100 * (s['harmful_rate'] or 0):.2f}%; "
                         f"{s['harmful_at_design_drop']} ≥ 0.35)", s["useless_admitted"],
                         s["replays"], s["replays_per_gated_candidate"] or "–", s["replays_per_admission"] or "–",
                         s["failures_last4"], f"{100 * (s['repeat_share_last4'] or 0):.1f}%"])
    out = ["", f"## Blocks of {data['size']} seeds{title}", "",
           table(["policy", "seeds", "gated", "admitted", "harmful", "useless", "replays", "replays / gated",
                  "replays / admission", "failures, last 4 wk", "repeat share, last 4 wk"], rows), "",
           "### Targets per block (a target holds only if it holds in every block and pooled)", ""]
    body = [[t["target"], *[f"{v} {'✓' if m else '✗'}" for v, m in zip(t["blocks"], t["blocks_met"])],
             f"{t['pooled']} {'✓' if t['pooled_met'] else '✗'}", "yes" if t["met"] else "**no**"]
            for t in data["targets"]]
    out.append(table(["target", *heads, "pooled", "holds"], body, width=400))
    return out


def where_replays_go(summary: dict) -> list[str]:
    """The replaybook gate's fresh replays by purpose (rows) and by where each gate ended (columns)."""
    got = summary.get("replays_by_purpose")
    if not got:
        return []
    cols = [c for c in got["gates"] if c != "total"]
    total = sum(row["total"] for name, row in got.items() if name != "gates") or 1
    rows = [[name, *[row[c] for c in cols], row["total"], f"{100 * row['total'] / total:.0f}%"]
            for name, row in got.items() if name != "gates"]
    rows.append(["gate runs", *[got["gates"][c] for c in cols], got["gates"]["total"], ""])
    return ["", "## Where the replays go (replaybook, fresh replays)", "",
            table(["purpose", *cols, "total", "share"], rows)]


def markdown(data: dict) -> str:
    """The markdown of a noisy run's JSON (``as_json``, plus ``parameters.table`` and ``sensitivity``)."""
    par = data["parameters"]
    pct = lambda x: "–" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    lines = [f"# Loop benchmark, noisy preset ({report.SIM_NOISY})", "", f"**Seeds**: {par['seed_rule']}.",
             f"**Gate**: {par['gates'].get('replaybook', '')}", "", "## Per policy (sums over the seeds)", ""]
    agents = list(params.AGENTS)
    rows = []
    for name, p in data["policies"].items():
        s = p["summary"]
        rows.append([name, s["candidates_gated"], s["admissions"],
                     f"{s['harmful_admitted']} ({s['harmful_at_design_drop']} ≥ 0.35)", s["useless_admitted"],
                     s["replays"], s["replays_per_gated_candidate"] or "–", s["replays_per_admission"] or "–",
                     *[f"${s[f'usd_per_admission {a}']}" if s[f"usd_per_admission {a}"] is not None else "–"
                       for a in agents],
                     s["failures_last4"], pct(s["repeat_share_last4"])])
    lines.append(table(["policy", "candidates gated", "admissions", "harmful", "useless", "replays",
                        "replays / gated", "replays / admission", *[f"$ / admission, {a.split(' ')[0]}" for a in agents],
                        "failures, last 4 wk", "repeat share, last 4 wk"], rows))
    lines += where_replays_go(data["policies"].get("replaybook", {}).get("summary", {}))
    lines += ["", f"Ranking by last-4-week failures: {data['ranking']}", "", "## Targets (replaybook, at the gate named above)", ""]
    lines.append(table(["target", "value", "met"],
                       [[t["target"], t["value"], "yes" if t["met"] else "**no**"] for t in data["targets"]]))
    if data.get("blocks"):
        lines += blocks_markdown(data["blocks"])
    if data.get("sensitivity"):
        lines += ["", "## Sensitivity (each assumption ×0.5 and ×1.5, and the other variants)", ""]
        lines.append(table(["assumption", "×", "replaybook harmful (Wilson upper)", "harmful ≤ 1%", "replays / gated",
                            "replays / admission", "below single_run_fair", "repeat share ÷ oracle's",
                            "oracle repeat share", "seed gate's before-run refusals", "ranking (last-4-week failures)"],
                           [[x["name"], x["factor"] or "", f"{x.get('harmful', '–')} = {pct(x.get('harmful_rate'))} "
                             f"({pct(x.get('harmful_upper'))}; {x.get('harmful_big', '–')} ≥ 0.35)", "yes" if x.get("harm_met") else "**no**",
                             x.get("per_gated", "–"), x.get("per_admission", "–"), "yes" if x["below_fair"] else "**no**",
                             x.get("repeat_vs_oracle", "–"), pct(x.get("oracle_repeat_share")),
                             pct(x.get("seed_gate_before_refusals")), x["ranking"]] for x in data["sensitivity"]],
                           width=200))
    if data.get("frontier"):
        from loopbench import frontier

        fair = data["policies"].get("single_run_fair", {}).get("failures_last4_per_seed")
        lines += ["", *frontier.markdown(data["frontier"], fair)]
    if par.get("table"):
        lines += ["", "## Parameters and their sources", ""]
        lines.append(table(["parameter", "value", "kind", "source"],
                           [[x["name"], x["value"], x["kind"], x["source"]] for x in par["table"]], width=400))
    lines += ["", "## Repeats of the last 4 weeks, by cause", ""]
    causes = sorted({c for p in data["policies"].values() for c in p["figures"]["repeat_causes_last4"]})
    lines.append(table(["policy", "repeats", *causes],
                       [[n, sum(p["figures"]["repeat_causes_last4"].values()),
                         *[p["figures"]["repeat_causes_last4"].get(c, 0) for c in causes]]
                        for n, p in data["policies"].items()]))
    lines += ["", f"Elapsed: {par.get('elapsed_s')} s ({par.get('workers', 1)} worker(s)); load: {par.get('load', '')}"]
    return "\n".join(lines) + "\n"
