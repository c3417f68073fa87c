"""Capture keeps the clue: per log, which of the lines a person reads first survive into the
incident's excerpt and trigger, and how large the excerpt is.

    .venv/bin/python bench/capture_clues.py

The clue lists live in tests/data/logs/clues.yaml; tests/incident/test_capture_clues.py checks them.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.incident import capture  # noqa: E402

LOGS = Path(__file__).resolve().parent.parent / "tests" / "data" / "logs"


def kept(name: str, want: dict) -> tuple[int, int, list[str], bool, int, float]:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        evidence = capture.evidence_from_log(LOGS / name)
        times.append(time.perf_counter() - started)
    lost = [c for c in want["excerpt"] if c not in evidence.excerpt]
    return (len(want["excerpt"]) - len(lost), len(want["excerpt"]), lost, want["trigger"] in evidence.trigger,
            len(evidence.excerpt), statistics.median(times))


def main() -> None:
    clues = yaml.safe_load((LOGS / "clues.yaml").read_text(encoding="utf-8"))
    print("| log | clue lines kept | trigger names the clue | excerpt chars | median ms | lost |")
    print("|---|---|---|---|---|---|")
    total = found = 0
    for name, want in clues.items():
        k, n, lost, trig, size, secs = kept(name, want)
        total, found = total + n, found + k
        print(f"| {name} | {k}/{n} | {'yes' if trig else 'NO'} | {size} | {secs * 1000:.1f} | {'; '.join(lost)} |")
    print(f"\n{found}/{total} clue lines kept")


if __name__ == "__main__":
    main()
