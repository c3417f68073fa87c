"""Refused proposals distill may answer again: the gate's reason back in the prompt, at most three times.

A proposal the gate refused for a reason a better rule could answer is not the
end of its incidents. These reasons count (``RETRYABLE``, the gate ledger's
``reason_kind``):

- ``already_followed``: the scenario passed without the rule, so the rule
  taught nothing the agent did not already do; a rule for the mistake the
  agent actually makes may;
- ``no_effect``: the scenario still failed with the rule; a clearer or more
  specific rule may fix it;
- ``regression``: the rule broke another scenario; the same advice scoped to
  the incidents' task types or paths may not reach it.

These do not: ``cheap_checks`` (distill's own checks are the same, so such a
refusal means the playbook moved or a person edited the file: no replay
evidence a prompt could learn from), ``unsound_scenario`` and ``screen`` (the
scenario, not the rule, is what failed), ``error`` (infrastructure: nothing
was learnt about the rule, and it is gated again as it is), ``other``, and a
person closing a rule PR without a gate refusal (a person decided).

Each incident gets at most ``MAX_REPROPOSALS`` re-proposals: a refusal whose
incidents were already re-proposed that often stands, and distill says so.
Locally the count is the archived proposals with ``retired_reason: refused``
that share a cite (the refused proposal moves to ``archive/`` when its
replacement is written); on GitHub it is the gate-refused closed rule PRs
that share a cite.

After a ``regression`` the same advice is accepted again only with a strictly
narrower scope (:func:`narrower`). Locally the refused rule's scope is read
from its proposal file; on GitHub it is the one the gate recorded in its
comment's ledger block, and a block from before the gate recorded it leaves it
unknown, which no scope is narrower than.

The refused rule's text and the gate's reason are hostile (the reason quotes
what a scenario's agent did): :func:`prompt_text` neutralises them, and the
template fences them as data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from bot._util import yamlfile
from bot._util.text_safety import ZWSP, neutralise, one_line
from bot.change import Change
from bot.gate import ledger
from bot.playbook.rule import Rule

RETRYABLE = ("already_followed", "no_effect", "regression")
MAX_REPROPOSALS = 3
REASON_CHARS = 600
REFUSED = "refused"  # the archive's retired_reason
_HINTS = {
    "already_followed": "the scenario passed WITHOUT the rule: the agent already does what it says. Propose a rule "
                        "for the mistake the incidents actually show, and a scenario in which an agent without "
                        "the rule makes that mistake.",
    "no_effect": "the scenario still failed WITH the rule: it did not change what the agent did. Propose a clearer, "
                 "more specific rule (name the file, command or config), or a scenario that shows the fix.",
    "regression": "the rule broke another scenario. Keep the advice but narrow its scope to where the incidents "
                  "happened: set `task_types` (and `paths`) from the incidents, so it cannot reach the others.",
}


@dataclass(frozen=True)
class Refused:
    """One refused proposal: its rule, the gate's reason and how many re-proposals its incidents already had."""

    rule_id: str
    rule: str
    cites: tuple[str, ...]
    reason_kind: str
    reason: str
    task_types: tuple[str, ...] | None = ()  # the refused rule's scope (empty: all); None: unknown (see narrower)
    paths: tuple[str, ...] | None = ()
    reproposals: int = 0  # re-proposals its incidents already had (this one included when it was one)
    path: str | None = None  # locally: the proposal's file, relative to the root (moved to archive/ when replaced)
    pr: int | None = None  # on GitHub: the closed rule PR

    @property
    def open(self) -> bool:
        """May distill propose again for its incidents?"""
        return self.reason_kind in RETRYABLE and self.reproposals < MAX_REPROPOSALS

    @property
    def scope_known(self) -> bool:
        return self.task_types is not None and self.paths is not None

    def label(self) -> str:
        return f"{self.rule_id} (PR #{self.pr})" if self.pr is not None else self.rule_id

    def stands(self) -> str:
        """Why distill does not propose again (for a refusal that is not open)."""
        return (f"the gate refused {self.label()} ({self.reason_kind}) after {self.reproposals} re-proposal(s) for "
                f"these incidents, the most distill makes ({MAX_REPROPOSALS}); the refusal stands: a person edits the "
                "rule or deletes it to try again")


@dataclass
class Refusals:
    """What the ledger says of the proposals: those distill may answer again, and those whose refusal stands."""

    open: list[Refused] = field(default_factory=list)
    stand: list[Refused] = field(default_factory=list)
    skipped_lines: int = 0  # ledger lines that did not parse

    @classmethod
    def of(cls, refused: list[Refused], skipped: int = 0) -> "Refusals":
        return cls([r for r in refused if r.open], [r for r in refused if not r.open and r.reason_kind in RETRYABLE],
                   skipped)

    def for_group(self, ids: list[str]) -> list[Refused]:
        wanted = set(ids)
        return [r for r in self.open if wanted & set(r.cites)]


