"""A local gate that decides, end to end (issue 55 item 5): `replaybook gate --model local` on a right rule and on a
wrong one for the same scenario, the real local model replaying both; each gate's decision, replays, model calls
and wall time.

    python bench/local_gate.py [--budget 60] [--jobs 4] [--max-turns 3]

Needs `replaybook model install local`. The scenario is bench/scenarios/codename (no file holds the codename, so
without the rule the model can only guess); the right rule carries `pelican`, the wrong one `heron`. Each gate
runs in a fresh repository with an empty cache, so neither reuses the other's replays. Set
REPLAYBOOK_LOCAL_SEQUENCES to decode replays as sequences of one context.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import _common
import yaml

from bot.cli.main import run as cli

SCENARIO = _common.HERE / "scenarios" / "codename"
RULES = {
    "right": "When asked for this release's codename, write `pelican`: that is the codename of this release.",
    "wrong": "When asked for this release's codename, write `heron`: that is the codename of this release.",
}


def repository(rule_text: str) -> tuple[Path, Path]:
    """A repository holding the scenario and the rule as a proposal; (root, rule file)."""
    root = Path(tempfile.mkdtemp(prefix="rb-local-gate-"))
    shutil.copytree(SCENARIO, root / "scenarios" / "codename")
    rule = root / "playbook" / "proposed" / "rule-0001.yaml"
    rule.parent.mkdir(parents=True)
    rule.write_text(yaml.safe_dump({"id": "rule-0001", "rule": rule_text, "cites": [], "task_types": ["release"],
                                    "replay": "scenarios/codename", "created": "2026-12-06"}), encoding="utf-8")
    return root, rule


def gate(which: str, args) -> list:
    root, rule = repository(RULES[which])
    report = _common.HERE / "results" / "local_gate" / f"{which}.md"  # the gate's markdown, for the record
    report.parent.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    started = time.monotonic()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(["--root", str(root), "gate", str(rule), "--model", "local", "--max-turns", str(args.max_turns),
                    "--budget", str(args.budget), "--jobs", str(args.jobs), "--report", str(report), "--json"])
    wall = time.monotonic() - started
    try:
        data = json.loads(out.getvalue())
    except ValueError:
        raise SystemExit(f"gate {which}: exit {code}, no JSON:\n{err.getvalue()[-2000:]}") from None
    side = (lambda s: "–" if not s else f"{s['passed']}/{s['scored']}")
    _common.progress(f"{which}: {data['decision']} in {wall / 60:.1f} min, {data['replays']} replays")
    shutil.rmtree(root, ignore_errors=True)
    return [which, f"`{RULES[which]}`", data["decision"], data["replays"], data["model_calls"],
            f"{side(data['before'])} / {side(data['after'])}", f"{wall / 60:.1f}",
            f"{load0:.1f} -> {os.getloadavg()[0]:.1f}", data["reason"][:160].replace("|", "/")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=60, help="the gate's budget in fresh replays")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--rules", default="right,wrong")
    args = parser.parse_args()
    _common.progress(_common.machine())
    rows = [gate(which, args) for which in args.rules.split(",")]
    print(_common.table(["rule", "text", "decision", "replays", "model calls", "own scenario without / with",
                         "minutes", "load", "reason"], rows))


if __name__ == "__main__":
    main()
