"""Spec changes: when incidents trace back to an ambiguous task spec, distill proposes a change
to the task spec template instead of a rule.

A spec change is a markdown file ``playbook/spec-changes/spec-NNNN.md`` for a person to read and
carry into the template; nothing applies it. Its first line is a hidden marker,
``<!-- replaybook:spec-change {"id": …, "cites": […]} -->``, so the incidents it cites count as
covered (distill does not propose for them again). The model's text is fenced as inert blocks
(``bot._util.text_safety.block``): it cannot close the fence or add headings of its own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from bot._util.text_safety import block
from bot.change import Change, OverlayTree

if TYPE_CHECKING:
    from bot.distill.grouping import Group
    from bot.incident.store import Incident
    from bot.playbook.store import Playbook

SPEC_DIR = "spec-changes"
MAX_SPEC_CHARS = 4000
SPEC_MARKER = "<!-- replaybook:spec-change "
_SPEC_NAME = re.compile(r"^spec-(\d{4,})\.md$")


class Refused(Exception):
    """A proposal the constraints refuse; the message is the reason (distill reports it)."""


class SpecChangeAnswer(BaseModel):
    """The distiller's answer when the fix belongs in the task spec template."""

    model_config = ConfigDict(extra="ignore")  # a hostile answer's extra keys reach nothing

    kind: Literal["spec_change"]
    cites: list[str]
    template_change: str
    why: str


@dataclass
class SpecChange:
    """A spec change in distill's report; ``path`` is None in a dry run."""

    id: str
    group: str
    cites: list[str]
    template_change: str
    why: str
    path: str | None


@dataclass
class SpecPlan:
    """A checked answer, before an id is allocated and its file written."""

    group: "Group"
    cites: list[str]
    template_change: str
    why: str


class SpecIds(Protocol):
    def next_spec(self) -> str: ...


def plan(group: "Group", answer: SpecChangeAnswer) -> SpecPlan:
    """The answer checked: both texts say something, neither is too long (else :class:`Refused`)."""
    change, why = answer.template_change.strip(), answer.why.strip()
    if not change or not why:
        raise Refused("spec change: `template_change` and `why` must both say something")
    if len(change) > MAX_SPEC_CHARS or len(why) > MAX_SPEC_CHARS:
        raise Refused(f"spec change: keep `template_change` and `why` under {MAX_SPEC_CHARS} characters each")
    return SpecPlan(group, answer.cites, change, why)


def planned(spec: SpecPlan, cites: list[str], ids: SpecIds, book: "Playbook", today: date,
            pending: Change) -> tuple[SpecChange, Change]:
    """The spec change's file as a change, under the next id whose file neither exists nor is pending."""
    tree = OverlayTree(book.tree, pending)
    by_id = {i.id: i for i in spec.group.incidents}
    while True:
        spec_id = ids.next_spec()
        path = book.path_of(SPEC_DIR, f"{spec_id}.md")
        if tree.read(path) is None:
            break
    text = markdown(spec_id, [by_id[c] for c in cites], spec, today)
    record = SpecChange(spec_id, spec.group.key, cites, spec.template_change, spec.why, str(book.root / path))
    return record, Change({path: text})


def markdown(spec_id: str, incidents: list["Incident"], spec: SpecPlan, today: date) -> str:
    marker = SPEC_MARKER + json.dumps({"id": spec_id, "cites": [i.id for i in incidents]}) + " -->"
    lines = [marker, f"# {spec_id}: a change to the task spec template", "",
             f"Proposed by `replaybook distill` on {today.isoformat()}: these incidents trace back to an ambiguous "
             "task spec, so the fix belongs in the template, not in the playbook.", "", "## Cited incidents", ""]
    for i in incidents:
        lines.append(f"- `{i.id}` ({i.failure_class}): task {json.dumps(i.task)}; believed {json.dumps(i.believed)}; "
                     f"actual {json.dumps(i.actual)}")
    lines += ["", "## Proposed template change", "", block(spec.template_change), "", "## Why", "",
              block(spec.why), ""]
    return "\n".join(lines)


def highest_number(playbook_dir: Path) -> int:
    """The highest spec-NNNN number with a file, 0 when there is none."""
    folder = playbook_dir / SPEC_DIR
    return max((int(m.group(1)) for p in (folder.iterdir() if folder.is_dir() else [])
                if (m := _SPEC_NAME.match(p.name))), default=0)


def cited(playbook_dir: Path) -> dict[str, str]:
    """Incident id -> the spec change whose marker cites it (files without a readable marker are skipped)."""
    out: dict[str, str] = {}
    folder = playbook_dir / SPEC_DIR
    for path in sorted(folder.glob("spec-*.md")) if folder.is_dir() else []:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        if first.startswith(SPEC_MARKER) and first.endswith("-->"):
            try:
                meta = json.loads(first[len(SPEC_MARKER):-3])
            except ValueError:
                continue
            for cite in meta.get("cites", []):
                out.setdefault(str(cite), f"{path.stem} (spec change)")
    return out