def retryable(record: ledger.GateRecord) -> bool:
    return record.decision == "reject" and record.reason_kind in RETRYABLE


def local(book, root: Path) -> Refusals:
    """The pending proposals whose last gate refused them for a retryable reason, from ``.replaybook/gates.jsonl``."""
    records, skipped = ledger.read(root)
    last: dict[str, ledger.GateRecord] = {}
    for record in records:  # oldest first: the last gate of a rule wins
        last[record.rule_id] = record
    archived = [e.rule for e in book.entries(("archive",)) if e.rule.retired_reason == REFUSED]
    out = []
    for entry in book.entries(("proposed",)):
        record = last.get(entry.rule.id)
        if record is None or record.decision != "reject":
            continue
        cites = set(entry.rule.cites)
        used = sum(bool(cites & set(r.cites)) for r in archived)
        out.append(Refused(entry.rule.id, entry.rule.rule, tuple(entry.rule.cites), record.reason_kind, record.reason,
                           tuple(entry.rule.task_types), tuple(entry.rule.paths), used,
                           path=book.change_path(entry.path)))
    return Refusals.of(out, skipped)


def defused(text: str, limit: int = REASON_CHARS) -> str:
    """Hostile text for a prompt: one line, cut, neutralised, and no ``${{`` or ``-->`` left whole."""
    line = neutralise(one_line(text, limit))
    return line.replace("${{", f"${ZWSP}{{{{").replace("-->", f"--{ZWSP}>")


def prompt_text(refused: Refused) -> str:
    """One refusal as the re-proposal prompt shows it (inside a ``<refusal>`` fence)."""
    unknown = [] if refused.scope_known else [
        "scope: not recorded by the gate, so no scope can be shown narrower: propose a different rule, not this one"]
    return "\n".join([f"refused rule {refused.rule_id}",
                      key(refused.rule, refused.task_types, refused.paths, refused.cites, refused.reason_kind),
                      *unknown,
                      f"gate reason: {defused(refused.reason)}",
                      f"re-proposals so far: {refused.reproposals} of {MAX_REPROPOSALS}"])


def key(rule: str, task_types, paths, cites, kind: str) -> str:
    """The lines of a refusal block that name the rule, its scope, its cites and the verdict: what the SIMULATED
    distiller's scripted answers look for (``bot.cli.demo_loop.simulated_answers``). A scope is hostile (it comes
    from a rule file on a branch): each item is defused; None is an unknown scope."""
    return "\n".join([f"rule: {defused(rule, 500)}",
                      f"task_types: {_scope(task_types)}; paths: {_scope(paths)}",
                      f"cites: {', '.join(defused(c, 80) for c in cites)}",
                      f"gate verdict: {kind}"])


def _scope(values) -> str:
    if values is None:
        return "unknown"
    # as a list's repr, but the defused text itself (repr would spell a zero-width space as \u200b)
    return "[" + ", ".join(f"'{defused(v, 120)}'" for v in values) + "]" if values else "all"


def hint(kind: str) -> str:
    return _HINTS.get(kind, "")


def narrower(task_types: list[str], paths: list[str], refused: Refused) -> bool:
    """Is (task_types, paths) a strictly narrower scope than the refused rule's?

    Never when the refused rule's scope is unknown (a GitHub gate comment from before the gate recorded it, or a
    scope too wide to record): any scope might be the very one the gate refused, and accepting would spend a
    re-proposal, and a gate, on the same rule again. So the same advice is refused as a repeat, and only a
    different rule answers such a refusal; the prompt says the scope is unknown.
    """
    if not refused.scope_known:
        return False

    def tighter(new: list[str], old: tuple[str, ...]) -> bool:
        return bool(new) and (not old or set(new) < set(old))

    same = (set(task_types) == set(refused.task_types) and set(paths) == set(refused.paths))
    return not same and (tighter(task_types, refused.task_types) or tighter(paths, refused.paths))


def archived(book, refused: Refused, replaced_by: str, on: date) -> Change:
    """The refused proposal moved from ``proposed/`` to ``archive/``, stamped ``retired_reason: refused``."""
    assert refused.path is not None
    text = book.tree.read(refused.path)
    if text is None:
        return Change()
    target = book.path_of("archive", Path(refused.path).name)
    if book.tree.read(target) is not None:
        from bot.distill.spec_change import Refused as _Refused

        raise _Refused(f"{target} already exists; an archived rule is never overwritten (move it away to re-propose)")
    for key, value in (("retired", on.isoformat()), ("retired_reason", REFUSED),
                       ("refused_reason", json.dumps(f"{refused.reason_kind}: {one_line(refused.reason, 300)}")),
                       ("replaced_by", replaced_by)):
        text = yamlfile.set_top_level(text, key, value)
    Rule.model_validate(yamlfile.parse(book.root / target, text, what="rule").data)
    return Change({target: text, refused.path: None})
