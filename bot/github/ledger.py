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

import json
import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.gate.ledger import GateRecord
from bot.github.port import GatedPull, written_by

VERSION = 1
MAX_RECORDS = 50  # a PR's gates kept in its comment (the oldest go first): the block stays under ~25,000 characters
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
