"""The figures: JSON (``--json``), a markdown table per policy, a comparison, targets and mermaid charts."""

from __future__ import annotations

from bot._util.markdown import table
from loopbench.run import POLICIES, Week

SEED_COST_PER_ADMISSION = 3.0
SIM = "SIMULATED model (scripted agent, analyst and distiller; not a real LLM)"
SIM_NOISY = "SIMULATED noisy agent (runs drawn from the stated noise model, gated by bot.gate.stats; not a real LLM)"


def week_json(w: Week) -> dict:
    return {"week": w.week, "tasks": w.tasks, "failures": w.failures, "repeats": w.repeats,
            "repeat_share": w.repeat_share, "harmful_admitted": w.harmful_in_playbook, "harmful_ever": w.harmful_ever,
            "playbook_size": w.playbook_size, "replays": w.replays, "model_calls": w.model_calls,
            "cost_usd": w.cost_usd, "cost_per_admission": w.cost_per_admission, "proposals": w.proposals,
            "admitted": w.admitted, "retired": w.retired, "rejections": dict(sorted(w.rejections.items())),
            "distill_refused": w.distill_refused, "unscored": w.unscored, "q": w.q,
            "task_replays": w.task_replays, "task_cost_usd": w.task_cost_usd,
            "useless_admitted": w.useless_admitted, "good_rejected": w.good_rejected,
            "repeat_causes": dict(sorted(w.repeat_causes.items())), "reproposals": w.reproposals,
            "escalated": w.escalated}


def week_from_json(data: dict) -> Week:
    """The inverse of ``week_json`` (for ``bench/loop.py --from-json``)."""
    from collections import Counter
    from dataclasses import fields

    names = {f.name for f in fields(Week)}
    week = Week(**{k: v for k, v in data.items() if k in names and k not in ("rejections", "repeat_causes")})
    week.repeat_causes = Counter(data.get("repeat_causes", {}))
    week.harmful_in_playbook = data["harmful_admitted"]
    week.rejections = Counter(data.get("rejections", {}))
    return week


def pooled_share(weeks: list[Week]) -> float:
    fails = sum(w.failures for w in weeks)
    return round(sum(w.repeats for w in weeks) / fails, 4) if fails else 0.0


def summary(weeks: list[Week], last: int = 4) -> dict:
    tail = weeks[-last:]
    rejections: dict[str, int] = {}
    for w in weeks:
        for k, v in w.rejections.items():
            rejections[k] = rejections.get(k, 0) + v
    proposals = sum(w.proposals for w in weeks)
    return {"failures": sum(w.failures for w in weeks), "repeats": sum(w.repeats for w in weeks),
            "repeat_share": pooled_share(weeks), "repeat_share_last4": pooled_share(tail),
            "failures_last4": sum(w.failures for w in tail), "harmful_ever": weeks[-1].harmful_ever if weeks else 0,
            "playbook_size": weeks[-1].playbook_size if weeks else 0, "proposals": proposals,
            "admitted": sum(w.admitted for w in weeks), "retired": sum(w.retired for w in weeks),
            "rejections": dict(sorted(rejections.items())),
            "not_discriminative_share": round(rejections.get("passes without the rule", 0) / proposals, 3)
            if proposals else 0.0,
            "replays": sum(w.replays for w in weeks), "model_calls": sum(w.model_calls for w in weeks),
            "cost_usd": round(sum(w.cost_usd for w in weeks), 4),
            "cost_per_admission": weeks[-1].cost_per_admission if weeks else None,
            "task_replays": sum(w.task_replays for w in weeks)}


def targets(results: dict[str, list[Week]]) -> list[dict]:
    out = []
    if "replaybook" in results:
        s = summary(results["replaybook"])
        out.append({"target": "replaybook: repeat share of the last four weeks below 6%",
                    "value": s["repeat_share_last4"], "met": s["repeat_share_last4"] < 0.06})
        out.append({"target": "replaybook: no harmful rule ever admitted", "value": s["harmful_ever"],
                    "met": s["harmful_ever"] == 0})
        cpa = s["cost_per_admission"]
        out.append({"target": f"replaybook: cost per admission reported, vs the seed's ${SEED_COST_PER_ADMISSION:.0f}",
                    "value": cpa, "met": cpa is not None})
    if "unvalidated" in results:
        u = summary(results["unvalidated"])
        out.append({"target": "unvalidated: admits at least one harmful rule", "value": u["harmful_ever"],
                    "met": u["harmful_ever"] >= 1})
        if "replaybook" in results:
            r = summary(results["replaybook"])
            out.append({"target": "unvalidated: more failures than the gate in the last four weeks",
                        "value": f"{u['failures_last4']} vs {r['failures_last4']}",
                        "met": u["failures_last4"] > r["failures_last4"]})
    if "none" in results:
        n = summary(results["none"])
        out.append({"target": "none: repeat share near the seed's 38%", "value": n["repeat_share"],
                    "met": abs(n["repeat_share"] - 0.38) <= 0.05})
    return out


