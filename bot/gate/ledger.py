"""The gate's ledger: one JSON line per gate decision, so a report can sum what admission costs.

``.replaybook/gates.jsonl`` under the root (next to the cache). Every gate
appends one record, rejected and failed candidates included: the gateway's
measured cost (``GateResult.cost_usd``, a simulated estimate when the
simulated model answered), the decision and its reason. Appends are one
``write`` of one line with ``O_APPEND``, so concurrent gates never interleave
a record; a line that does not parse (a crash mid-write, a hand edit) is
skipped by the reader and counted. :func:`detail_of` keeps each failing trial of a gate, small, for
``/replaybook explain`` (on GitHub the records live in the PR's gate comment: ``bot.github.ledger``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot._util.records import SLUG
from bot._util.text_safety import neutralise, one_line
from bot.playbook.rule import GLOB

LEDGER = Path(".replaybook") / "gates.jsonl"
ReasonKind = Literal["admitted", "cheap_checks", "unsound_scenario", "already_followed", "no_effect",
                     "regression", "screen", "error", "inconclusive", "other"]


Command = Annotated[str, Field(max_length=200)]
MAX_NOTES = 6  # failing trials kept per gate (GateDetail.trials)
COMMANDS = 5  # commands kept around each failing check
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


# ------------------------------------------------------------------ each failing trial, for `/replaybook explain`


def detail_of(result, redact: Callable[[str], str] = str) -> GateDetail:
    """What ``explain`` shows of a ``bot.gate.result.GateResult``: each failing trial with the rule, kept small.

    The trials the agent ran with the rule in its prompt (the own scenario's after side, then each regressed suite
    scenario's), at most ``MAX_NOTES``: the first check that failed, its detail, and at most ``COMMANDS`` commands
    around it (from the trial's trace when its run folder is kept, else the check's own evidence). Redacted,
    neutralised and cut to the fields' sizes; whoever shows it neutralises it again (that changes nothing more).
    """
    sides = [result.after, *(e.candidate for e in result.suite if e.regressed)]
    failed = [t for side in sides if side is not None for t in side.trials if t.verdict != "passed"]
    notes = [_note(t, redact) for t in failed[:MAX_NOTES]]
    text = result.rule_text or ""
    return GateDetail(rule_hash=hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
                      rule_text=_cut(redact(text), 600), task_types=_scope(result.task_types, redact, "task_types"),
                      paths=_scope(result.paths, redact, "paths"), trials=notes, more=max(0, len(failed) - MAX_NOTES))


def _scope(values, redact: Callable[[str], str], field: str) -> list[str] | None:
    """The rule's task types or paths as kept, or None (unknown) when they do not fit: more than ``MAX_SCOPE``,
    one too long or not a rule's own slug or glob, or one redaction would change. Never cut: a cut scope would
    read as another, and unknown is what distill treats as safe (``bot.distill.refusals.narrower``)."""
    if values is None or len(values) > MAX_SCOPE:
        return None
    kept = [str(v) for v in values]
    try:
        GateDetail.model_validate({field: kept})
    except ValidationError:
        return None
    return kept if all(redact(v) == v for v in kept) else None


def _cut(text: str, limit: int) -> str:
    """One line, neutralised (it sits in a comment anyone can read), then cut: a cut never rejoins what it broke."""
    return one_line(neutralise(one_line(text)), limit)


def _note(trial, redact: Callable[[str], str]) -> TrialNote:
    check = next((c for c in trial.checks if not c.passed), None)
    name = check.check if check is not None else trial.verdict
    detail = check.detail if check is not None else trial.reason
    return TrialNote(scenario=_cut(trial.scenario, 120), trial=max(0, int(trial.trial)), check=_cut(redact(name), 160),
                     detail=_cut(redact(detail), 240), commands=[_cut(redact(c), 160) for c in _around(trial, check)])


def _around(trial, check) -> list[str]:
    """At most ``COMMANDS`` of the agent's commands: those around the check's first piece of evidence, else its last.

    From the trial's trace when its run folder is kept (the agent's tool calls, else the commands the kernel saw),
    else the check's own evidence."""
    evidence = [e for e in (check.evidence if check is not None else []) if isinstance(e, dict)]
    traced = _traced(trial.run_dir)
    if not traced:
        return [_command(e.get("argv"), e.get("cwd")) for e in evidence if isinstance(e.get("argv"), list)][:COMMANDS]
    first = evidence[0] if evidence else {}
    at = next((i for i, (seq, call, _) in enumerate(traced) if first.get("tool_call") and call == first["tool_call"]),
              None)
    if at is None and isinstance(first.get("seq"), int):  # the last step that started before the evidence
        at = max((i for i, (seq, _, _) in enumerate(traced) if seq is not None and seq <= first["seq"]), default=None)
    start = len(traced) - COMMANDS if at is None else at - 2
    return [text for _, _, text in traced[max(0, start): max(0, start) + COMMANDS]]


def _traced(run_dir: str | None) -> list[tuple[int | None, str | None, str]]:
    """(seq, tool call id, text) of each step the agent took in the trial's trace, in order; [] when it is not kept.

    Its tool calls (a shell call as its command), else the outermost commands the kernel saw."""
    from bot.errors import BadInput
    from bot.replay.trace.events import CommandEvent, ToolCallEvent, read_trace

    if not run_dir:
        return []
    try:
        events = read_trace(Path(run_dir) / "trace.jsonl")
    except (BadInput, OSError):
        return []
    calls = [(e.seq, e.id, _call(e)) for e in events if isinstance(e, ToolCallEvent)]
    return calls or [(e.seq, e.tool_call, _command(e.argv, e.cwd)) for e in events
                     if isinstance(e, CommandEvent) and e.depth == 0 and e.by != "agent"]


def _call(event) -> str:
    given = event.input.get("command") if isinstance(event.input, dict) else None
    if isinstance(given, str):
        return given
    return f"{event.name} {json.dumps(event.input, ensure_ascii=False)[:200]}" if event.input else str(event.name)


def _command(argv, cwd) -> str:
    text = shlex.join(str(a) for a in argv or [])
    return text + (f"  (in {cwd})" if cwd not in (None, "", ".") else "")
