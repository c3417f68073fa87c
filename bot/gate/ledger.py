"""The gate's ledger: one JSON line per gate decision, so a report can sum what admission costs.

``.replaybook/gates.jsonl`` under the root (next to the cache). Every gate
appends one record, rejected and failed candidates included: the gateway's
measured cost (``GateResult.cost_usd``, a simulated estimate when the
simulated model answered), the decision and its reason. Appends are one
``write`` of one line with ``O_APPEND``, so concurrent gates never interleave
a record; a line that does not parse (a crash mid-write, a hand edit) is
skipped by the reader and counted.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot._util.records import SLUG
from bot.playbook.rule import GLOB

LEDGER = Path(".replaybook") / "gates.jsonl"
ReasonKind = Literal["admitted", "cheap_checks", "unsound_scenario", "already_followed", "no_effect",
                     "regression", "screen", "error", "inconclusive", "other"]


Command = Annotated[str, Field(max_length=200)]
MAX_SCOPE = 8  # task types, and paths, kept of a rule's scope: a wider scope is recorded as unknown
TaskType = Annotated[str, Field(pattern=SLUG)]  # a rule's own slug: at most 80 characters
Glob = Annotated[str, Field(max_length=120, pattern=GLOB.pattern)]  # a rule's own glob (no space, <, >, $, `)


class TrialNote(BaseModel):
    """One failing trial, as ``/replaybook explain`` shows it: where, the check that failed, the commands around it.

    Every string is what a scenario's agent did, so hostile: whoever shows it neutralises it."""

    model_config = ConfigDict(extra="forbid")

    side: Literal["with the rule", "without the rule"] = "with the rule"
    scenario: str = Field(max_length=120)
    trial: int = Field(ge=0, le=100_000)
    check: str = Field(default="", max_length=200)
    detail: str = Field(default="", max_length=300)
    commands: list[Command] = Field(default_factory=list, max_length=5)


class GateDetail(BaseModel):
    """A gate's failing trials, kept small (at most 6 notes): the rule text the agent saw, its hash, its scope,
    and each trial.

    ``task_types`` and ``paths`` are the rule's scope as the gate saw it (empty: every task, every file); None is
    unknown: a gate from before the scope was recorded, or a scope wider than ``MAX_SCOPE``. They come from a rule
    file on a branch, so they are hostile: each must be a rule's own slug or glob, and whoever shows them defuses
    them (``bot.distill.refusals.defused``)."""

    model_config = ConfigDict(extra="forbid")

    rule_hash: str = Field(default="", pattern=r"^[0-9a-f]{0,64}$")
    rule_text: str = Field(default="", max_length=600)
    task_types: list[TaskType] | None = Field(default=None, max_length=MAX_SCOPE)
    paths: list[Glob] | None = Field(default=None, max_length=MAX_SCOPE)
    trials: list[TrialNote] = Field(default_factory=list, max_length=6)
    more: int = Field(default=0, ge=0, description="failing trials not kept")


class GateRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: Literal["gate"] = "gate"
    at: datetime
    rule_id: str = Field(max_length=40)
    decision: Literal["admit", "reject", "error", "inconclusive"]  # inconclusive: not a refusal (the rule stays proposed)
    reason: str = Field(default="", max_length=2000)
    reason_kind: ReasonKind = "other"
    cost_usd: float = Field(default=0.0, ge=0)
    simulated: bool = False
    replays: int = 0
    cache_hits: int = 0
    detail: GateDetail | None = None  # optional: the GitHub gate's per-trial summary (bot/github/ledger.py)


def reason_kind(decision: str, reason: str) -> ReasonKind:
    """The reason's category, for "rejected by reason" (the gate's reasons open with these words)."""
    if decision == "admit":
        return "admitted"
    if decision in ("error", "inconclusive"):
        return decision  # type: ignore[return-value]
    for prefix, kind in (("cheap checks failed", "cheap_checks"), ("unsound scenario", "unsound_scenario"),
                         ("regressed", "regression"), ("screen:", "screen"),
                         ("replay not discriminative: the scenario passed without", "already_followed"),
                         ("replay not discriminative: the scenario still failed", "no_effect")):
        if reason.startswith(prefix):
            return kind  # type: ignore[return-value]
    return "other"


def record_of(result, at: datetime | None = None) -> GateRecord:
    """The ledger record of a ``bot.gate.decision.GateResult``."""
    return GateRecord(at=at or datetime.now(timezone.utc), rule_id=result.rule_id, decision=result.decision,
                      reason=result.reason[:2000], reason_kind=reason_kind(result.decision, result.reason),
                      cost_usd=max(0.0, result.cost_usd), simulated=result.simulated, replays=result.replays,
                      cache_hits=result.cache_hits)


def append(root: Path, record: GateRecord) -> Path:
    path = Path(root) / LEDGER
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (record.model_dump_json(exclude_none=True) + "\n").encode("utf-8")  # no `detail` unless given
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return path


def read(root: Path) -> tuple[list[GateRecord], int]:
    """Every record, oldest first, and how many lines were skipped as unreadable."""
    path = Path(root) / LEDGER
    if not path.is_file():
        return [], 0
    records, skipped = [], 0
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                records.append(GateRecord.model_validate(json.loads(raw)))
            except (ValueError, ValidationError):
                skipped += 1
    return sorted(records, key=lambda r: r.at), skipped
