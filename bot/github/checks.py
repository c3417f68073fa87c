"""The gate as a check run: ``replaybook/admit`` with the report as its summary, annotations on the files the
decision rests on, and a "Replay again" button.

A check run needs a GitHub App's installation token: the workflow's own ``GITHUB_TOKEN`` can create one,
but it lands in another workflow's check suite (dorny/test-reporter#67). So the bot makes one only when
told it holds an App's token (``REPLAYBOOK_GITHUB_APP=1``, which the admit action sets when given an
``app-token``); otherwise, and when GitHub refuses the check run, it sets the commit status of the same
name, so a branch rule requiring ``replaybook/admit`` is met either way.

- The summary is the gate's report, cut to GitHub's 65,535 characters at a line (a cut code fence is
  closed), with a link to the workflow run, whose job summary holds all of it.
- Annotations point at the rule file (its ``rule:`` line) and, for a reject, at the scenario files the
  decision rests on: the own scenario's failing check, or each regressed suite scenario. Their text is
  neutralised: a rule's text and a trial's output are untrusted.
- The one action, "Replay again" (identifier ``replay``), asks for a new gate: GitHub sends
  ``check_run`` with ``action: requested_action`` (:func:`bot.github.events.plan` re-gates).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bot._util import yamlfile
from bot._util.text_safety import neutralise, one_line
from bot.errors import BadInput
from bot.github.port import CHECK_TEXT_LIMIT, Annotation, CheckAction, CheckRun

REPLAY_ACTION = CheckAction(label="Replay again", description="Run the admit gate again on this commit",
                            identifier="replay")
_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)


def conclusion(state: str) -> str:
    """The check run's conclusion for a gate state: only an admit is success (an error never passes); a gate whose
    budget ended first is ``neutral``, and a ``pending`` status of the same name keeps it from passing a required
    check (``status_state``; bot.github.gate)."""
    return {"success": "success", "inconclusive": "neutral"}.get(state, "failure")


def status_state(state: str) -> str:
    """The commit status for a gate state: inconclusive is ``pending`` (statuses have no neutral; a pending required
    status blocks the merge until a gate decides)."""
    return "pending" if state == "inconclusive" else state


def summary(report: str, run_url: str | None, limit: int = CHECK_TEXT_LIMIT) -> str:
    """``report`` within ``limit`` characters: cut at a line, a cut fence closed, the rest linked."""
    if len(report) <= limit:
        return report
    where = (f"the job summary of [the workflow run]({run_url})" if run_url else
             "the job summary of the workflow run, and the PR's gate comment")
    note = "\n\n> [!NOTE]\n> The report is cut here at GitHub's {n:,}-character limit for a check run ({m:,} more " \
           "characters): all of it is in " + where + ".\n"
    room = limit - len(note.format(n=limit, m=len(report))) - 8
    head = report[:room]
    head = head[: head.rfind("\n") + 1] if "\n" in head else head
    if len(_FENCE.findall(head)) % 2:
        head += "```\n"
    return head + note.format(n=limit, m=len(report) - len(head))


def check_run(verdict: Any, sha: str, run_url: str | None, name: str) -> CheckRun:
    """The completed check run of ``verdict`` (a :class:`~bot.gate.verdict.GateVerdict`) on ``sha``, annotated
    where each rule it judged rests."""
    notes = [a for j in verdict.judged for a in annotations(j.result, j.root, j.rule_file, j.scenarios)]
    return CheckRun(name=name, head_sha=sha, conclusion=conclusion(verdict.state),  # type: ignore[arg-type]
                    title=neutralise(one_line(verdict.description, 200)) or verdict.state,
                    summary=summary(verdict.report, run_url), annotations=tuple(notes),
                    actions=(REPLAY_ACTION,), details_url=run_url)


# ------------------------------------------------------------------ annotations


def _line_of(path: Path, pattern: str) -> int:
    """The first line of ``path`` matching ``pattern`` (1 when none does, or the file cannot be read)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 1
    rx = re.compile(pattern)
    return next((n for n, line in enumerate(lines, 1) if rx.search(line)), 1)


def _relative(root: Path, path: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def _scenario_file(root: Path, scenarios: Path, sid: str) -> Path | None:
    """The ``scenario.yaml`` of scenario ``sid``: its folder by name, else the one whose ``id`` it is."""
    direct = scenarios / sid / "scenario.yaml"
    if direct.is_file():
        return direct
    for candidate in sorted(scenarios.glob("*/scenario.yaml")):
        try:
            if yamlfile.load(candidate, what="scenario").data.get("id") == sid:
                return candidate
        except BadInput:
            continue
    return None


def _note(path: str, line: int, level: str, title: str, message: str) -> Annotation:
    return Annotation(path=path, start_line=line, end_line=line, annotation_level=level,  # type: ignore[arg-type]
                      message=neutralise(one_line(message, 900)), title=neutralise(one_line(title, 200)))


def annotations(result: Any, root: Path, rule_file: str, scenarios: Path) -> list[Annotation]:
    """What one rule's gate (a :class:`~bot.gate.result.GateResult`) rests on, as annotations."""
    root = Path(root)
    level = "notice" if result.decision == "admit" else "failure" if result.decision == "reject" else "warning"
    out = [_note(rule_file, _line_of(root / rule_file, r"^rule\s*:"), level, f"{result.rule_id}: {result.decision}",
                 result.reason or result.decision)]
    after = getattr(result, "after", None)
    if result.decision != "admit" and after is not None and after.outcome != "pass":
        failing: dict[str, int] = {}
        for trial in after.scored:
            for check in trial.failed_checks:
                failing[check.check] = failing.get(check.check, 0) + 1
        own = _scenario_file(root, scenarios, after.scenario)
        path = own and _relative(root, own)
        for name, times in sorted(failing.items()):
            if path:
                kind = name.split(" ", 1)[0]
                out.append(_note(path, _line_of(own, rf"^\s*-\s*{re.escape(kind)}\s*:"), "failure",
                                 f"failing check: {name}",
                                 f"With {result.rule_id} this check still failed in {times} of {after.n} trial(s)."))
    for entry in getattr(result, "regressions", []):
        found = _scenario_file(root, scenarios, entry.scenario)
        path = found and _relative(root, found)
        if not path:
            continue
        base, cand = entry.baseline, entry.candidate
        detail = (f"{base.passes}/{base.n} passed without {result.rule_id}, "
                  f"{cand.passes}/{cand.n} with it" if cand is not None else entry.note)
        out.append(_note(path, _line_of(found, r"^pass_if\s*:"), "failure", f"regressed by {result.rule_id}",
                         f"The suite scenario {entry.scenario} regressed: {detail}."))
    return out
