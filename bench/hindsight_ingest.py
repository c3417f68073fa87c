"""Hindsight event store: ingest rate, chronicle time, storage with and without the volume controls.

    python bench/hindsight_ingest.py [--events 100000] [--rounds 3] [--baseline OLD_TRACE_STORE_PY]

Targets (issue 8): ingest >= 50,000 events/s batched (article-sized events);
chronicle of a 10,000-event task <= 200 ms; storage after the volume controls
well below raw (the article saw about 10x). Ingest is also measured on the
storage mix (polls, long text), without a target. ``--baseline`` measures
another copy of bot/hindsight/traces.py side by side, round for round. Prints a
markdown table on stdout.

The events are synthetic, shaped like the article's example (state summary,
input, decision with alternatives, result). The storage ratio depends wholly
on that mix, stated in the table: read it as "what the controls do to this
mix", not as a property of real agents.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bot._util.markdown import table
from bot.hindsight import chronicle
from bot.hindsight.traces import Recorder, TraceStore

T0 = datetime(2026, 7, 14, 9, 32, tzinfo=timezone.utc)
ACTIONS = ["parse_with_pandas", "parse_with_csv", "extract_by_lines"]


def article_event(rng: random.Random, i: int) -> dict:
    """One decision event of about the article's size (~450 bytes of JSON)."""
    chosen = rng.choice(ACTIONS)
    failed = rng.random() < 0.05
    return {
        "type": "action_executed",
        "agent_state": {"current_step": "file_parse", "context_count": i % 200, "model": "qwen2.5-14b-instruct"},
        "input": {"file_path": f"/data/raw/sales_{i % 97}.csv", "encoding": "utf-8-sig"},
        "decision": {"chosen_action": chosen, "alternatives": [a for a in ACTIONS if a != chosen],
                     "confidence": round(rng.random(), 2)},
        "result": {"status": "failed", "error_type": "EncodingError", "error_message": "codec can't decode byte 0xed"}
        if failed else {"status": "ok", "rows": rng.randint(0, 10_000)},
    }


def raw_event(rng: random.Random, i: int) -> dict:
    """The mix an unfiltered agent log has: polls, full contexts, long tool outputs, some decisions."""
    roll = rng.random()
    if roll < 0.45:
        return {"type": rng.choice(["poll", "heartbeat"]), "agent_state": {"waiting_for": "job-42", "tick": i},
                "result": {"status": "ok", "progress": round(rng.random(), 3)}}
    event = article_event(rng, i)
    if roll < 0.75:  # the whole context was dumped into the state
        event["agent_state"]["context"] = " ".join(f"msg{j}: {'lorem ipsum ' * 8}" for j in range(30))
    if roll > 0.6:  # a tool returned a long output
        event["result"]["output"] = "\n".join(f"row {j}, {rng.random():.6f}, {'x' * 40}" for j in range(60))
    return event


def ingest_rate(folder: Path, n: int, recorder_class: type = Recorder, mix=None) -> tuple[float, float]:
    """Events/s through ``Recorder.record`` until the last batch is written and the store closed: (wall, CPU).

    The CPU rate counts this process's CPU time only, so it is steadier than
    the wall rate on a shared machine; it leaves out waiting for the disk.
    """
    make = mix or article_event
    rng = random.Random(1)
    events = [make(rng, i) for i in range(n)]
    stamps = [T0 + timedelta(microseconds=37 * i) for i in range(n)]
    path = folder / f"ingest-{time.perf_counter_ns()}.db"
    start, cpu = time.perf_counter(), time.process_time()
    with recorder_class(path, batch_size=2000, sample_over=None) as recorder:
        for i, (event, when) in enumerate(zip(events, stamps)):
            recorder.record(f"task-{i // 400}", event, when)
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu)


