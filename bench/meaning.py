"""Twins and conflicts between rules: precision and recall of each method on hand-labelled pairs (issue 49).

    python bench/meaning.py [--pairs bench/data/rule_pairs.yaml]

Split rule: within each kind (twin, near_miss, conflict, unrelated), in file order, the 1st, 3rd, 5th … pair tunes
and the 2nd, 4th, 6th … is held out. Each method's thresholds are the ones with the best F1 on the tuning half
(ties: the higher threshold); precision and recall are reported on the held-out half only. A pair counts as a
predicted twin (conflict) when ``bot.model.meaning.relate`` says so. Methods: word overlap (the fallback, and what
the gate used before), the embedding model when installed, and its cosine alone (no polarity, no specifics) as a
baseline showing why cosine is not enough.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot._util.markdown import table  # noqa: E402
from bot.model import meaning  # noqa: E402

HERE = Path(__file__).resolve().parent
GRID = [round(0.05 * i, 2) for i in range(2, 20)]


def split(pairs: list[dict]) -> tuple[list[dict], list[dict]]:
    seen: dict[str, int] = {}
    tune, held = [], []
    for p in pairs:
        n = seen.get(p["kind"], 0)
        seen[p["kind"]] = n + 1
        (tune if n % 2 == 0 else held).append(p)
    return tune, held


def scores(pairs, predict, kind: str) -> tuple[float, float, int, int, int]:
    tp = sum(1 for p in pairs if predict(p) == kind and p["kind"] == kind)
    fp = sum(1 for p in pairs if predict(p) == kind and p["kind"] != kind)
    fn = sum(1 for p in pairs if predict(p) != kind and p["kind"] == kind)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp, fp, fn


def f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def tuned(tune, make_predict, kind):
    best = max(GRID, key=lambda t: (round(f1(*scores(tune, make_predict(t), kind)[:2]), 6), t))
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=Path, default=HERE / "data" / "rule_pairs.yaml")
    args = parser.parse_args()
    pairs = yaml.safe_load(args.pairs.read_text(encoding="utf-8"))["pairs"]
    tune, held = split(pairs)
    measures = [meaning.WordOverlap()]
    why = meaning.why_words()
    if not why:
        began = time.perf_counter()
        measures.append(meaning.default())
        load_s = time.perf_counter() - began
    rows = []
    for m in measures:
        began = time.perf_counter()
        for p in pairs:  # warm the vectors, so the timing is one encoding per text
            meaning.relate(p["a"], p["b"], m)
        encode_s = time.perf_counter() - began

        def rel(t_twin, t_conf):
            return lambda p: meaning.relate(p["a"], p["b"], m, (t_twin, t_conf)).kind

        t_twin = tuned(tune, lambda t: rel(t, 9.0), "twin")
        t_conf = tuned(tune, lambda t: rel(9.0, t), "conflict")
        for kind, predict, t in (("twin", rel(t_twin, t_conf), t_twin), ("conflict", rel(t_twin, t_conf), t_conf)):
            p, r, tp, fp, fn = scores(held, predict, kind)
            rows.append((m.method, kind, f"{t:.2f}", f"{p:.2f}", f"{r:.2f}", f"{tp}/{fp}/{fn}"))
        if m.method == meaning.EMBEDDINGS:
            cos = lambda t: (lambda p: "twin" if m.similarity(p["a"], p["b"]) >= t else "")  # noqa: E731
            t = tuned(tune, cos, "twin")
            p, r, tp, fp, fn = scores(held, cos(t), "twin")
            rows.append(("cosine alone", "twin", f"{t:.2f}", f"{p:.2f}", f"{r:.2f}", f"{tp}/{fp}/{fn}"))
            print(f"model load {load_s:.1f} s; {len(pairs)} pairs related in {encode_s:.1f} s", file=sys.stderr)
    from bot._util.similarity import similarity
    from bot.hindsight.lesson import directives

    today = lambda p: "twin" if similarity(p["a"], p["b"]) >= 0.6 else ""  # noqa: E731
    p, r, tp, fp, fn = scores(held, today, "twin")
    rows.insert(0, ("word overlap before #49 (gate, distill)", "twin", "0.60", f"{p:.2f}", f"{r:.2f}",
                    f"{tp}/{fp}/{fn}"))

    def lessons(p):
        (pa, na), (pb, nb) = directives(p["a"]), directives(p["b"])
        return "conflict" if (pa & nb) | (na & pb) else ""

    p, r, tp, fp, fn = scores(held, lessons, "conflict")
    rows.insert(1, ("lesson directives (hindsight's contradiction test)", "conflict", "-", f"{p:.2f}", f"{r:.2f}",
                    f"{tp}/{fp}/{fn}"))
    print(f"{len(pairs)} pairs: {len(tune)} tune, {len(held)} held out; load {os.getloadavg()[0]:.1f}")
    if why:
        print(f"embeddings not measured: {why}")
    print(table(["method", "relation", "threshold (tuned)", "precision (held out)", "recall (held out)",
                 "tp/fp/fn"], rows))


if __name__ == "__main__":
    main()
