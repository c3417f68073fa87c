"""The system prompt a replayed agent gets: the playbook, rendered as PLAYBOOK.md is.

One builder for ``replaybook replay --rule`` and the gate, so a rule replayed by hand meets the
agent in the same words, headings and order as when the gate decides on it: the admitted rules,
grouped by task type, with the candidate among them (it takes the place of an admitted rule of
its id, when it is one being judged again).
"""

from __future__ import annotations

from bot.playbook.rule import Rule
from bot.playbook.store import Playbook


def system_prompt(book: Playbook, candidate: Rule | None = None) -> str:
    """The admitted rules of ``book``, with ``candidate`` among them when given."""
    if candidate is None:
        return book.render_text(book.admitted())
    return book.render_text(_others(book, candidate) + [candidate])


def baseline_prompt(book: Playbook, candidate: Rule) -> str:
    """The admitted rules without ``candidate``: what the gate compares the candidate against."""
    return book.render_text(_others(book, candidate))


def _others(book: Playbook, candidate: Rule) -> list[Rule]:
    return [r for r in book.admitted() if r.id != candidate.id]
