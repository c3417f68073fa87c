"""The replay suite: every scenario at once, fanned out and merged back.

A workflow lists the scenarios (:func:`discover`) as the matrix of a fan-out
job, replays one scenario per job (``replaybook replay ID --json`` writes one
result file each) and merges the result files into one report
(:func:`merge`, :func:`markdown`). A scenario whose job died without a result
counts as missing, so a crashed job never reads as a pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot._util.markdown import table
from bot.errors import BadInput
from bot.scenario import spec as sc
from bot.scenario import suite as suite_mod

MATRIX_LIMIT = 256  # GitHub Actions runs at most this many jobs per matrix


def discover(folder: Path) -> list[sc.LoadedScenario]:
    """Every scenario under ``folder``, sorted by id; a broken one is BadInput (see :mod:`bot.scenario.suite`)."""
    return suite_mod.load(folder).require_sound()


def listing(scenarios: list[sc.LoadedScenario], root: Path) -> list[dict[str, Any]]:
    """What a workflow needs to fan out: id, folder (relative to ``root`` where possible), task type, task."""
    if len(scenarios) > MATRIX_LIMIT:
        raise BadInput(f"{len(scenarios)} scenarios exceed the {MATRIX_LIMIT} jobs a GitHub Actions matrix "
                       "can run; replay a subset (name the scenarios) or split the suite")
    out = []
    for loaded in scenarios:
        folder = loaded.folder.resolve()
        where = folder.relative_to(root.resolve()) if folder.is_relative_to(root.resolve()) else folder
        out.append({"id": loaded.scenario.id, "path": where.as_posix(), "task_type": loaded.scenario.task_type,
                    "task": loaded.scenario.task})
    return out


# ------------------------------------------------------------------ merging results


@dataclass
class Row:
    """One scenario's line in the merged report."""

    scenario: str
    verdict: str  # passed | failed | unscored | missing
    passed: int = 0
    failed: int = 0
    unscored: int = 0
    trials: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    simulated: bool = False
    agent: str = ""
    model: str = ""
    note: str = ""


@dataclass
class SuiteReport:
    rows: list[Row] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every scenario has a result and every trial of it passed."""
        return bool(self.rows) and all(r.verdict == "passed" for r in self.rows)

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.rows)


def _result_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.json") if p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            raise BadInput(f"{path}: no such result file or folder")
    return files


def _row(file: Path) -> Row:
    """A result file (the output of ``replaybook replay ID --json``) as a row; BadInput names what is wrong."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{file}: not a replay result ({exc}); write it with `replaybook replay ID --json`") from None
    summary = data.get("summary") if isinstance(data, dict) else None
    if not isinstance(summary, dict) or not isinstance(data.get("scenario"), str):
        raise BadInput(f"{file}: not a replay result (needs `scenario` and `summary`); "
                       "write it with `replaybook replay ID --json`")
    counts = {}
    for key in ("passed", "failed", "unscored", "trials"):
        value = summary.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadInput(f"{file}: field `summary.{key}` should be a whole number, got {value!r:.40}")
        counts[key] = value
    if counts["trials"] == 0:
        verdict = "unscored"
    elif counts["passed"] == counts["trials"]:
        verdict = "passed"
    elif counts["failed"]:
        verdict = "failed"
    else:
        verdict = "unscored"
    tokens = sum(v for v in (summary.get("input_tokens"), summary.get("output_tokens"))
                 if isinstance(v, int) and not isinstance(v, bool))
    cost = summary.get("cost_usd")
    return Row(scenario=data["scenario"], verdict=verdict, tokens=tokens,
               cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else 0.0,
               simulated=bool(data.get("simulated")),
               agent=str(data.get("agent") or ""), model=str(data.get("model") or ""), **counts)


def merge(paths: list[Path], expected: list[str] | None = None) -> SuiteReport:
    """Merge result files (or folders of them) into one report.

    ``expected`` lists the scenario ids the suite fanned out; one without a
    result file is a ``missing`` row. Two result files for one scenario add
    up (a scenario split over several jobs).
    """
    rows: dict[str, Row] = {}
    for file in _result_files(paths):
        row = _row(file)
        if row.scenario in rows:
            rows[row.scenario] = _add(rows[row.scenario], row)
        else:
            rows[row.scenario] = row
    for sid in expected or []:
        if sid not in rows:
            rows[sid] = Row(scenario=sid, verdict="missing", note="no result: the job failed before writing one")
    return SuiteReport(sorted(rows.values(), key=lambda r: r.scenario))


def _add(a: Row, b: Row) -> Row:
    total = Row(scenario=a.scenario, verdict="", passed=a.passed + b.passed, failed=a.failed + b.failed,
                unscored=a.unscored + b.unscored, trials=a.trials + b.trials, tokens=a.tokens + b.tokens,
                cost_usd=a.cost_usd + b.cost_usd, simulated=a.simulated or b.simulated,
                agent=a.agent if a.agent == b.agent else f"{a.agent}, {b.agent}",
                model=a.model if a.model == b.model else f"{a.model}, {b.model}")
    total.verdict = ("passed" if total.passed == total.trials and total.trials else
                     "failed" if total.failed else "unscored")
    return total


def markdown(report: SuiteReport, *, title: str = "Replay suite") -> str:
    """One table for a step summary or a terminal, and a closing line."""
    rows = [[r.scenario, r.verdict, f"{r.passed}/{r.trials}", r.failed, r.unscored, r.agent, r.model, r.tokens,
             f"${r.cost_usd:.4f}", r.note] for r in report.rows]
    simulated = any(r.simulated for r in report.rows)
    lines = [f"## {title}", ""]
    if simulated:
        lines += ["> Some results come from the SIMULATED model (scripted, offline): they show the harness works, "
                  "not how a real model behaves.", ""]
    lines.append(table(["scenario", "verdict", "passed", "failed", "unscored", "agent", "model", "tokens", "cost",
                        "note"], rows))
    cost = sum(r.cost_usd for r in report.rows)
    lines += ["", f"{report.count('passed')} of {len(report.rows)} scenario(s) passed every trial; "
                  f"{report.count('failed')} failed, {report.count('unscored')} unscored, "
                  f"{report.count('missing')} missing; ${cost:.4f}" + (" (simulated estimate)" if simulated else "")]
    return "\n".join(lines) + "\n"


__all__ = ["MATRIX_LIMIT", "Row", "SuiteReport", "discover", "listing", "markdown", "merge"]
