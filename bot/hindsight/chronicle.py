"""The chronicle: a task's key nodes, in order, each in 50 characters or fewer.

A node is a record with a ``kind`` discriminator:

- ``first_failure``: the first event whose ``result.status`` is ``failed`` or
  ``error`` (only the first; the chronicle also counts all failures).
- ``hesitation``: the agent switched between alternatives. Either the
  decision says so (``decision.switched: true``), or three consecutive
  decisions over the same option set (``chosen_action`` plus
  ``alternatives``, at least two options) choose A, then B, then A again.
  Decisions without ``alternatives`` (e.g. plain tool calls) never make one.
- ``anomaly``: an output departed from the expected type. Either
  ``result.anomaly: true``, or ``result.expected_type`` names a JSON type
  (object, array, string, number, integer, boolean, null, or the Python
  names dict, list, str, int, float, bool, None) and ``result.output`` (or
  ``result.actual_type``) is of another type.

Events are read in time order (ties: insertion order). Odd shapes (a result
that is not an object, an unhashable action) are skipped, never fatal.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from bot._util.text_safety import one_line
from bot.errors import BadInput
from bot.hindsight.traces import Outline, StoredEvent, TraceStore

NodeKind = Literal["first_failure", "hesitation", "anomaly"]
SUMMARY_CHARS = 50

_TYPE_NAMES = {
    "object": "object", "dict": "object", "mapping": "object",
    "array": "array", "list": "array", "tuple": "array",
    "string": "string", "str": "string",
    "number": "number", "float": "number",
    "integer": "integer", "int": "integer",
    "boolean": "boolean", "bool": "boolean",
    "null": "null", "none": "null",
}


@dataclass(frozen=True, slots=True)
class Node:
    kind: NodeKind
    index: int
    seq: int
    timestamp: str
    event_type: str
    summary: str
    #: seqs of the events that make the node (three for a pattern hesitation).
    evidence: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "seq": self.seq, "timestamp": self.timestamp,
                "event_type": self.event_type, "summary": self.summary}


@dataclass(frozen=True)
class Chronicle:
    task_id: str
    events: int
    first: str | None
    last: str | None
    failures: int
    nodes: list[Node] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "events": self.events, "first": self.first, "last": self.last,
                "failures": self.failures, "nodes": [n.to_dict() for n in self.nodes]}

    def to_text(self) -> str:
        head = (f"{self.task_id}: {self.events} events, {self.failures} failed, {len(self.nodes)} key nodes"
                + (f" ({self.first} .. {self.last})" if self.first else ""))
        lines = [head]
        lines += [f"#{n.index:<5} {n.timestamp}  {n.kind:<13} {n.summary}" for n in self.nodes]
        return "\n".join(lines)


def build(store: TraceStore, task_id: str) -> Chronicle:
    """The chronicle of one stored task; an unknown task is ``BadInput``.

    Detection reads only the outline SQLite extracts; the few node events
    are then loaded whole to be summarised.
    """
    outline = store.outline(task_id)
    if not outline:
        raise BadInput(f"no events for task {task_id!r}; `replaybook trace list` shows the recorded tasks")
    found = _detect(outline)
    return _chronicle(task_id, outline, found, store.events_at(f[2].seq for f in found))


def chronicle(task_id: str, events: Sequence[StoredEvent]) -> Chronicle:
    """The chronicle of events already in memory (in time order)."""
    outline = [Outline.of(e) for e in events]
    return _chronicle(task_id, outline, _detect(outline), {e.seq: e for e in events})


def key_nodes(events: Sequence[StoredEvent]) -> list[Node]:
    return chronicle("", events).nodes


def must_keep(outline: Sequence[Outline]) -> set[int]:
    """Seqs sampling never drops: failures, anomalies, the events behind every node, first and last."""
    keep = {o.seq for o in outline if o.failed or o.anomaly}
    for _, _, o, _, evidence in _detect(outline):
        keep.update(evidence or (o.seq,))
    if outline:
        keep.update((outline[0].seq, outline[-1].seq))
    return keep


def _chronicle(task_id: str, outline: Sequence[Outline], found: list, events: dict[int, StoredEvent]) -> Chronicle:
    nodes = [Node(kind, index, o.seq, o.timestamp, o.event_type, shorten(_summary(kind, o, detail, events[o.seq])),
                  evidence) for kind, index, o, detail, evidence in found]
    return Chronicle(task_id, len(outline), outline[0].timestamp if outline else None,
                     outline[-1].timestamp if outline else None, sum(1 for o in outline if o.failed), nodes)


def shorten(text: str, limit: int = SUMMARY_CHARS) -> str:
    return one_line(text, limit)


# -- detectors -------------------------------------------------------------------------------


_Found = tuple  # (kind, index, outline, detail, evidence seqs)


def _detect(outline: Sequence[Outline]) -> list[_Found]:
    found: list[_Found] = []
    failed = False
    window: deque[tuple[Outline, str, frozenset[str]]] = deque(maxlen=3)
    for index, o in enumerate(outline):
        if not failed and o.failed:
            failed = True
            found.append(("first_failure", index, o, None, ()))
        if o.has_decision:
            hesitation = _hesitation(o, window)
            if hesitation:
                found.append(("hesitation", index, o, *hesitation))
        anomaly = _anomaly(o)
        if anomaly:
            found.append(("anomaly", index, o, anomaly, ()))
    return found


def _hesitation(o: Outline, window: deque) -> tuple[str, tuple[int, ...]] | None:
    """(detail, evidence seqs) when this decision completes a hesitation."""
    chosen = _label(o.chosen)
    if o.switched:
        window.clear()
        return (f"switched to {chosen}" if chosen else "switched action", ())
    options = frozenset([chosen, *map(_label, o.alternatives)]) if chosen and o.alternatives is not None else None
    if not options or len(options) < 2:
        window.clear()
        return None
    window.append((o, chosen, options))
    if len(window) < 3:
        return None
    (first, a, o1), (second, b, o2), (_, c, o3) = window
    if a == c != b and o1 == o2 == o3:
        window.clear()  # A→B→A→B is one hesitation, then a new one may start
        return (f"switched {a}→{b}→{a}", (first.seq, second.seq, o.seq))
    return None


def _anomaly(o: Outline) -> str | None:
    expected = _type_name(o.expected_type)
    actual = _type_name(o.actual_type) if o.actual_type is not None else o.output_type
    if expected and actual and not _fits(actual, expected):
        return f"got {actual}, expected {expected}"
    return "anomalous result" if o.anomaly else None


def _summary(kind: str, o: Outline, detail: str | None, event: StoredEvent) -> str:
    if kind == "first_failure":
        result = event.result if isinstance(event.result, dict) else {}
        error = result.get("error_type") or ""
        message = result.get("error_message") or ""
        return f"{_what(event)} failed: " + (": ".join(str(p) for p in (error, message) if p) or str(o.status))
    if kind == "anomaly":
        return f"{_what(event)}: {detail}"
    return str(detail)


def _fits(actual: str, expected: str) -> bool:
    return actual == expected or (expected == "number" and actual == "integer")


def _type_name(value: Any) -> str | None:
    return _TYPE_NAMES.get(value.strip().lower()) if isinstance(value, str) else None


def _what(event: StoredEvent) -> str:
    """The action an event is about: the chosen action, a tool name, a command line, else its type."""
    decision = event.decision if isinstance(event.decision, dict) else {}
    given = event.input if isinstance(event.input, dict) else {}
    if decision.get("chosen_action"):
        return _label(decision["chosen_action"])
    if isinstance(given.get("argv"), list) and given["argv"]:
        return " ".join(map(str, given["argv"]))
    if isinstance(given.get("name"), str):
        return given["name"]
    return event.event_type


def _label(value: Any) -> str:
    return value if isinstance(value, str) else str(value) if value is not None else ""
