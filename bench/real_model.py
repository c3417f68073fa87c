"""The loop on a real model, offline: the local model (``--model local``) on every bundled scenario.

    python bench/real_model.py run [--out FILE] [--trials 10] [--agent builtin] [--jobs 1] [--phases distill,trials,gate]
    python bench/real_model.py report [FILE ...]

``run`` is long (a replay of a 1.5B model on two CPU cores takes tens of seconds to minutes) and
resumable: every result is appended to ``--out`` (JSON lines) as it finishes, and a second ``run``
skips what the file already holds. Run it in the background (``nohup … &``); ``report`` prints the
markdown tables from whatever the file holds, with the number of trials actually run.

Phases, in this order so a partial run has some of each:
- ``distill``: ``distill`` on the bundled incidents with the local model; how many proposals pass
  ``rule validate`` (``Playbook.vet``), and their texts.
- ``trials`` (rounds 1-2): each bundled scenario without and with its rule, interleaved (round r
  replays every scenario both ways before round r+1), builtin agent.
- ``gate``: the gate's decision on each bundled rule at the product's defaults (config defaults:
  ``gate.own_test: auto``, the suite's baseline), one trial at a time; the replays it took.
- ``trials`` (rounds 3..N).

Every record carries the load average when it finished. Each scenario's own ``budget.max_turns`` stands;
``--max-turns`` can cap it (stated in the report); no check is changed. ``--agent mini-swe-agent`` measures that
agent on the same scenarios; ``--jobs N`` runs N trials of a round at once (the server decodes them as sequences of
one context when it has them). Scenario ids include the small-model ones (``small-model/version-bump``).
The harness's share of a replay is its wall time less the model's answers (gateway-measured) and
the agent's own commands (the kernel trace): sandbox, trace, gateway and the checks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _common
import yaml

from bot import config
from bot._util import bundled
from bot.errors import BadInput
from bot.gate import stats
from bot.incident.store import IncidentStore
from bot.model import served
from bot.replay import engine
from bot.replay.sandbox.workspace import Sandbox
from bot.replay.trace.events import RunDir, read_trace
from bot.scenario import spec as sc
from bot.settings import Environment

DEFAULT_OUT = _common.HERE / "results" / "real_model.jsonl"
SCENARIOS = tuple(sorted(str(p.parent.relative_to(bundled.scenarios_dir()))
                         for pattern in ("*/scenario.yaml", "small-model/*/scenario.yaml")
                         for p in bundled.scenarios_dir().glob(pattern)))


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut by a kill: the run re-does it
            continue
    return out


def append(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({**record, "load1": load1(), "at": time.strftime("%H:%M:%S", time.gmtime())}) + "\n")


def _server_counters(endpoint: served.Endpoint) -> dict:
    stats = endpoint.stats() if endpoint.stats else None
    if stats is None:
        return {}
    data = stats.as_dict() if hasattr(stats, "as_dict") else dict(stats)
    return {k: data.get(k, 0) for k in ("cpu_s", "prompt_s", "gen_s", "input_tokens", "output_tokens")}


def one_trial(endpoint: served.Endpoint, scenario_id: str, arm: str, trial: int, max_turns: int | None,
              runs: Path, agent: str = "builtin") -> dict:
    loaded = sc.load(bundled.scenarios_dir() / scenario_id)
    text = _common.playbook_text(scenario_id, with_rule=arm == "with")
    opts = engine.ReplayOptions(model=served.LOCAL, api_key=endpoint.api_key, upstream_url=endpoint.base_url,
                                model_label=endpoint.label, runs_dir=runs, max_turns=max_turns, seed=trial,
                                keep_runs=100_000, agent=agent)
    before = _server_counters(endpoint)
    with _common.timed_method(Sandbox, "run") as calls:
        started = time.perf_counter()
        result = engine.run_trial(loaded, text, opts, trial)
        wall = time.perf_counter() - started
    turns = _turns(result)
    after = _server_counters(endpoint)
    commands = _common.command_seconds(read_trace(RunDir(Path(result.run_dir)).trace)) if result.run_dir else 0.0
    checks = calls.seconds(record=False)
    return {"phase": "trial", "scenario": scenario_id, "arm": arm, "trial": trial, "verdict": result.verdict,
            "status": result.agent_status, "reason": result.reason[:300], "model_calls": result.model_calls,
            "input_tokens": result.input_tokens, "output_tokens": result.output_tokens, "cost_usd": result.cost_usd,
            "wall_s": round(wall, 3), "model_s": result.model_s, "commands_s": round(commands, 3),
            "checks_s": round(checks, 3), "harness_s": round(wall - result.model_s - commands, 3),
            "max_turns": max_turns or loaded.scenario.budget.max_turns, "capped": max_turns is not None,
            "agent": agent, "turns": turns, "label": endpoint.label,
            "server": {k: round(after.get(k, 0) - before.get(k, 0), 3) for k in after}}


def _turns(result) -> int:
    """Model calls the agent made (the gateway's count)."""
    return int(result.model_calls)


def trials_phase(endpoint, out: Path, rounds: range, max_turns: int | None, runs: Path, only: tuple[str, ...],
                 agent: str = "builtin", jobs: int = 1) -> None:
    from concurrent.futures import ThreadPoolExecutor

    done = {(r["scenario"], r["arm"], r["trial"]) for r in records(out)
            if r.get("phase") == "trial" and r.get("agent", "builtin") == agent}
    lock = __import__("threading").Lock()

    def one(job: tuple[int, str, str]) -> None:
        trial, scenario_id, arm = job
        rec = one_trial(endpoint, scenario_id, arm, trial, max_turns, runs, agent)
        with lock:
            append(out, rec)
        _common.progress(f"trial {trial} {agent} {scenario_id} {arm}: {rec['verdict']} ({rec['status']}) "
                         f"{rec['wall_s']:.0f}s, {rec['model_calls']} calls, load {load1()}")

    for trial in rounds:
        todo = [(trial, s, arm) for s in only for arm in ("without", "with") if (s, arm, trial) not in done]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, todo))


