"""Rule ids: ``rule-NNNN``, unique across every state and never reused.

The one place ids are parsed, formatted and handed out. An id is free when it
is above every id in the playbook (proposed, admitted, archived), every id
reserved elsewhere (on GitHub: the bot's rule PRs, open or closed) and the
high-water mark distill keeps in ``.replaybook/distill-ids.json`` (ids it
handed out whose files were later deleted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

PATTERN = re.compile(r"rule-\d{4,}")
MARKS_FILE = ".replaybook/distill-ids.json"


def is_rule_id(text: str) -> bool:
    return bool(PATTERN.fullmatch(text))


def number(rule_id: str) -> int:
    return int(rule_id.split("-", 1)[1])


def format_id(n: int) -> str:
    return f"rule-{n:04d}"


def highest(ids: Iterable[str]) -> int:
    """The highest number among ``ids`` that are rule ids; 0 for none."""
    return max((number(i) for i in ids if is_rule_id(i)), default=0)


def next_free(used: Iterable[str], *, reserved: Iterable[str] = (), floor: int = 0) -> str:
    """The id after every used or reserved one, and after ``floor``."""
    return format_id(max(highest(used), highest(reserved), floor) + 1)


class Allocator:
    """Hands out rule and spec-change ids above everything used, reserved and handed out before.

    ``marks`` is the saved high-water mark (see :func:`read_marks`); a caller
    that writes the ids it handed out saves :meth:`marks` with its change.
    """

    def __init__(self, used_rules: Iterable[str], used_specs: Iterable[int] = (), *,
                 reserved: Iterable[str] = (), marks: dict | None = None):
        marks = marks or {}
        self.rule = max(highest(used_rules), highest(reserved), int(marks.get("rule", 0)))
        self.spec = max(max(used_specs, default=0), int(marks.get("spec", 0)))
        self.changed = False

    def next_rule(self) -> str:
        self.rule += 1
        self.changed = True
        return format_id(self.rule)

    def next_spec(self) -> str:
        self.spec += 1
        self.changed = True
        return f"spec-{self.spec:04d}"

    def marks(self) -> str:
        return json.dumps({"rule": self.rule, "spec": self.spec})


def read_marks(root: Path) -> dict:
    try:
        marks = json.loads((Path(root) / MARKS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError, OSError):
        return {}
    return marks if isinstance(marks, dict) else {}
