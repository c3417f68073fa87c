"""Incidents: one failed run, stated as what the agent believed and what was true.

``IncidentStore`` owns the ``incidents/`` folder: one ``<id>.yaml`` per
incident, written atomically, never clobbered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from bot._util import records, yamlfile
from bot.change import Change, relative
from bot.errors import BadInput

FailureClass = Literal["wrong_assumption", "bad_tool_use", "scope_creep", "env", "unknown"]
ResolvedBy = Literal["human", "agent", "rule", "unresolved"]
SourceKind = Literal["workflow_run", "pull_request", "review", "issue_form", "transcript", "manual"]

FAILURE_CLASSES: tuple[str, ...] = FailureClass.__args__  # type: ignore[attr-defined]
RESOLVERS: tuple[str, ...] = ResolvedBy.__args__  # type: ignore[attr-defined]
SOURCE_KINDS: tuple[str, ...] = SourceKind.__args__  # type: ignore[attr-defined]

INCIDENT_ID = r"^[a-z0-9][a-z0-9-]{0,63}$"
# A stem like 2026-07-14-0932 (or 2026-07-14-0932-2, a second one that minute) says when the incident was created.
_STAMP_STEM = re.compile(r"^(\d{4})-(\d\d)-(\d\d)-(\d\d)(\d\d)(?:-\d+)?$")
ONE_LINE_MAX = 300
EVIDENCE_MAX = 4000
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*File \".*\", line \d+")


class Source(BaseModel):
    """Where an incident came from; ``key`` makes capture idempotent."""

    model_config = ConfigDict(extra="allow", str_strip_whitespace=True)

    kind: SourceKind
    url: str | None = None
    key: str | None = Field(default=None, description="Idempotency key: one incident per key.")
    content_key: str | None = Field(default=None, description="The content hash's key, when `key` was given "
                                    "explicitly: the same evidence under another key is not stored twice.")


def one_line(value: str, what: str) -> str:
    """Validate a belief-delta line: one line, short, not a stack trace."""
    if not value:
        raise ValueError(f"is empty; state what the agent {what} in one line")
    if "\n" in value or "\r" in value:
        count = len(value.splitlines())
        raise ValueError(
            f"has {count} lines; it must be ONE line stating what the agent {what} "
            "(move logs and stack traces to `trigger`)"
        )
    if _TRACEBACK.search(value):
        raise ValueError(f"looks like a stack trace; state what the agent {what} in plain words")
    if len(value) > ONE_LINE_MAX:
        raise ValueError(f"is {len(value)} characters; keep it to one line of at most {ONE_LINE_MAX}")
    return value


NOT_TEXT_SHARE = 0.3  # this much of it NUL, control or U+FFFD characters: decoded from a binary file, not text
_TEXT_CONTROLS = frozenset("\t\n\r\x1b\x08\x0c")  # tabs, line ends, ANSI colours, backspace: logs hold them


def not_text(value: str) -> str | None:
    """Why ``value`` is not text (mostly NUL, control or U+FFFD replacement characters), or None.

    A log may hold a stray NUL or a byte that is not UTF-8; random bytes are about half such characters."""
    bad = sum(1 for c in value if c == "\ufffd" or (c < " " and c not in _TEXT_CONTROLS))
    if bad >= 3 and bad > NOT_TEXT_SHARE * len(value):
        return (f"{bad} of {len(value)} characters are NUL, control or U+FFFD characters (bytes that were not "
                "UTF-8 text): a binary file")
    return None


#: The belief delta's two lines, checked by :func:`one_line` (incidents and capture's analysis share them).
Believed = Annotated[str, AfterValidator(lambda value: one_line(value, "believed"))]
Actual = Annotated[str, AfterValidator(lambda value: one_line(value, "found to be actually true"))]


def _file_defaults(schema: dict) -> None:
    """In a file, ``id`` and ``created`` may be left out: the loader takes them from the file name."""
    schema["required"] = [f for f in schema.get("required", []) if f not in ("id", "created")]


class Incident(records.Record):
    """One failed run as a belief delta (see docs/formats.md)."""

    model_config = ConfigDict(**records.Record.model_config, json_schema_extra=_file_defaults)
    kind: ClassVar[str] = "incident"

    id: str = Field(pattern=INCIDENT_ID, description='File stem locally; "gh-123" for issue #123.')
    task: str = Field(min_length=1, description="What the agent was asked to do.")
    task_type: str | None = Field(default=None, pattern=records.SLUG, description="Scopes which rules/lessons a run gets.")
    failure_class: FailureClass
    trigger: str = Field(min_length=1, description="What made the failure visible (CI, review, a person).")
    believed: Believed = Field(description="ONE line: what the agent assumed.")
    actual: Actual = Field(description="ONE line: what was true.")
    cost_minutes: int = Field(default=0, ge=0, description="Whole minutes of human review/cleanup.")
    resolved_by: ResolvedBy = "unresolved"
    source: Source | None = None
    created: datetime = Field(description="UTC time, ISO 8601, e.g. 2026-07-14T09:32:00Z.")
    triage: bool = Field(default=False, description="True when capture could not fill the belief delta: a person should.")
    triage_reason: str | None = Field(default=None, max_length=ONE_LINE_MAX,
                                      description="Why capture left the belief delta to a person (no model, a bad "
                                                  "answer, an answer not grounded in the evidence).")
    evidence: str | None = Field(default=None, max_length=EVIDENCE_MAX,
                                 description="A size-bounded excerpt of the failure evidence (log lines, review).")
    repeat_of: str | list[str] | None = Field(
        default=None, description="The same mistake as before: the admitted rule that covers it (rule-0004) or the "
        "earlier incidents; `[]` when a person says it is no repeat. Unset: not recorded (the bot may fill it).")


    @field_validator("task", "trigger", "believed", "actual", "evidence")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        why = not_text(value) if value else None
        if why:
            raise ValueError(f"{why}, not a log or a sentence; capture the failing job's text log, or write the "
                             "field by hand")
        return value

    @field_validator("repeat_of")
    @classmethod
    def _repeat_of(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, str):
            if not re.match(r"^rule-\d{4,}$", value):
                raise ValueError(f"{value!r} is not a rule id; write a rule id (rule-0004), a list of earlier "
                                 "incident ids, or [] for no repeat")
            return value
        if value is not None:
            bad = [v for v in value if not re.match(INCIDENT_ID, v)]
            if bad:
                raise ValueError(f"{bad!r} are not incident ids (e.g. 2026-07-14-0932 or gh-12)")
            return list(dict.fromkeys(value))
        return value

    @field_validator("created")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("has no time zone; write it in UTC with a trailing Z, e.g. 2026-07-14T09:32:00Z")
        return value.astimezone(timezone.utc)

    @property
    def unresolved(self) -> bool:
        return self.resolved_by == "unresolved"


def id_for(created: datetime) -> str:
    """The default id of an incident created at ``created``: ``YYYY-MM-DD-HHMM``."""
    return created.astimezone(timezone.utc).strftime("%Y-%m-%d-%H%M")


def created_from_stem(stem: str) -> datetime | None:
    """The UTC time a ``YYYY-MM-DD-HHMM`` file stem names, or None."""
    match = _STAMP_STEM.match(stem)
    if not match:
        return None
    try:
        return datetime(*map(int, match.groups()), tzinfo=timezone.utc)
    except ValueError:  # 2026-13-40-2599 has the form but names no time
        return None


def from_document(doc: yamlfile.Document) -> Incident:
    """The incident in a file, as people write it: ``id`` defaults to the file stem and
    ``created`` to the time the stem names (``YYYY-MM-DD-HHMM``)."""
    data = dict(doc.data)
    stem = doc.path.stem
    data.setdefault("id", stem)
    if "created" not in data and (when := created_from_stem(stem)) is not None:
        data["created"] = when
    try:
        return records.from_document(Incident, yamlfile.Document(doc.path, data, doc.text, doc.lines), what="incident")
    except BadInput as exc:
        # A missing `created` is one problem among the file's others: say how to fix it, and keep the rest.
        exc.problems = [_created_fix(doc.path) if p.endswith("field `created`: is required but missing") else p
                        for p in exc.problems]
        raise


def _created_fix(path: Path) -> str:
    return (f"{path}: field `created` is required: the file name {path.name!r} is not a "
            "YYYY-MM-DD-HHMM time to take it from; add `created: 2026-07-14T09:32:00Z` (UTC), "
            "or name the file after the time, e.g. 2026-07-14-0932.yaml")


@dataclass
class Reading:
    """A folder of incidents as read: the good ones, and one message per bad file (the reader goes on)."""

    incidents: list[Incident]
    problems: list[str] = field(default_factory=list)

    def raise_if_bad(self, folder: Path) -> None:
        if self.problems:
            raise BadInput(f"{folder}: {len(self.problems)} incident file(s) are invalid; "
                           "fix or remove them (the others were read)", problems=self.problems)


class IncidentSet:
    """Incidents held in memory (on GitHub: the open incident issues); read like a store, never written."""

    def __init__(self, incidents: list[Incident], where: str):
        self.incidents = sorted(incidents, key=lambda i: (i.created, i.id))
        self.folder = Path(where)

    def read(self) -> Reading:
        return Reading(list(self.incidents), [])

    def all(self) -> list[Incident]:
        return list(self.incidents)

    def ids(self) -> set[str]:
        return {i.id for i in self.incidents}

    def resolution(self, incident_ids: list[str], by: str, *, root: Path) -> Change:
        return Change()  # issues are closed by the PR's "Closes #N", not by a file

    def id_at(self, path: Path) -> str | None:
        return None


class IncidentStore:
    """The local ``incidents/`` folder. Writes are atomic and never clobber."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path_of(self, incident_id: str) -> Path:
        return self.folder / f"{incident_id}.yaml"

    def paths(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.glob("*.yaml") if not p.name.startswith("."))

    def load(self, path: Path) -> Incident:
        incident = from_document(yamlfile.load(Path(path), what="incident"))
        if incident.id != path.stem:
            raise BadInput(
                f"{path}: field `id` is {incident.id!r} but the file is named {path.name!r}; "
                f"rename the file to {incident.id}.yaml or set id: {path.stem}"
            )
        return incident

    def load_text(self, path: Path, text: str) -> Incident:
        """The incident ``text`` would be at ``path``; ``BadInput`` if it is not one."""
        return from_document(yamlfile.parse(Path(path), text, what="incident"))

    def read(self) -> Reading:
        """Every incident that loads, oldest first, and one problem per file that does not."""
        found, problems = [], []
        for path in self.paths():
            try:
                found.append(self.load(path))
            except BadInput as exc:
                problems.append(exc.render())
        return Reading(sorted(found, key=lambda i: (i.created, i.id)), problems)

    def all(self) -> list[Incident]:
        """Every incident, or one ``BadInput`` listing every broken file."""
        reading = self.read()
        reading.raise_if_bad(self.folder)
        return reading.incidents

    def ids(self) -> set[str]:
        return {p.stem for p in self.paths()}

    def get(self, incident_id: str) -> Incident:
        path = self.path_of(incident_id)
        if not path.exists():
            raise BadInput(f"incident {incident_id!r} not found in {self.folder}/")
        return self.load(path)

    def find_by_key(self, key: str) -> Incident | None:
        """The incident captured from ``key``, if any.

        Only files that hold the key's text are parsed, and a broken file
        elsewhere in the store never stops a capture: the event is not lost
        because a person mis-edited another incident.
        """
        for path in self.paths():
            try:
                if key not in path.read_text(encoding="utf-8", errors="replace"):
                    continue
                incident = self.load(path)
            except (BadInput, OSError):
                continue
            if incident.source and key in (incident.source.key, incident.source.content_key):
                return incident
        return None

    def add(self, incident: Incident, *, explicit_id: bool = True) -> tuple[Incident, bool]:
        """Store a new incident; return it and whether it was created.

        An incident whose ``source.key`` is already stored is not stored again:
        the stored one is returned. A generated id that is taken gets a
        suffix (``-2``, ``-3``…); an explicit id that is taken is an error.
        """
        if incident.source:
            for key in filter(None, (incident.source.key, incident.source.content_key)):
                existing = self.find_by_key(key)
                if existing:
                    return existing, False
        base = incident.id
        for attempt in range(1, 100):
            candidate = incident if attempt == 1 else incident.model_copy(update={"id": f"{base}-{attempt}"})
            text = yamlfile.dump(candidate.to_yaml_data(), kind="incident")
            try:
                yamlfile.write_new(self.path_of(candidate.id), text)
                return candidate, True
            except FileExistsError:
                if explicit_id:
                    raise BadInput(
                        f"{self.path_of(base)}: an incident with id {base!r} already exists; "
                        "choose another --id (ids are never reused)"
                    ) from None
        raise BadInput(f"{self.folder}: too many incidents with id {base!r}; pass an explicit --id")

    def resolution(self, incident_ids: list[str], by: str, *, root: Path) -> Change:
        """Marking the stored ones of ``incident_ids`` ``resolved_by: by``, as a change of files under ``root``.

        Ids the store does not hold (``gh-N`` issues, say) are left out: the
        store answers for its own files, the playbook does not edit them.
        """
        if by not in RESOLVERS:
            raise BadInput(f"resolved_by {by!r} is not one of {', '.join(RESOLVERS)}")
        known = self.ids()
        files = {}
        for incident_id in dict.fromkeys(incident_ids):
            if incident_id not in known:
                continue
            path = self.path_of(incident_id)
            text = yamlfile.set_top_level(path.read_text(encoding="utf-8"), "resolved_by", by)
            from_document(yamlfile.parse(path, text, what="incident"))  # a change never writes a broken file
            files[relative(path, root)] = text
        return Change(files)

    def id_at(self, path: Path) -> str | None:
        """The incident id of a file of this store, else None."""
        path = Path(path)
        return path.stem if path.parent.resolve() == self.folder.resolve() and path.suffix == ".yaml" else None