def _workspace() -> Path:
    """A repository with the bundled scenarios and their incidents (``incidents/``), at the config's defaults."""
    root = Path(tempfile.mkdtemp(prefix="rb-real-model-"))
    shutil.copytree(bundled.scenarios_dir(), root / "scenarios", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "incidents").mkdir()
    for incident in sorted((root / "scenarios").glob("*/incidents/*.yaml")):
        shutil.copy2(incident, root / "incidents" / incident.name)
    config_text = "# bench/real_model.py: the product's defaults\npaths: {incidents: incidents}\n"
    (root / ".replaybook.yml").write_text(config_text, encoding="utf-8")
    return root


def gate_phase(endpoint, out: Path, max_turns: int | None, only: tuple[str, ...], rule_text: str = "",
               budget: int | None = None, jobs: int = 1) -> None:
    """Gate each scenario's bundled rule, or with ``rule_text`` a rule of that text replayed on the scenario (a
    wrong rule, say: issue 55 item 5), the gate deciding from the real model's replays."""
    from bot.gate import decision as gate_mod

    done = {r["scenario"] for r in records(out) if r.get("phase") == "gate" and r.get("rule_text", "") == rule_text}
    root = _workspace()
    settings = config.load(root)
    book = config.playbook(settings)
    replay = engine.ReplayOptions(model=served.LOCAL, api_key=endpoint.api_key, upstream_url=endpoint.base_url,
                                  model_label=endpoint.label, runs_dir=root / ".replaybook" / "traces",
                                  max_turns=max_turns)
    opts = gate_mod.GateOptions(replay=replay, test=stats.own_test(settings.config.gate.own_test), jobs=jobs,
                                cache_dir=root / ".replaybook" / "cache", budget_replays=budget)
    for scenario_id in only:
        if scenario_id in done:
            continue
        rule_file = root / "scenarios" / scenario_id / "rule.yaml"
        if rule_text:  # the same rule record with another text (and no citations to vouch for it)
            record = yaml.safe_load(rule_file.read_text(encoding="utf-8"))
            record.update({"id": "rule-0900", "rule": rule_text, "cites": [], "provisional": True})
            rule_file = root / "playbook" / "proposed" / "rule-0900.yaml"
            rule_file.parent.mkdir(parents=True, exist_ok=True)
            rule_file.write_text(yaml.safe_dump(record, sort_keys=False), encoding="utf-8")
        started = time.perf_counter()
        result = gate_mod.run_gate(book, rule_file, root / "scenarios", opts,
                                   lambda msg, s=scenario_id: _common.progress(f"gate {s}: {msg}"))
        side = (lambda x: None if x is None else {"passes": x.passes, "n": x.n, "unscored": x.unscored})
        append(out, {"phase": "gate", "scenario": scenario_id, "rule": result.rule_id, "decision": result.decision,
                     "reason": result.reason[:400], "replays": result.replays, "model_calls": result.model_calls,
                     "tokens": result.tokens, "seconds": round(time.perf_counter() - started, 1),
                     "before": side(result.before), "after": side(result.after), "own_test": result.own_test,
                     "max_turns": max_turns, "label": endpoint.label, "rule_text": rule_text, "budget": budget,
                     "jobs": jobs})
        _common.progress(f"gate {scenario_id}: {result.decision}: {result.reason[:200]}")


