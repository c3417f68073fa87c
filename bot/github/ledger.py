"""The gate ledger on GitHub: each gate's records kept in a hidden block of the bot's own gate comment.

Locally every gate appends a :class:`bot.gate.ledger.GateRecord` to ``.replaybook/gates.jsonl``; a
workflow's checkout is thrown away, so on GitHub the same records live in the PR's gate comment (the one
the bot edits in place), as one line at its end::

    <!-- replaybook-ledger v1 {"version":1,"pr":12,"records":[{"kind":"gate","at":…,"rule_id":"rule-0042",…}]} -->

Each gate of the PR reads the block back and appends its own records, so a re-gate after a push keeps the
earlier gates' cost. The report (``replaybook report --github``) and the dashboard collect the blocks of
the rule PRs with one search (:meth:`~bot.github.port.GitHubPort.search_pulls`).

The block is hostile input wherever it did not come from the bot, so it is read strictly: only a comment
written by one of the bot's accounts and carrying the gate's marker counts (anyone can paste a block into
a comment of their own); exactly one block line, of a version this code knows, whose ``pr`` is the PR it
sits on, holding JSON with no unknown key; anything else is skipped and counted as unreadable. Untrusted
text never writes one: :func:`~bot._util.text_safety.neutralise` breaks every ``<!--`` it copies, and the
JSON here escapes ``<`` and ``>``, so a reason can never end the comment early.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot._util.text_safety import neutralise, one_line
from bot.gate.ledger import MAX_SCOPE, GateDetail, GateRecord, TrialNote
from bot.github.port import GatedPull, written_by

VERSION = 1
MAX_RECORDS = 50  # a PR's gates kept in its comment (the oldest go first): the block stays under ~25,000 characters
MAX_NOTES = 6  # failing trials kept per gate (GateDetail.trials)
COMMANDS = 5  # commands kept around each failing check
DETAILED = 3  # the newest records keep their per-trial detail; older ones keep their decision and cost only
RULE_PRS = "head:replaybook/rule-"  # the search qualifiers: the rule PRs the bot opens, open and closed
_LINE = re.compile(r"^<!-- replaybook-ledger v(?P<version>\d{1,3}) (?P<json>\{.*\}) -->$", re.MULTILINE)
_PREFIX = "<!-- replaybook-ledger"


class Block(BaseModel):
    """The block's payload: its version, the PR it belongs to, and that PR's gate records, oldest first."""

    model_config = ConfigDict(extra="forbid")

    version: int = VERSION
    pr: int = Field(ge=1)
    records: list[GateRecord] = Field(default_factory=list, max_length=MAX_RECORDS)


def block(pr: int, records: Sequence[GateRecord]) -> str:
    """The ledger line for PR ``pr`` holding ``records`` (the newest ``MAX_RECORDS``; the newest ``DETAILED``
    with their per-trial detail)."""
    kept = list(records)[-MAX_RECORDS:]
    kept = [r if i >= len(kept) - DETAILED or r.detail is None else r.model_copy(update={"detail": None})
            for i, r in enumerate(kept)]
    payload = Block(pr=pr, records=kept).model_dump(mode="json", exclude_none=True)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    # No "<" or ">" inside: the JSON can neither end the HTML comment nor open another one.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"{_PREFIX} v{VERSION} {text} -->"


def read(body: str | None, pr: int) -> tuple[list[GateRecord], bool]:
    """The records of the one block in ``body`` and whether the body held a block that could not be read.

    Trust is the caller's business (see :func:`collect`): this only parses, strictly.
    """
    text = body or ""
    if _PREFIX not in text:
        return [], False
    found = list(_LINE.finditer(text))
    if len(found) != 1 or text.count(_PREFIX) != 1 or int(found[0]["version"]) != VERSION:
        return [], True
    try:
        data = json.loads(found[0]["json"])
        if not isinstance(data, dict) or data.get("version") != VERSION or data.get("pr") != pr:
            return [], True
        known = set(GateRecord.model_fields)
        if any(not isinstance(r, dict) or set(r) - known for r in data.get("records") or []):
            return [], True  # GateRecord ignores unknown keys; a block of ours never has one
        return Block.model_validate(data).records, False
    except (ValueError, ValidationError):
        return [], True


def collect(pulls: Iterable[GatedPull], marker: str, bot_logins: Sequence[str]) -> tuple[list[GateRecord], int]:
    """One record per rule gated on each of ``pulls``, oldest first, and how many blocks were unreadable.

    On each PR only the first comment that is the bot's own and carries ``marker`` counts: a block in
    anyone else's comment, or in a second comment, is never read. A PR is gated again on every push and
    every "Replay again", so a rule's gates on one PR are one candidate (:func:`candidate`): the cost
    of all of them, the decision of the last, and a rule re-gated five times is admitted once.
    """
    records: list[GateRecord] = []
    unreadable = 0
    for gated in pulls:
        mine = next((c for c in gated.comments if marker in c.body and written_by(c.author, bot_logins)), None)
        if mine is None:
            continue
        found, bad = read(mine.body, gated.pull.number)
        by_rule: dict[str, list[GateRecord]] = {}
        for record in sorted(found, key=lambda r: r.at):
            by_rule.setdefault(record.rule_id, []).append(record)
        records += [candidate(gates) for gates in by_rule.values()]
        unreadable += bad
    return sorted(records, key=lambda r: r.at), unreadable


def candidate(gates: Sequence[GateRecord]) -> GateRecord:
    """One rule's gates on one PR, oldest first, as one record: the last decision, every gate's cost and replays."""
    last = gates[-1]
    return last.model_copy(update={"cost_usd": round(sum(g.cost_usd for g in gates), 6),
                                   "replays": sum(g.replays for g in gates),
                                   "cache_hits": sum(g.cache_hits for g in gates),
                                   "simulated": any(g.simulated for g in gates)})


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
    from bot.replay.trace import CommandEvent, ToolCallEvent, read_trace

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