def load_recorder(path: str) -> type:
    """``Recorder`` from another copy of bot/hindsight/traces.py (e.g. ``git show HEAD~1:bot/hindsight/traces.py``)."""
    spec = importlib.util.spec_from_file_location("baseline_trace_store", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.Recorder


def ingest_rounds(folder: Path, n: int, rounds: int, baseline: type | None, mix=None) -> dict[str, list]:
    """Rounds of the current Recorder, each right after one of the baseline's when there is one (side by side)."""
    out: dict[str, list] = {"current": [], "baseline": [], "ratio": []}
    for _ in range(rounds):
        if baseline is not None:
            out["baseline"].append(ingest_rate(folder, n, baseline, mix))
        out["current"].append(ingest_rate(folder, n, Recorder, mix))
        if baseline is not None:
            out["ratio"].append(tuple(c / b for c, b in zip(out["current"][-1], out["baseline"][-1])))
    return out


def _rates(rounds: list[tuple[float, float]]) -> tuple[str, str]:
    wall = [r[0] for r in rounds]
    cpu = statistics.median(r[1] for r in rounds)
    return (f"{statistics.median(wall):,.0f}",
            f"all rounds: {', '.join(f'{r:,.0f}' for r in wall)}; CPU-time rate (median) {cpu:,.0f}")


def chronicle_ms(folder: Path, n: int, rounds: int) -> tuple[float, int]:
    rng = random.Random(2)
    path = folder / "chronicle.db"
    with Recorder(path, sample_over=None) as recorder:
        for i in range(n):
            recorder.record("big", article_event(rng, i), T0 + timedelta(milliseconds=i))
    with TraceStore(path) as store:
        times, nodes = [], 0
        for _ in range(rounds):
            start = time.perf_counter()
            nodes = len(chronicle.build(store, "big").nodes)
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), nodes


def storage(folder: Path, tasks: int, per_task: int) -> tuple[int, int, int, int]:
    sizes = []
    kept = []
    for name, options in (("raw", dict(noise=(), max_chars=None, max_items=None, sample_over=None)),
                          ("controlled", {})):
        path = folder / f"storage-{name}.db"
        rng = random.Random(3)
        with Recorder(path, **options) as recorder:
            for t in range(tasks):
                for i in range(per_task):
                    recorder.record(f"task-{t}", raw_event(rng, i), T0 + timedelta(seconds=t, microseconds=i))
        with TraceStore(path) as store:
            kept.append(sum(s.events for s in store.tasks()))
            store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            store._conn.execute("VACUUM")
        sizes.append(path.stat().st_size)
    return sizes[0], sizes[1], kept[0], kept[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events per ingest round")
    parser.add_argument("--rounds", type=int, default=3, help="ingest rounds (median)")
    parser.add_argument("--baseline", metavar="TRACE_STORE_PY",
                        help="another bot/hindsight/traces.py to measure side by side, e.g. from "
                             "`git show REV:bot/hindsight/traces.py > /tmp/old.py`")
    args = parser.parse_args()
    baseline = load_recorder(args.baseline) if args.baseline else None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("ingest…", file=sys.stderr)
        article = ingest_rounds(folder, args.events, args.rounds, baseline)
        mixed = ingest_rounds(folder, args.events, args.rounds, baseline, raw_event)
        print("chronicle…", file=sys.stderr)
        ms, nodes = chronicle_ms(folder, 10_000, 7)
        print("storage…", file=sys.stderr)
        raw, controlled, raw_events, kept_events = storage(folder, 20, 2_000)
    print(f"Machine: {os.cpu_count()} cores, {platform.system()} {platform.machine()}, Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    method = f"{args.rounds} rounds of {args.events:,} events, batch 2,000, default controls"
    rows = []
    for label, runs, what in (("article-sized events", article, "article-sized decision events"),
                              ("mixed stream", mixed, "the storage mix below (45% polls dropped, long text cut)")):
        median, rounds = _rates(runs["current"])
        rows.append((f"ingest, {label}, events/s (median)", ">= 50,000" if runs is article else "",
                     median, f"{method}; {what}; {rounds}"))
        if baseline is not None:
            median, rounds = _rates(runs["baseline"])
            wall = statistics.median(r[0] for r in runs["ratio"])
            cpu = statistics.median(r[1] for r in runs["ratio"])
            rows.append((f"  baseline ({Path(args.baseline).name})", "", median,
                         f"same events, each round just before the current one; {rounds}"))
            rows.append(("  current / baseline (median of per-round ratios)", "", f"{wall:.2f}x",
                         f"wall: {', '.join(f'{r[0]:.2f}' for r in runs['ratio'])}; CPU time: {cpu:.2f}x"))
    print(table(["measure", "target", "result", "method"], [
        *rows,
        ("chronicle of a 10,000-event task, ms (median of 7)", "<= 200", f"{ms:.0f}",
         f"chronicle.build: SQLite extracts the outline, Python finds the nodes, loads and summarises them; {nodes} nodes"),
        ("storage raw / controlled", "~10x (article)", f"{raw / controlled:.1f}x",
         f"{raw:,} B vs {controlled:,} B after VACUUM; events {raw_events:,} vs {kept_events:,}; "
         "20 tasks x 2,000 events: 45% polls, 30% full context dumps, 40% long tool outputs"),
    ], width=200))


if __name__ == "__main__":
    main()