def distill_phase(out: Path) -> None:
    from bot.distill import plan as distill_mod

    if any(r.get("phase") == "distill" for r in records(out)):
        return
    root = _workspace()
    shutil.rmtree(root / "scenarios")  # distill proposes from incidents alone; no rule of ours to copy
    settings = config.load(root)
    llm = config.llm(Environment(), served.LOCAL, timeout_s=900, max_retries=0)
    llm.max_tokens = 8192
    started = time.perf_counter()
    report = distill_mod.distill(settings, llm)
    seconds = time.perf_counter() - started
    book = config.playbook(settings, incidents=IncidentStore(settings.path("incidents")))  # as `rule validate`
    proposals = []
    for p in report.proposals:
        problems: list[str] = []
        try:  # what `replaybook rule validate` runs
            book.vet(root / p.path if p.path else Path("(not written)"))
        except BadInput as exc:
            problems.append(exc.render())
        proposals.append({"id": p.id, "rule": p.rule, "cites": list(p.cites), "scenario": p.scenario,
                          "valid": not problems, "problems": problems[:5]})
    append(out, {"phase": "distill", "groups": len(report.groups), "asked": report.asked, "failed": report.failed,
                 "proposals": proposals, "refusals": [{"group": r.group, "what": r.what, "reason": r.reason[:300]}
                                                      for r in report.refusals],
                 "calls": llm.usage.calls, "input_tokens": llm.usage.input_tokens,
                 "output_tokens": llm.usage.output_tokens, "seconds": round(seconds, 1), "label": llm.label})
    _common.progress(f"distill: {len(proposals)} proposal(s), {sum(p['valid'] for p in proposals)} valid, "
                     f"{len(report.refusals)} refusal(s), {seconds:.0f}s")


def run(args) -> None:
    out = Path(args.out)
    only = tuple(args.scenarios.split(",")) if args.scenarios else SCENARIOS
    phases = set(args.phases.split(","))
    runs = Path(args.runs or tempfile.mkdtemp(prefix="rb-real-model-runs-"))
    first = args.first_seed
    endpoint = config.local_model()
    _common.progress(f"{endpoint.label} at {endpoint.base_url}; {_common.machine()}")
    if "distill" in phases:
        distill_phase(out)
    if "trials" in phases:
        trials_phase(endpoint, out, range(first, first + min(2, args.trials)), args.max_turns, runs, only, args.agent,
                     args.jobs)
    if "gate" in phases:
        gate_phase(endpoint, out, args.gate_max_turns, only, args.gate_rule, args.gate_budget, args.jobs)
    if "trials" in phases:
        trials_phase(endpoint, out, range(first + 2, first + args.trials), args.max_turns, runs, only, args.agent,
                     args.jobs)
    print(report(out))


def _median(values: list[float]) -> str:
    return "–" if not values else f"{_common.median(values):.1f}"


def _rate(rows: list[dict]) -> str:
    scored = [r for r in rows if r["verdict"] != "unscored"]
    passes = sum(r["verdict"] == "passed" for r in scored)
    if not scored:
        return f"– (0 scored, {len(rows)} unscored)"
    low, high = stats.wilson(passes, len(scored))
    unscored = len(rows) - len(scored)
    return (f"{passes}/{len(scored)} = {passes / len(scored):.0%} [{low:.0%}, {high:.0%}]"
            + (f" (+{unscored} unscored)" if unscored else ""))


