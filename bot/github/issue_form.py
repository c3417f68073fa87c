"""Incident issues: reading the issue form, and the bot's normalised YAML block.

GitHub renders an issue form as ``### <label>`` headings, each followed by
its value; an empty field reads ``_No response_`` and a textarea with
``render:`` comes fenced. People edit the body afterwards, so it is parsed
again on every edit, and nothing here trusts its layout: unknown headings,
CRLF line endings, headings inside code fences and a missing field are all
expected.

The bot appends the parsed incident as a fenced ``yaml`` block after the
hidden marker ``<!-- replaybook:incident-yaml -->`` and later replaces that
block in place, keeping every other byte the person wrote.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bot._util import records, yamlfile
from bot.errors import BadInput
from bot.incident.store import FAILURE_CLASSES, Incident

MARKER = "<!-- replaybook:incident-yaml -->"
NO_RESPONSE = "_No response_"

#: (label in the issue form, Incident field), in form order.
FIELDS: tuple[tuple[str, str], ...] = (
    ("Task", "task"),
    ("Task type", "task_type"),
    ("Failure class", "failure_class"),
    ("Trigger", "trigger"),
    ("What the agent believed", "believed"),
    ("What was actually true", "actual"),
    ("Cost (minutes)", "cost_minutes"),
    ("Repeat of", "repeat_of"),
    ("Evidence", "evidence"),
)
LABEL_OF = {field: label for label, field in FIELDS}
_FIELD_OF = {label.lower(): field for label, field in FIELDS}

_HEADING = re.compile(r"^ {0,3}###\s+(.*?)\s*#*\s*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_COST = re.compile(r"^(\d+)\s*(?:m|min|mins|minutes?)?\.?$", re.IGNORECASE)


# ------------------------------------------------------------------ fences and the bot's block


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _block_spans(lines: list[str]) -> list[tuple[int, int, int]]:
    """(marker, opening fence, last) line indexes of each block; ``last`` is inclusive.

    Only a marker outside every other fence counts: the bot's own structured
    part, never a copy planted in quoted text. An unclosed block runs to the
    end of the body.
    """
    spans, i = [], 0
    while i < len(lines):
        other = _FENCE_OPEN.match(lines[i].rstrip("\r\n"))
        if other is not None:  # someone else's fence (a log excerpt): a marker inside it is text, not the block
            i += 1
            while i < len(lines) and not _closes(lines[i], other.group(1)):
                i += 1
            i += 1
            continue
        if lines[i].rstrip() == MARKER:
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            opening = _FENCE_OPEN.match(lines[j].rstrip("\r\n")) if j < len(lines) else None
            if opening:
                k = j + 1
                while k < len(lines) and not _closes(lines[k], opening.group(1)):
                    k += 1
                spans.append((i, j, min(k, len(lines) - 1)))
                i = k + 1
                continue
        i += 1
    return spans


def strip_block(body: str | None) -> str:
    """The body without the bot's block(s), newlines normalised: what the person wrote."""
    lines = (body or "").replace("\r\n", "\n").replace("\r", "\n").splitlines(keepends=True)
    for first, _, last in reversed(_block_spans(lines)):
        del lines[first : last + 1]
    return "".join(lines).strip()


def normalised_block(incident: Incident) -> str:
    """The marker and a fenced ``yaml`` block holding ``incident``."""
    text = yaml.safe_dump(incident.to_yaml_data(), sort_keys=False, allow_unicode=True, width=88)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)  # longer than any run inside, so text cannot close it
    return f"{MARKER}\n{fence}yaml\n{text}{fence}\n"


def replace_block(body: str | None, incident: Incident) -> str:
    """``body`` with the bot's block replaced in place (or appended), every other byte kept.

    Extra copies of the block are removed: there is only ever one.
    """
    body = body or ""
    block = normalised_block(incident)
    lines = body.splitlines(keepends=True)
    spans = _block_spans(lines)
    if not spans:
        return (body.rstrip() + "\n\n" if body.strip() else "") + block
    for first, _, last in reversed(spans[1:]):
        del lines[first : last + 1]
    first, _, last = spans[0]
    after = "".join(lines[last + 1 :])
    return "".join(lines[:first]) + block + after


