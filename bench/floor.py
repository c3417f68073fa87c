"""Replays against the floor (#17): per sample, serial and 8 at once, before and after, side by side.

The workload is issue #17's: a 10-file fixture (bench/scenarios/floor), the
simulated model making three bash tool calls (``ls``, ``cat file_0.txt``,
``python3 -c 'print(1)' | tee result.txt``), then a ``succeeds`` check that
result.txt holds 1, with the bwrap sandbox on. The floor is the same work in
plain bash: copy the fixture, ``git init/add/commit``, three ``bash -c``,
the check, remove. The isolated floor is the same work inside one bwrap per sample
(every namespace a trial's sandbox unshares, a private /tmp, nothing of the host
writable): what one sandbox per trial cannot go below.

"Before" is another checkout of the code (default ``../wt-17-before``, made
with ``git worktree add --detach ../wt-17-before 5e38796``), run with this
venv's packages and its own ``bot`` (``PYTHONPATH``). Every measurement runs
in a fresh process (bench/_floor_worker.py), and the rounds interleave floor,
before and after so machine noise hits each alike; medians over rounds.
``python3`` is a minimal venv's for all of them, so an interpreter's
site-packages start-up does not swamp the rest.

Two more sides, in the same rounds: *untraced*, this copy with the trial's
sandbox started without strace around it (the kernel trace's share of a
sample is 1 − untraced/after), and with ``--with-inspect`` inspect_ai 0.3.285's
``local`` sandbox on the same three calls (bench/inspect_compare.py).

CPU per sample counts every process a measurement starts, the sandboxed ones
included (bench/_cpu.py: a cgroup per measurement; ``RUSAGE_CHILDREN`` would miss
everything inside bwrap's pid namespace).

Also: one replay as a whole process (``python -m bot replay run``, wall
and peak RSS), ``--help``, and a gate on an 8-scenario suite
(``python -m bot gate`` with each copy's default ``--jobs``).

    python bench/floor.py --rounds 5 --n 8 --skip-gate --before ../wt-27-before --with-inspect
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AFTER = HERE.parent
SCENARIO = HERE / "scenarios" / "floor"
sys.path.insert(0, str(HERE))
from _common import machine, median, table  # noqa: E402


def _env(tree: Path, base: dict[str, str]) -> dict[str, str]:
    return {**base, "PYTHONPATH": str(tree)}


def worker(tree: Path, env: dict[str, str], what: str, n: int, width: int) -> dict:
    argv = [sys.executable, str(HERE / "_floor_worker.py"), what, "--scenario", str(SCENARIO), "--n", str(n),
            "--width", str(width)]
    done = subprocess.run(argv, env=_env(tree, env), cwd=tree, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {what} failed: {done.stderr[-800:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert what != "replay" or Path(out["bot"]).resolve() == tree.resolve(), (out["bot"], tree)
    return out


def whole(tree: Path, env: dict[str, str], argv: list[str], cwd: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds) of one process (its children's CPU not counted)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bot", *argv], env=_env(tree, env), cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def gate_workspace(root: Path, suite_size: int) -> Path:
    """A candidate rule whose own scenario it fixes, and ``suite_size`` other scenarios that pass either way."""
    for inc, created in (("inc-a", "2026-07-14T09:32:00Z"), ("inc-b", "2026-07-15T09:32:00Z")):
        (root / "incidents").mkdir(parents=True, exist_ok=True)
        (root / "incidents" / f"{inc}.yaml").write_text(
            f"id: {inc}\ntask: \"make it right\"\ntask_type: api\nfailure_class: wrong_assumption\n"
            "trigger: \"CI failed\"\nbelieved: \"wrong.txt is right\"\nactual: \"right.txt is\"\n"
            f"cost_minutes: 5\nresolved_by: unresolved\ncreated: {created}\n")
    own = root / "scenarios" / "own"
    (own / "repo").mkdir(parents=True)
    (own / "repo" / "README.md").write_text("fixture\n")
    (own / "scenario.yaml").write_text(
        "id: own\ntask: make it right\nrepo: repo\npass_if:\n  - succeeds: {run: test -f right.txt}\n"
        "budget: {max_turns: 5, timeout_s: 60, max_cost_usd: 1.0}\n")
    (own / "policy.yaml").write_text(
        "branch_on: write right.txt\nwith_rule:\n  - bash: echo ok > right.txt\n  - say: done\n"
        "without_rule:\n  - bash: echo no > wrong.txt\n  - say: done\n")
    for i in range(suite_size):
        dst = root / "scenarios" / f"suite-{i}"
        shutil.copytree(SCENARIO, dst)
        text = (dst / "scenario.yaml").read_text().replace("id: floor", f"id: suite-{i}")
        (dst / "scenario.yaml").write_text(text)
        (dst / "repo" / f"extra_{i}.txt").write_text(f"{i}\n")  # fixtures differ, as a real suite's do
    rule = root / "playbook" / "proposed" / "rule-0001.yaml"
    rule.parent.mkdir(parents=True)
    (root / "playbook" / "rules").mkdir()
    rule.write_text("id: rule-0001\nrule: When a task says make it right, write right.txt and never wrong.txt.\n"
                    "cites: [inc-a, inc-b]\ntask_types: []\nreplay: scenarios/own\ncreated: '2026-11-01'\n")
    return rule


def python_venv(tmp: Path) -> str:
    """A venv with nothing in it: the ``python3`` every side runs."""
    venv = tmp / "py"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=AFTER.parent / "wt-17-before")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=16, help="samples per measurement")
    parser.add_argument("--width", type=int, default=8, help="samples at once for the parallel rows")
    parser.add_argument("--gate-rounds", type=int, default=1)
    parser.add_argument("--gate-trials", type=int, default=10, help="baseline trials per suite scenario")
    parser.add_argument("--suite-size", type=int, default=8)
    parser.add_argument("--with-inspect", action="store_true",
                        help="also inspect_ai's local sandbox, interleaved in the rounds (bench/inspect_compare.py)")
    parser.add_argument("--inspect-python", help="an interpreter with inspect_ai installed (default: make a venv)")
    parser.add_argument("--skip-gate", action="store_true")
    parser.add_argument("--only-whole", action="store_true", help="only the whole-process rows (implies --skip-gate)")
    args = parser.parse_args()
    trees = {"floor": AFTER, "isolated": AFTER, "before": args.before.resolve(), "after": AFTER, "untraced": AFTER}
    sides = ["floor", "isolated", "before", "after", "untraced"]
    if args.with_inspect:
        sides.append("inspect")
        import inspect_compare

        inspect_python = args.inspect_python or str(inspect_compare.venv())
    if not (trees["before"] / "bot").is_dir():
        raise SystemExit(f"{trees['before']}: no checkout there; git worktree add --detach {trees['before']} 5e38796")
    tmp = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLAYBOOK_")}
    env["PATH"] = python_venv(tmp) + os.pathsep + env.get("PATH", "")
    env["REPLAYBOOK_CACHE_DIR"] = str(tmp / "cache")
    print(f"# Replays against the floor\n\n{machine()}; {args.rounds} interleaved rounds of {args.n} samples, "
          f"medians over rounds.\n", flush=True)
    rows: dict[tuple[str, int], list[dict]] = {}
    for r in range(0 if args.only_whole else args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for width in (1, args.width):
            for side in order:
                if side == "inspect":
                    rows.setdefault((side, width), []).append(
                        inspect_compare.per_sample(inspect_python, args.n, width, tmp))
                    continue
                what = side if side in ("floor", "isolated", "untraced") else "replay"
                rows.setdefault((side, width), []).append(worker(trees[side], env, what, args.n, width))
        print(f"round {r + 1} done", file=sys.stderr, flush=True)

    def cell(side: str, width: int, key: str) -> float:
        return median([m[key] for m in rows[(side, width)]]) * 1000

    out = []
    for width, label in () if args.only_whole else ((1, "serial"), (args.width, f"{args.width} at once")):
        floor = cell("floor", width, "wall_per_sample")
        for side in sides:
            wall, cpu = cell(side, width, "wall_per_sample"), cell(side, width, "cpu_per_sample")
            spread = [m["wall_per_sample"] * 1000 for m in rows[(side, width)]]
            out.append([label, side, f"{wall:.1f}", f"{min(spread):.0f}–{max(spread):.0f}", f"{cpu:.1f}",
                        f"{wall / floor:.2f}×"])
    if out:
        print("## Per sample (bwrap sandbox on)\n")
        print(table(["run", "code", "wall ms/sample (median)", "range over rounds", "CPU ms/sample", "× floor"], out))
        sources = sorted({m.get("cpu_source", "?") for ms in rows.values() for m in ms})
        print(f"\nCPU: {', '.join(sources)} (bench/_cpu.py: `cgroup` counts every process a measurement starts, "
              "sandboxed ones included; `machine` is the whole machine's busy time)")
        # Each round's ratio, then the median: machine noise (steal time) moves both sides of one round alike.
        ratios = []
        for width, label in ((1, "serial"), (args.width, f"{args.width} at once")):
            for num, den in (("after", "before"), ("after", "isolated"), ("before", "isolated"), ("after", "floor"),
                             ("isolated", "floor"), ("untraced", "after"),
                             *((("after", "inspect"),) if args.with_inspect else ())):
                pairs = list(zip(rows[(num, width)], rows[(den, width)]))
                walls = [a["wall_per_sample"] / b["wall_per_sample"] for a, b in pairs]
                cpus = [a["cpu_per_sample"] / b["cpu_per_sample"] for a, b in pairs if b["cpu_per_sample"]]
                ratios.append([label, f"{num} / {den}", f"{median(walls):.2f}×", f"{min(walls):.2f}–{max(walls):.2f}",
                               f"{median(cpus):.2f}×" if cpus else "–"])
        print("\n## Medians of per-round ratios\n")
        print(table(["run", "ratio", "wall (median)", "range over rounds", "CPU (median)"], ratios))
        # The kernel trace's share of a sample: 1 − untraced/after, per round, then the median.
        shares = [[label, f"{median([1 - u['wall_per_sample'] / a['wall_per_sample'] for u, a in pairs]):.1%}",
                   f"{median([1 - u['cpu_per_sample'] / a['cpu_per_sample'] for u, a in pairs]):.1%}"]
                  for width, label in ((1, "serial"), (args.width, f"{args.width} at once"))
                  for pairs in [list(zip(rows[("untraced", width)], rows[("after", width)]))]]
        print("\n## The kernel trace's share of a sample (1 − untraced / after, median of rounds)\n")
        print(table(["run", "wall", "CPU"], shares))
        # CPU per sample at width N against serial, each round's own pair.
        scale = [[side, f"{median([w['cpu_per_sample'] / s['cpu_per_sample'] for s, w in zip(rows[(side, 1)], rows[(side, args.width)])]):.2f}×"]
                 for side in sides]
        print(f"\n## CPU per sample, {args.width} at once / serial (median of rounds)\n")
        print(table(["code", "ratio"], scale))

    work = tmp / "ws"
    work.mkdir()
    procs = []
    for r in range(max(3, args.rounds)):  # noqa: B007
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            wall, rss, cpu = whole(trees[side], env, ["replay", "run", str(SCENARIO), "--runs-dir", str(tmp / "runs")], work)
            hwall, hrss, hcpu = whole(trees[side], env, ["--help"], work)
            procs.append((side, wall, rss, cpu, hwall, hrss, hcpu))
    print("\n## Whole process (CPU: the Python process itself, without its children)\n")
    print(table(["code", "one replay: wall s", "peak MiB", "CPU s", "`--help`: wall s", "peak MiB", "CPU s"],
                [[side, *(f"{median([p[i] for p in procs if p[0] == side]):.2f}" for i in range(1, 7))]
                 for side in ("before", "after")]))

    if not (args.skip_gate or args.only_whole):
        gates = []
        for r in range(args.gate_rounds):
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                ws = tmp / f"gate-{side}-{r}"
                rule = gate_workspace(ws, args.suite_size)
                wall, _ = whole(trees[side], env, ["gate", str(rule), "--playbook", str(ws / "playbook"), "--suite",
                                                   str(ws / "scenarios"), "--no-cache", "--trials",
                                                   str(args.gate_trials), "--runs-dir", str(ws / "runs")], ws)
                gates.append((side, wall))
        before, after = (median([w for s, w in gates if s == side]) for side in ("before", "after"))
        print(f"\n## Gate on a {args.suite_size}-scenario suite ({args.gate_trials} baseline trials each, no cache, "
              f"each copy's default --jobs)\n")
        print(table(["code", "wall s", "ratio"], [["before", f"{before:.1f}", "1.00"],
                                                 ["after", f"{after:.1f}", f"{after / before:.2f}"]]))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
