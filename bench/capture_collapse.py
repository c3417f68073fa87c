"""Collapsing repeated log lines: the hand-written shape collapser (bot.incident.capture.clues) against drain3's
template miner, on the bundled and test logs.

    .venv/bin/pip install drain3 && .venv/bin/python bench/capture_collapse.py

For each log: lines in, lines after collapsing consecutive lines of one template, the clue lines
of tests/data/logs/clues.yaml that no longer appear verbatim (a collapse that merges two
different clues loses one), and the median time of five runs.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot._util.text_safety import clean  # noqa: E402
from bot.incident.capture.clues import collapse  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "logs"


def drain_collapse(lines: list[str]) -> list[str]:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    config = TemplateMinerConfig()
    config.profiling_enabled = False
    miner = TemplateMiner(config=config)
    ids = [miner.add_log_message(line)["cluster_id"] if line.strip() else None for line in lines]
    out, last, count = [], object(), 0
    for line, cid in zip(lines, ids):
        if cid is not None and cid == last:
            count += 1
            continue
        if count > 1:
            out[-1] += f" ×{count}"
        out.append(line)
        last, count = cid, 1
    if count > 1:
        out[-1] += f" ×{count}"
    return out


def timed(fn, lines):
    times, out = [], []
    for _ in range(5):
        started = time.perf_counter()
        out = fn(lines)
        times.append(time.perf_counter() - started)
    return out, statistics.median(times) * 1000


def main() -> None:
    clues = yaml.safe_load((LOGS / "clues.yaml").read_text(encoding="utf-8"))
    logs = sorted(LOGS.glob("*.log")) + sorted((ROOT / "scenarios").glob("*/logs/*.log"))
    print("| log | lines | hand: lines | drain3: lines | hand: clues lost | drain3: clues lost | hand ms | drain3 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for log in logs:
        lines = [clean(x) for x in log.read_text(encoding="utf-8", errors="replace").splitlines()]
        hand, hand_ms = timed(collapse, lines)
        drain, drain_ms = timed(drain_collapse, lines)
        want = [c for c in clues.get(log.name, {}).get("excerpt", []) if "×" not in c and c in "\n".join(lines)]
        lost_hand = [c for c in want if c not in "\n".join(hand)]
        lost_drain = [c for c in want if c not in "\n".join(drain)]
        print(f"| {log.name} | {len(lines)} | {len(hand)} | {len(drain)} | {len(lost_hand)} | {len(lost_drain)} "
              f"| {hand_ms:.1f} | {drain_ms:.1f} |")


if __name__ == "__main__":
    main()