def has_block(body: str | None) -> bool:
    """Whether ``body`` holds the bot's normalised block."""
    return bool(_block_spans((body or "").replace("\r\n", "\n").splitlines(keepends=True)))


def read_block(body: str | None, *, where: str) -> dict[str, Any] | None:
    """The mapping in the bot's block, or None when there is no block; BadInput when it is broken."""
    lines = (body or "").replace("\r\n", "\n").splitlines(keepends=True)
    spans = _block_spans(lines)
    if not spans:
        return None
    _, opening, last = spans[0]
    closed = last > opening and _closes(lines[last], _FENCE_OPEN.match(lines[opening]).group(1))
    inner = lines[opening + 1 : last if closed else last + 1]
    doc = yamlfile.parse(Path(where), "".join(inner), what="incident block")
    return doc.data


# ------------------------------------------------------------------ the form


def sections(body: str | None) -> tuple[dict[str, str | None], list[str]]:
    """Each known form field's value (None for ``_No response_``), and problems.

    Headings inside code fences are content, not sections, and unknown
    headings belong to the field above them.
    """
    text = strip_block(body)
    found: dict[str, list[str]] = {}
    problems: list[str] = []
    current: str | None = None
    fence: str | None = None
    for line in text.split("\n"):
        if fence:
            if _closes(line, fence):
                fence = None
        elif (opening := _FENCE_OPEN.match(line)) is not None:
            fence = opening.group(1)
        elif (heading := _HEADING.match(line)) and heading.group(1).lower() in _FIELD_OF:
            current = _FIELD_OF[heading.group(1).lower()]
            if current in found:
                problems.append(f"`{LABEL_OF[current]}` appears twice; keep one `### {LABEL_OF[current]}` section")
            found[current] = []
            continue
        if current:
            found[current].append(line)
    return {field: _value(lines) for field, lines in found.items()}, problems


def _value(lines: list[str]) -> str | None:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    if len(lines) >= 2 and (opening := _FENCE_OPEN.match(lines[0])) and _closes(lines[-1], opening.group(1)):
        lines = lines[1:-1]  # a textarea with `render:` comes fenced
    text = "\n".join(lines).strip()
    return None if not text or text == NO_RESPONSE else text


def _convert(field: str, value: str, problems: list[str]) -> Any:
    label = LABEL_OF[field]
    if field == "failure_class":
        slug = re.sub(r"[\s-]+", "_", value.strip().lower())
        return next((c for c in FAILURE_CLASSES if slug == c or slug.startswith(c + "_")), value)
    if field == "cost_minutes":
        match = _COST.match(value.strip())
        if not match:
            problems.append(f"`{label}`: got {value!r:.60}; write a whole number of minutes, e.g. 20")
            return None
        return int(match.group(1))
    if field == "task_type":
        return value.strip().lower()
    if field == "repeat_of":
        return _repeat_of(value)
    return value


def _repeat_of(value: str) -> str | list[str]:
    """``rule-0004``, ``#12, #15`` (issues: gh-12, gh-15) or ``none``, as the incident's ``repeat_of``."""
    text = value.strip()
    if text.lower() in ("none", "no", "-", "[]"):
        return []
    if re.fullmatch(r"\[?\s*rule-\d{4,}\s*\]?", text, re.IGNORECASE):
        return text.strip("[] ").lower()
    return [f"gh-{p[1:]}" if re.fullmatch(r"#\d+", p) else p.lower() for p in re.split(r"[\s,]+", text) if p]