def report(*outs: Path) -> str:
    rows = [r for out in outs for r in records(out)]
    trials = [r for r in rows if r.get("phase") == "trial"]
    names = ", ".join(f"`{o.name}`" for o in outs)
    loads = [r["load1"] for r in rows]
    lines = [f"Results from {names} ({len(trials)} replays; load average of each record: "
             f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f}).", ""]
    if trials:
        capped = sorted({r["max_turns"] for r in trials if r.get("capped", True)})
        lines += [f"Model: {trials[0]['label']}; max_turns "
                  + (f"capped at {', '.join(map(str, capped))}." if capped else "each scenario's own budget.max_turns."), ""]
        table_rows = []
        for agent, scenario_id in sorted({(r.get("agent", "builtin"), r["scenario"]) for r in trials}):
            mine = [r for r in trials if r["scenario"] == scenario_id and r.get("agent", "builtin") == agent]
            without = [r for r in mine if r["arm"] == "without"]
            with_rule = [r for r in mine if r["arm"] == "with"]
            shares = [r["harness_s"] / r["wall_s"] for r in mine if r["wall_s"] > 0]
            table_rows.append([f"{scenario_id} ({agent})", _rate(without), _rate(with_rule), _fisher(without, with_rule),
                               _median([r["model_calls"] for r in mine]),
                               _median([r["input_tokens"] + r["output_tokens"] for r in mine]),
                               _median([r["wall_s"] for r in mine]),
                               f"{_common.median(shares):.1%}" if shares else "–",
                               _median([r["load1"] for r in mine])])
        lines.append(_common.table(["scenario (agent)", "passed without rule [95% Wilson]", "passed with rule [95% Wilson]",
                                    "one-sided Fisher p (with > without)",
                                    "turns (median)", "tokens (median)", "s / replay (median)",
                                    "harness share (median)", "load (median)"], table_rows))
        shares = [r["harness_s"] / r["wall_s"] for r in trials if r["wall_s"] > 0]
        checks = [r["checks_s"] / r["wall_s"] for r in trials if r["wall_s"] > 0]
        statuses: dict[str, int] = {}
        for r in trials:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        lines += ["", f"Harness share of a replay's wall time, all replays: median {_common.median(shares):.1%} "
                      f"(of which the checks' commands {_common.median(checks):.1%}); "
                      f"agent end states: {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}."]
    if trials:
        lines += ["", *_gate_on_pairs([r for r in trials if r.get("agent", "builtin") == "builtin"])]
    gates = [r for r in rows if r.get("phase") == "gate"]
    if gates:
        lines += ["", _common.table(["rule (scenario)", "decision", "replays", "model calls", "tokens", "minutes",
                                     "own scenario without / with", "reason"],
                                    [[f"{g['rule']} ({g['scenario']})", g["decision"], g["replays"], g["model_calls"],
                                      g["tokens"], f"{g['seconds'] / 60:.1f}",
                                      " / ".join("–" if s is None else f"{s['passes']}/{s['n']}"
                                                 for s in (g["before"], g["after"])),
                                      g["reason"][:160].replace("|", "/")] for g in gates])]
    for d in (r for r in rows if r.get("phase") == "distill"):
        valid = sum(p["valid"] for p in d["proposals"])
        lines += ["", f"Distill on the bundled incidents: {d['groups']} group(s), {d['asked']} asked, "
                      f"{len(d['proposals'])} proposal(s), {valid} pass `rule validate`, {len(d['refusals'])} "
                      f"refusal(s); {d['calls']} model calls, {d['input_tokens']} + {d['output_tokens']} tokens, "
                      f"{d['seconds'] / 60:.1f} min, load {d['load1']}."]
        if d["proposals"]:
            lines += ["", _common.table(["id", "valid", "rule", "problems"],
                                        [[p["id"], "yes" if p["valid"] else "no", p["rule"].replace("|", "/"),
                                          "; ".join(p["problems"])[:200].replace("|", "/")] for p in d["proposals"]])]
        if d["refusals"]:
            lines += ["", _common.table(["group", "what", "reason"],
                                        [[x["group"], x["what"], x["reason"][:200].replace("|", "/")]
                                         for x in d["refusals"]])]
    return "\n".join(lines) + "\n"