def as_json(results: dict[str, list[Week]], parameters: dict) -> dict:
    return {"simulated": True, "model": SIM, "parameters": parameters,
            "policies": {name: {"weeks": [week_json(w) for w in weeks], "summary": summary(weeks)}
                         for name, weeks in results.items()},
            "targets": targets(results)}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _money(x: float | None) -> str:
    return "–" if x is None else f"${x:.3f}"


def markdown(results: dict[str, list[Week]], parameters: dict) -> str:
    lines = [f"# Loop benchmark ({SIM})", "", "## Parameters", ""]
    lines += [f"- **{k}**: {v}" for k, v in parameters.items()]
    lines += ["", "## Policies side by side", ""]
    names = [n for n in POLICIES if n in results]
    rows = []
    for name in names:
        s = summary(results[name])
        rows.append([name, s["failures"], _pct(s["repeat_share"]), _pct(s["repeat_share_last4"]), s["failures_last4"],
                     s["harmful_ever"], s["playbook_size"], s["proposals"], s["admitted"], s["retired"],
                     ", ".join(f"{k}: {v}" for k, v in s["rejections"].items()) or "–", s["replays"],
                     s["model_calls"], f"${s['cost_usd']:.2f}", _money(s["cost_per_admission"])])
    lines.append(table(["policy", "failures", "repeat share", "repeat share, last 4 weeks", "failures, last 4 weeks",
                        "harmful admitted (ever)", "playbook", "proposals", "admitted", "retired",
                        "rejections by reason", "gate replays", "model calls", "loop cost (simulated)",
                        "cost per admission"], rows))
    lines += ["", "## Targets", ""]
    lines.append(table(["target", "value", "met"],
                       [[t["target"], t["value"], "yes" if t["met"] else "**no**"] for t in targets(results)]))
    for name in names:
        lines += ["", f"## Per week: `{name}`", ""]
        lines.append(table(["week", "tasks", "failures", "repeats", "repeat share", "harmful in playbook", "playbook",
                            "q", "proposals", "admitted", "rejections", "replays", "model calls", "cost",
                            "cost per admission"],
                           [[w.week, w.tasks, w.failures, w.repeats, _pct(w.repeat_share), w.harmful_in_playbook,
                             w.playbook_size, w.q, w.proposals, w.admitted,
                             ", ".join(f"{k}: {v}" for k, v in sorted(w.rejections.items())) or "–", w.replays,
                             w.model_calls, f"${w.cost_usd:.3f}", _money(w.cost_per_admission)]
                            for w in results[name]]))
    lines += ["", *charts(results)]
    return "\n".join(lines) + "\n"


def _chart(title: str, y: str, results: dict[str, list[Week]], value, top: float | None = None) -> list[str]:
    names = [n for n in POLICIES if n in results] + [n for n in results if n not in POLICIES]
    weeks = max(len(v) for v in results.values())
    series = {n: [value(w) for w in results[n]] for n in names}
    high = top if top is not None else max(1, max(max(v) for v in series.values()) * 1.1)
    out = ["```mermaid", "xychart-beta", f'    title "{title}"',
           f"    x-axis \"week\" [{', '.join(str(i + 1) for i in range(weeks))}]",
           f'    y-axis "{y}" 0 --> {high:g}']
    out += [f"    line [{', '.join(f'{x:g}' for x in series[n])}]" for n in names]
    out += ["```", f"Lines, in order: {', '.join(names)}.", ""]
    return out


chart = _chart


def charts(results: dict[str, list[Week]]) -> list[str]:
    out = ["## Charts", ""]
    out += _chart("Repeat share of failures per week (%)", "%", results, lambda w: round(100 * w.repeat_share), 100)
    out += _chart("Failures per week", "failures", results, lambda w: w.failures)
    out += _chart("Harmful rules in the playbook", "rules", results, lambda w: w.harmful_in_playbook)
    out += _chart("Playbook size (admitted rules)", "rules", results, lambda w: w.playbook_size)
    return out
