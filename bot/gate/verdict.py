"""A rule PR's verdict: the state a reviewer acts on, its one-line description, the report, and what it rests on.

:class:`~bot.gate.pull_request.PrGate` returns one; whoever posts it (on GitHub, ``bot.github.gate``: a check
run or a commit status, one comment, the job summary) reads everything from it and decides nothing. The
report's fixed wording for verdicts decided before any replay (refused text, nothing to replay, unproven
instructions) lives here, beside the record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bot._util.text_safety import code
from bot.gate import instructions
from bot.gate.playbook_diff import Meaning

State = Literal["success", "failure", "error", "inconclusive"]  # inconclusive: the gate's budget ended first


@dataclass(frozen=True)
class Judged:
    """One rule file the gate replayed: where it is (relative to ``root``), its result, and the suite it ran on."""

    rule_file: str
    result: Any  # bot.gate.result.GateResult
    root: Path
    scenarios: Path


@dataclass(frozen=True)
class GateVerdict:
    """A gate run's answer: the commit status state, its one-line description, and the markdown report.

    ``judged`` are the rule files the gate replayed with their results (a check run's annotations point at the
    files each decision rests on), and ``records`` the ledger records of each (kept in the PR's gate comment).
    """

    state: State
    description: str
    report: str
    judged: tuple[Judged, ...] = ()
    records: tuple[Any, ...] = ()  # bot.gate.ledger.GateRecord


GateRunner = Callable[[Any], GateVerdict]  # called with a rule PR's event (bot.github.events.GateRulePr)


def refused_text(change: Meaning) -> GateVerdict:
    """The PR's rule files hold text no replay can prove safe (``Meaning.refused``)."""
    listed = "\n".join(f"- {code(p, 500)}" for p in change.refused)
    return GateVerdict("failure", "refused: " + change.refused[0],
                       f"## Replaybook gate: refused\n\n{listed}\n\nFix each one as it says: the gate "
                       "judges exactly the text agents are given, and refuses text no replay can prove "
                       "safe (characters a reviewer cannot see or would misread, links, URLs, pipes into a "
                       "shell, downloads that are run, encoded blobs, hiding, credentials, CI, skipped or "
                       "disabled tests).\n")


def refusal(found: instructions.Findings) -> str:
    """The report of a PR refused for what else agents read (generated files, removed rules, unproven files)."""
    parts = ["## Replaybook gate: refused", ""]
    if found.differs:
        parts += ["**Generated content that is not its rendering.** Replaybook writes these from "
                  "`playbook/rules/`; agents would read text no replay proved:", "",
                  *(f"- {code(p, 500)}" for p in found.differs), ""]
    if found.deleted:
        parts += ["**Admitted rules removed by hand:**", "", *(f"- {code(p, 500)}" for p in found.deleted), ""]
    if not found.differs and not found.deleted:
        parts += ["Only instructions no replay proved (listed below), and the base's config says "
                  "`gate.unproven_instructions: fail`.", ""]
    return "\n".join(parts).rstrip("\n") + "\n"


def _unproven_lines(unproven: list[str], fails: bool) -> list[str]:
    verdict = ("`gate.unproven_instructions: fail` in the base's `.replaybook.yml` makes them fail the gate; merge "
               "them in a PR a maintainer reviews as code, with that setting lifted for it" if fails else
               "reported, not failed (`gate.unproven_instructions: report`, the default); review them as you "
               "would code, or set `fail`")
    return [f"**{instructions.UNPROVEN[0].upper()}{instructions.UNPROVEN[1:]}** ({verdict}):", "",
            *(f"- {code(p, 500)}" for p in unproven), ""]


def with_unproven(verdict: GateVerdict, unproven: list[str], fails: bool) -> GateVerdict:
    """The verdict with the instructions no replay proved listed at its end (and counted in its description)."""
    if not unproven:
        return verdict
    report = verdict.report.rstrip("\n") + "\n\n" + "\n".join(_unproven_lines(unproven, fails))
    what = "fail" if fails else "reported"
    description = f"{verdict.description}; {len(unproven)} unproven instruction file(s) {what}"
    return dataclasses.replace(verdict, description=description, report=report)  # what it rests on kept


def listing(change: Meaning) -> str:
    """The rule files the PR's change makes the gate replay, each with what changed."""
    return "\n".join(f"- {code(path, 200)}: {code(change.why.get(path, 'changed'), 200)}" for path in change.gated)


def nothing_to_replay(change: Meaning) -> GateVerdict:
    """Success: no admitted rule, and no scenario a rule replays, changed (bookkeeping at most)."""
    if change.bookkeeping:
        description = "no rule changed (bookkeeping only)"
        detail = "Only `last_hit` moved on " + ", ".join(change.bookkeeping) + ": nothing to replay."
    else:
        description = "no rule changed"
        detail = "No admitted rule, and no scenario a rule replays, changed: nothing to replay."
    if change.removed:
        detail += " No longer admitted: " + ", ".join(change.removed) + "."
    return GateVerdict("success", description, f"## Replaybook gate\n\n{detail}\n")


def of_results(judged: list[Judged], report: str, records: tuple[Any, ...]) -> GateVerdict:
    """The verdict of the rules the gate replayed: error if one could not be decided, else failure if one was
    rejected, else inconclusive if a budget ended first, else success."""
    decisions = {j.result.decision for j in judged}
    state: State = ("error" if "error" in decisions else "failure" if "reject" in decisions
                    else "inconclusive" if "inconclusive" in decisions else "success")
    word = {"success": "admit", "failure": "reject", "error": "could not decide",
            "inconclusive": "inconclusive (the budget ended first)"}[state]
    ids = ", ".join(f"{j.result.rule_id} {j.result.decision}" for j in judged)
    return GateVerdict(state, f"{word}: {ids}", report, judged=tuple(judged), records=records)