def parse_incident_issue(
    body: str | None, *, number: int, created_at: str, html_url: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The incident an issue describes, and what is wrong with it.

    Returns the incident's data (validated through ``Incident`` when the
    problem list is empty) and one problem per field, naming the form label
    and how to fix it. The person's sections win over the bot's block; an
    issue with no sections is read from the one fenced ``yaml`` block its
    author wrote (the contract's fields, checked one by one as for a form),
    else from the bot's block (an issue the bot opened).
    """
    values, problems = sections(body)
    if not values:
        plain = _plain_yaml(body, number=number)
        if plain is None:
            return _from_block(body, number=number)
        data, problems = plain
        if problems:
            return data, problems
        data = {**data, "id": f"gh-{number}"}
        data.setdefault("source", {"kind": "issue_form", "url": html_url, "key": f"issue-{number}"})
        data.setdefault("created", created_at)
        for key, value in _kept_from_block(body, number).items():
            data.setdefault(key, value)
        return _validated(data, [])
    data: dict[str, Any] = {"id": f"gh-{number}"}
    for _, field in FIELDS:
        value = values.get(field)
        if value is not None:
            converted = _convert(field, value, problems)
            if converted is not None:
                data[field] = converted
    data["source"] = {"kind": "issue_form", "url": html_url, "key": f"issue-{number}"}
    data["created"] = created_at
    for key, value in _kept_from_block(body, number).items():
        data.setdefault(key, value)
    data = {k: v for k, v in data.items() if v is not None}
    return _validated(data, problems)


# A blank "Repeat of" keeps what the bot recorded; "none" clears it.
_FORM_OWNS = {field for _, field in FIELDS if field != "repeat_of"} | {"id", "source", "created"}


def _kept_from_block(body: str | None, number: int) -> dict[str, Any]:
    """Fields the form has no section for (``resolved_by``, ``triage``…), kept from the bot's block.

    Without this, a person's edit would reset what the bot recorded since.
    """
    try:
        data = read_block(body, where=f"issue #{number} yaml block") or {}
    except BadInput:
        return {}  # a broken block is rewritten from the sections
    return {k: v for k, v in data.items() if k not in _FORM_OWNS}


def _plain_yaml(body: str | None, *, number: int) -> tuple[dict[str, Any], list[str]] | None:
    """The incident a person wrote as one fenced ``yaml`` block (no form sections), or None when there is none.

    The bot's own block is not theirs and is left out first; two yaml blocks are a problem, not a guess.
    """
    lines = strip_block(body).split("\n")
    blocks, i = [], 0
    while i < len(lines):
        opening = _FENCE_OPEN.match(lines[i])
        if opening is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not _closes(lines[j], opening.group(1)):
            j += 1
        if opening.group(2).strip().lower() in ("yaml", "yml"):
            blocks.append("\n".join(lines[i + 1:j]) + "\n")
        i = j + 1
    if not blocks:
        return None
    if len(blocks) > 1:
        return {}, [f"issue #{number} holds {len(blocks)} yaml blocks; keep the incident in one"]
    try:
        doc = yamlfile.parse(Path(f"issue #{number} yaml block"), blocks[0], what="incident block")
    except BadInput as exc:
        return {}, [exc.message, *exc.problems]
    return doc.data, []


def _from_block(body: str | None, *, number: int) -> tuple[dict[str, Any], list[str]]:
    try:
        data = read_block(body, where=f"issue #{number} yaml block")
    except BadInput as exc:
        return {}, [exc.message, *exc.problems]
    if data is None:
        labels = ", ".join(f"### {label}" for label, _ in FIELDS[:1] + FIELDS[4:6])
        return {}, [f"issue #{number} has no incident form sections ({labels}, …) and no ```yaml block; open it "
                    "with the Incident form, or write the incident's fields as one ```yaml block"]
    return _validated(data, [])


def _validated(data: dict[str, Any], problems: list[str]) -> tuple[dict[str, Any], list[str]]:
    try:
        incident = Incident.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            field = str(err["loc"][0]) if err["loc"] else "(top level)"
            name = f"`{LABEL_OF[field]}` ({field})" if field in LABEL_OF else f"`{field}`"
            hint = "; fill it in on the issue" if err["type"] == "missing" else ""
            problems.append(f"{name}: {records.error_message(err)}{hint}")
        return data, problems
    if problems:
        return data, problems
    return incident.to_yaml_data(), []


def incident_from_issue(body: str | None, *, number: int, created_at: str, html_url: str | None = None) -> Incident:
    """The valid incident an issue describes, or ``BadInput`` listing every problem."""
    data, problems = parse_incident_issue(body, number=number, created_at=created_at, html_url=html_url)
    if problems:
        raise BadInput(f"issue #{number}: the incident form has {len(problems)} problem(s)", problems=problems)
    return Incident.model_validate(data)


__all__ = [
    "FIELDS",
    "MARKER",
    "has_block",
    "NO_RESPONSE",
    "incident_from_issue",
    "normalised_block",
    "parse_incident_issue",
    "read_block",
    "replace_block",
    "sections",
    "strip_block",
]