def _fisher(without: list[dict], with_rule: list[dict]) -> str:
    """One-sided Fisher exact p that the rule raises the pass rate (scored trials only)."""
    from math import comb

    a = [r for r in without if r["verdict"] != "unscored"]
    b = [r for r in with_rule if r["verdict"] != "unscored"]
    if not a or not b:
        return "–"
    pa, pb = sum(r["verdict"] == "passed" for r in a), sum(r["verdict"] == "passed" for r in b)
    total = pa + pb
    denominator = comb(len(a) + len(b), total)
    p = sum(comb(len(b), k) * comb(len(a), total - k) for k in range(pb, min(total, len(b)) + 1)
            if total - k <= len(a)) / denominator
    return f"{p:.3f}"


def _gate_on_pairs(trials: list[dict]) -> list[str]:
    """The gate's own-scenario test at the product's defaults (``gate.own_test: auto``: the paired test for a real
    model) walked over the recorded trials, pair i = trial i without and with the rule, in the order they ran: where
    it stops and what it decides on these very outcomes; then, at the measured pass rates, its exact chance to
    admit and the replays it takes on average (``stats.paired_characteristics``). A live gate draws fresh trials;
    this is the same decision rule read on outcomes already paid for."""
    test = stats.own_test("auto").pick(deterministic=False)
    rows = []
    for scenario_id in sorted({r["scenario"] for r in trials}):
        arms = {(r["arm"], r["trial"]): r["verdict"] for r in trials if r["scenario"] == scenario_id}
        wins = losses = pairs = 0
        state = "continue"
        for trial in sorted({t for _, t in arms}):
            before, after = arms.get(("without", trial)), arms.get(("with", trial))
            if before in (None, "unscored") or after in (None, "unscored"):
                continue  # the gate re-runs an unscored trial; a pair needs both sides scored
            pairs += 1
            wins += before == "failed" and after == "passed"
            losses += before == "passed" and after == "failed"
            state = test.decide(wins, losses, pairs)
            if state != "continue":
                break
        scored = {arm: [v for (a, _), v in arms.items() if a == arm and v != "unscored"] for arm in ("without", "with")}
        rate = {arm: (sum(v == "passed" for v in vs) + 0.0) / len(vs) if vs else 0.0 for arm, vs in scored.items()}
        chance = stats.paired_characteristics(test, rate["without"], rate["with"])
        verdict = {"pass": "admit", "fail": "refuse"}.get(state, f"undecided (up to {test.max_pairs} pairs)")
        rows.append([scenario_id, f"{pairs}", f"{wins} / {losses}", verdict,
                     f"{rate['without']:.0%} -> {rate['with']:.0%}", f"{chance.p_admit:.1%}",
                     f"{chance.expected_runs:.0f}"])
    return [f"The gate's own-scenario test at the defaults ({test.describe()}), walked over the recorded pairs, "
            "and its exact characteristics at the measured rates:", "",
            _common.table(["scenario", "pairs read", "rule wins / losses", "decision on these outcomes",
                           "measured pass rate without -> with", "P(admit) at these rates",
                           "expected replays (own scenario)"], rows)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("--out", default=str(DEFAULT_OUT))
    go.add_argument("--trials", type=int, default=10, help="trials per scenario and arm")
    go.add_argument("--max-turns", type=int, default=None,
                    help="cap on each scenario's budget.max_turns (default: none, the scenario's own budget)")
    go.add_argument("--agent", default="builtin", help="builtin or mini-swe-agent")
    go.add_argument("--jobs", type=int, default=1, help="trials of a round run at once")
    go.add_argument("--first-seed", type=int, default=0,
                    help="trial i runs with seed first-seed + i: choose scenarios on one set of seeds, report another")
    go.add_argument("--gate-max-turns", type=int, default=None,
                    help="cap for the gate's replays (default: none, the scenarios' own budgets)")
    go.add_argument("--phases", default="distill,trials,gate")
    go.add_argument("--gate-rule", default="", help="gate a rule of this text on each scenario instead of its own")
    go.add_argument("--gate-budget", type=int, default=None, help="the gate's budget in fresh replays")
    go.add_argument("--scenarios", default="", help="comma-separated ids (default: every bundled scenario)")
    go.add_argument("--runs", default="", help="where run folders go (default: a temporary folder)")
    show = sub.add_parser("report")
    show.add_argument("files", nargs="*", default=[str(DEFAULT_OUT)], help="JSON-lines files `run` wrote")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        print(report(*map(Path, args.files)))


if __name__ == "__main__":
    sys.exit(main())
