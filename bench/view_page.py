"""The gate page's render time and weight (issue 56): a gate of N scenarios x T trials a side, made from a real one.

A real gate (the simulated model) gives the run folders; the bench makes a suite of N scenarios by copying the
real ones under new ids (so each trial's checks are decided again from its folder, as for a real gate), and a
gate JSON whose every scenario has T trials without and T with the rule, each pointing at one of the real run
folders of its kind. It then times ``bot.view.page`` build + render (the median of ``--rounds``) and weighs the
page. Without --gate-json it first runs that real gate itself (about a minute).

    python bench/view_page.py                                  # 6 x 20 and 30 x 20
    python bench/view_page.py --gate-json G --runs-dir R --suite S --scenarios 6 --trials 20 --out DIR
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bot._util.credentials import Redactor
from bot.view import page as page_mod

REPO = Path(__file__).resolve().parents[1]


def real_gate(work: Path) -> tuple[Path, Path, Path]:
    """`replaybook gate` on monorepo-test-cwd's rule, targeted-tests beside it: (gate JSON, runs, suite)."""
    for sid in ("monorepo-test-cwd", "targeted-tests"):
        shutil.copytree(REPO / "scenarios" / sid, work / "scenarios" / sid)
    shutil.copytree(REPO / "scenarios" / "monorepo-test-cwd" / "incidents", work / "incidents")
    rule = work / "playbook" / "proposed" / "rule-0001.yaml"
    rule.parent.mkdir(parents=True)
    shutil.copy(REPO / "scenarios" / "monorepo-test-cwd" / "rule.yaml", rule)
    out = work / "gate.json"
    with out.open("w") as f:
        subprocess.run([sys.executable, "-m", "bot", "--root", str(work), "gate", str(rule), "--json", "--trials", "3"],
                       stdout=f, cwd=work, check=False)
    return out, work / ".replaybook" / "traces", work / "scenarios"


def synthesise(gate_json: Path, suite: Path, scenarios: int, trials: int, work: Path) -> tuple[Path, Path]:
    """A gate JSON of ``scenarios`` suite scenarios x ``trials`` a side, and the suite it reads checks from."""
    gate = json.loads(gate_json.read_text(encoding="utf-8"))
    sides = [s for s in [gate.get("before"), gate.get("after")] + [x for e in gate["suite"]
             for x in (e.get("baseline"), e.get("with_rule"))] if s and s["trials"]]
    pool = {v: [(s["scenario"], t) for s in sides for t in s["trials"] if t["verdict"] == v] for v in ("passed", "failed")}
    out_suite = work / "suite"
    entries = []
    for i in range(scenarios):
        verdict_without, verdict_with = ("failed", "passed") if i % 2 else ("passed", "passed")
        source, _ = (pool[verdict_without] or pool["passed"])[0]
        sid = f"{source}-{i}"
        folder = out_suite / sid
        shutil.copytree(suite / source, folder)
        spec = yaml.safe_load((folder / "scenario.yaml").read_text(encoding="utf-8"))
        spec["id"] = sid
        (folder / "scenario.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        entries.append({"scenario": sid, "task_type": spec.get("task_type"), "judged": True, "regressed": False,
                        "broken": False, "note": "no regression",
                        "baseline": _side(sid, pool, verdict_without, trials, source, False),
                        "with_rule": _side(sid, pool, verdict_with, trials, source, True)})
    gate = copy.deepcopy(gate)
    gate["suite"] = entries
    out = work / "gate.json"
    out.write_text(json.dumps(gate), encoding="utf-8")
    return out, out_suite


def _side(sid: str, pool: dict, verdict: str, trials: int, source: str, with_rule: bool) -> dict:
    runs = [t for s, t in pool[verdict] if s == source] or [t for _, t in pool[verdict]] or pool["passed"]
    made = [{**runs[n % len(runs)], "trial": n, "delivered": True if with_rule else None} for n in range(trials)]
    passed = sum(t["verdict"] == "passed" for t in made)
    return {"scenario": sid, "passed": passed, "scored": trials, "unscored": 0, "not_delivered": 0,
            "outcome": "pass", "interval95": [0.0, 1.0], "trials": made}


def measure(gate_json: Path, runs: Path, suite: Path, scenarios: int, trials: int, rounds: int,
            out: Path) -> tuple[float, float, int]:
    """(median seconds to build and render, its median CPU seconds, bytes of the page)."""
    with tempfile.TemporaryDirectory(prefix="view-bench-") as tmp:
        synthetic, synthetic_suite = synthesise(gate_json, suite, scenarios, trials, Path(tmp))
        redactor = Redactor(["a-secret-the-bench-plants-nowhere"])
        times, cpu = [], []
        for _ in range(rounds):
            start, start_cpu = time.perf_counter(), time.process_time()
            gate = page_mod.load_gate(synthetic, redactor)
            text = page_mod.render(page_mod.build(gate, runs, synthetic_suite, redactor), redactor)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        out.mkdir(parents=True, exist_ok=True)
        (out / "index.html").write_text(text, encoding="utf-8")
        return statistics.median(times), statistics.median(cpu), len(text.encode("utf-8"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gate-json", type=Path)
    ap.add_argument("--runs-dir", type=Path)
    ap.add_argument("--suite", type=Path)
    ap.add_argument("--scenarios", type=int, action="append", help="repeatable (default: 6 and 30)")
    ap.add_argument("--trials", type=int, default=20, help="trials a side per scenario")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "replaybook-view-bench")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="view-bench-gate-"))
    if args.gate_json is None:
        print("running a real gate (simulated model) for its run folders …", file=sys.stderr)
        args.gate_json, args.runs_dir, args.suite = real_gate(work)
    print("| suite scenarios x trials a side | trials | build + render, median wall (s) | CPU (s) | page (MB) |")
    print("|---|---|---|---|---|")
    for n in args.scenarios or [6, 30]:
        seconds, cpu, size = measure(args.gate_json, args.runs_dir, args.suite, n, args.trials, args.rounds,
                                args.out / f"{n}x{args.trials}")
        print(f"| {n} x {args.trials} | {2 * n * args.trials} | {seconds:.2f} | {cpu:.2f} | {size / 1e6:.2f} |", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
