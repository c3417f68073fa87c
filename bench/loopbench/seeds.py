"""Several seeds: weeks summed over seeds, means and ranges, and the noisy preset's report and targets."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields

from bot._util.markdown import table
from loopbench import report
from loopbench.run import Week

ADDED = [f.name for f in fields(Week)
         if f.name not in ("week", "rejections", "repeat_causes", "q", "cost_per_admission")]
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
        w.q = round(sum(x.q for x in weeks) / len(weeks), 4)
        w.cost_usd, w.task_cost_usd = round(w.cost_usd, 6), round(w.task_cost_usd, 6)
        cost, admitted = cost + w.cost_usd, admitted + w.admitted
        w.cost_per_admission = round(cost / admitted, 4) if admitted else None
        out.append(w)
    return out


def figures(weeks: list[Week]) -> dict:
    s = report.summary(weeks)
    s["useless_admitted"] = weeks[-1].useless_admitted if weeks else 0
    s["good_rejected"] = sum(w.good_rejected for w in weeks)
    s["bad_admitted"] = s["harmful_ever"] + s["useless_admitted"]
    s["repeat_causes_last4"] = dict(sum((w.repeat_causes for w in weeks[-4:]), Counter()).most_common())
    s["reproposals"] = sum(w.reproposals for w in weeks)
    s["escalated"] = sum(w.escalated for w in weeks)
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


def extra_cost(s: dict, ref: dict) -> float | None:
    """Extra loop cost per bad (harmful or useless) admission avoided, against a reference policy."""
    avoided = ref["bad_admitted"] - s["bad_admitted"]
    return round((s["cost_usd"] - ref["cost_usd"]) / avoided, 4) if avoided > 0 else None


def as_json(runs: dict[str, list[list[Week]]], parameters: dict, seeds: list[int]) -> dict:
    policies = {}
    for name, per_seed in runs.items():
        weeks = summed(per_seed)
        policies[name] = {"weeks": [report.week_json(w) for w in weeks], "summary": figures(weeks),
                          "spread": spread(per_seed),
                          "seeds": {str(seed): [report.week_json(w) for w in ws] for seed, ws in zip(seeds, per_seed)}}
    return {"simulated": True, "model": report.SIM_NOISY, "parameters": parameters, "policies": policies,
            "targets": targets({n: figures(summed(r)) for n, r in runs.items()}, parameters.get("floor"))}


def targets(s: dict[str, dict], floor: dict | None = None) -> list[dict]:
    """The issue's targets for the noisy preset, over the seeds summed (``floor``: the oracle loop's figures)."""
    out = []
    r, one, unv = s.get("replaybook"), s.get("single_run"), s.get("unvalidated")
    if r and one:
        out.append({"target": "replaybook admits fewer harmful + useless rules than single_run",
                    "value": f"{r['bad_admitted']} vs {one['bad_admitted']}", "met": r["bad_admitted"] < one["bad_admitted"]})
        out.append({"target": "replaybook: failures of the last 4 weeks at most single_run's",
                    "value": f"{r['failures_last4']} vs {one['failures_last4']}",
                    "met": r["failures_last4"] <= one["failures_last4"]})
    if r and unv:
        out.append({"target": "replaybook: failures of the last 4 weeks fewer than unvalidated's",
                    "value": f"{r['failures_last4']} vs {unv['failures_last4']}",
                    "met": r["failures_last4"] < unv["failures_last4"]})
    if r:
        out.append({"target": "replaybook admits 0 harmful rules", "value": r["harmful_ever"],
                    "met": r["harmful_ever"] == 0})
        value = r["repeat_share_last4"]
        if floor:
            value = (f"{value} (an oracle loop's floor: {floor['drawn_effect']['repeat_share_last4']}; with every "
                     f"rule perfect: {floor['every_rule_perfect']['repeat_share_last4']})")
        out.append({"target": "replaybook: repeat share of the last 4 weeks below 10%",
                    "value": value, "met": r["repeat_share_last4"] < 0.10})
    return out


def _range(sp: dict, key: str, fmt) -> str:
    x = sp.get(key)
    return "–" if x is None else f"{fmt(x['mean'])} ({fmt(x['min'])}–{fmt(x['max'])})"


def markdown(runs: dict[str, list[list[Week]]], parameters: dict, seeds: list[int]) -> str:
    data = as_json(runs, parameters, seeds)
    pct, num, usd = (lambda x: f"{100 * x:.0f}%"), (lambda x: f"{x:g}"), (lambda x: f"${x:.2f}")
    lines = [f"# Loop benchmark, noisy preset ({report.SIM_NOISY})", "", f"Seeds: {', '.join(map(str, seeds))}. "
             "Counts are summed over the seeds; mean (min–max) per seed in the second table.", "", "## Parameters", ""]
    lines += [f"- **{k}**: {v}" for k, v in parameters.items()]
    lines += ["", "## Policies side by side (sums over the seeds)", ""]
    summaries = {n: p["summary"] for n, p in data["policies"].items()}
    rows = []
    for name, s in summaries.items():
        per_adm = s["cost_usd"] / s["admitted"] if s["admitted"] else None
        vs = [extra_cost(s, summaries[ref]) if ref in summaries and name not in ("none", "unvalidated", ref) else None
              for ref in ("unvalidated", "single_run")]
        rows.append([name, s["failures"], s["failures_last4"], pct(s["repeat_share"]), pct(s["repeat_share_last4"]),
                     s["harmful_ever"], s["useless_admitted"], s["good_rejected"], s["admitted"], s["playbook_size"],
                     ", ".join(f"{k}: {v}" for k, v in s["rejections"].items()) or "–", s["replays"],
                     usd(s["cost_usd"]), "–" if per_adm is None else usd(per_adm),
                     *["–" if v is None else usd(v) for v in vs]])
    lines.append(table(["policy", "failures", "failures, last 4 weeks", "repeat share", "repeat share, last 4 weeks",
                        "harmful admitted", "useless admitted", "good rejected", "admitted", "playbook (end)",
                        "rejections", "gate replays", "loop cost (simulated)", "cost per admission",
                        "extra cost per bad admission avoided vs unvalidated", "… vs single_run"], rows))
    lines += ["", "## Mean (min–max) per seed", ""]
    lines.append(table(["policy", "failures", "last 4 weeks", "repeat share, last 4", "harmful", "useless",
                        "good rejected", "playbook", "replays", "cost"],
                       [[n, _range(p["spread"], "failures", num), _range(p["spread"], "failures_last4", num),
                         _range(p["spread"], "repeat_share_last4", pct), _range(p["spread"], "harmful_ever", num),
                         _range(p["spread"], "useless_admitted", num), _range(p["spread"], "good_rejected", num),
                         _range(p["spread"], "playbook_size", num), _range(p["spread"], "replays", num),
                         _range(p["spread"], "cost_usd", usd)] for n, p in data["policies"].items()]))
    lines += ["", "## Learning: re-proposals (with the refusal's reason) and escalations of ignored rules", ""]
    lines.append(table(["policy", "proposals", "of them re-proposals", "admitted", "ignored rules escalated"],
                       [[n, s["proposals"], s["reproposals"], s["admitted"], s["escalated"]]
                        for n, s in summaries.items()]))
    lines += ["", "## Repeats of the last 4 weeks, by cause", ""]
    causes = sorted({c for s in summaries.values() for c in s["repeat_causes_last4"]})
    lines.append(table(["policy", "repeats", *causes],
                       [[n, sum(s["repeat_causes_last4"].values()), *[s["repeat_causes_last4"].get(c, 0) for c in causes]]
                        for n, s in summaries.items()]))
    lines += ["", "## Targets", ""]
    lines.append(table(["target", "value", "met"],
                       [[t["target"], t["value"], "yes" if t["met"] else "**no**"] for t in data["targets"]]))
    weekly = {n: summed(r) for n, r in runs.items()}
    lines += ["", "## Charts (summed over the seeds)", ""]
    lines += report.chart("Repeat share of failures per week (%)", "%", weekly, lambda w: round(100 * w.repeat_share), 100)
    lines += report.chart("Playbook size (admitted rules, summed over seeds)", "rules", weekly, lambda w: w.playbook_size)
    lines += report.chart("Harmful + useless rules admitted (cumulative)", "rules", weekly,
                          lambda w: w.harmful_ever + w.useless_admitted)
    return "\n".join(lines) + "\n"
