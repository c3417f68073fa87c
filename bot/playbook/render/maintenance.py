"""The maintenance PR's part in rendering: the files to change, planned against the checkout."""

from __future__ import annotations

from pathlib import Path

from bot.errors import BadInput
from bot.playbook.store import Playbook


def rendered_fixes(book: Playbook, root: Path, specs: list[str], fixed: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """(relative path -> new text, None to delete) for every render target, and what a person must still fix.

    ``book`` is the fixed copy of the playbook; the targets' current bytes
    are read from ``root`` (the checkout, never written). A target that would
    pass its host's limit is left for a person, with the reason.
    """
    if not specs:
        return {}, []
    from bot.playbook import render

    try:
        changes = render.render(book, root, specs, write=False)
    except BadInput as exc:
        return {}, exc.problems or [exc.message]
    if changes:
        fixed.append("renders " + ", ".join(c.rel for c in changes))
    try:
        return dict(render.change(changes).files), []
    except BadInput as exc:
        return {}, [exc.message]
