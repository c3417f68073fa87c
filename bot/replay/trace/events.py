"""The trace: an append-only, normalised JSONL list of what happened in one run.

Every record shares ``TraceEvent`` (``kind``, ``seq``, ``t``) and is told apart
by ``kind``. Checks are decided from these records and the sandbox's end state,
so a run can be re-scored later from its run directory without re-running it::

    runs/<run-id>/
      trace.jsonl   normalised events, one JSON object per line
      agent.raw     the agent's raw stdout (e.g. Claude Code stream-json)
      diff.patch    unified diff of the final tree against the fixture
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Literal, Union

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from bot.errors import BadInput

EXCERPT_CHARS = 2000
UNATTRIBUTED = "unattributed"  # the tool call of a command whose process the trace could not tie to one


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """Keep the head of ``text``; say how much was cut so nobody mistakes it for the whole."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


class TraceEvent(BaseModel):
    """Shared base. ``seq`` and ``t`` are assigned by ``TraceWriter.append``."""

    kind: str
    seq: int | None = None
    t: float | None = Field(default=None, description="seconds since run start")

    def offset(self, run_start: float, now: float) -> float:
        """When this event happened, in seconds since the run started."""
        return now - run_start


class RunStartEvent(TraceEvent):
    kind: Literal["run_start"] = "run_start"
    scenario: str | None = None
    agent: str | None = None
    started_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    meta: dict[str, Any] = Field(default_factory=dict)


class CommandEvent(TraceEvent):
    """One executable the agent (or a command it ran) started: one ``execve`` the kernel saw
    (``bot.replay.trace.kernel``), or, under ``--sandbox docker``, one PATH shim's record."""

    kind: Literal["command"] = "command"
    argv: list[str]
    cwd: str = Field(description="relative to the sandbox root ('.'), or absolute outside it")
    exit_code: int
    duration_ms: float
    started_at: datetime
    depth: int = Field(default=0, description="how many recorded commands enclose this one")
    program: str | None = Field(default=None, description="the file the kernel ran, links resolved, read from the "
                                "new image (argv[0] is only what the caller said); a script's own file, not its "
                                "interpreter's; None in shim records")
    called: str | None = Field(default=None, description="the file as the caller named it, when that is not "
                               "`program` (a link, a name another thread rewrote); None when they are the same")
    pid: int | None = Field(default=None, description="its process, as the host sees it (kernel trace only)")
    ppid: int | None = Field(default=None, description="the process that started it (kernel trace only)")
    tool_call: str | None = Field(default=None, description="the tool call whose process started it: the id the "
                                  "agent adapter ran it under, 'shell:…' for a shell the agent started, '' for none, "
                                  "'unattributed' where the trace could not tie its process to one (counted as a "
                                  "tool call's)")
    claimed: list[str] | None = Field(default=None, description="the argv the caller passed, when the new image "
                                      "held another when it was read (one was rewritten: a process tracing its "
                                      "own child, a thread racing the tracer); the command then counts for "
                                      "`not_ran` and `max_runs` under either argv, never for `ran`")
    module: str | None = Field(default=None, description="for `python -m X`: the file X resolved to in the "
                               "process's folder or PYTHONPATH (searched before the installed packages); the "
                               "command is then never `X` for `command:`")
    confirmed: bool = Field(default=True, description="False: the kernel was asked to run it and its process ended "
                            "before it was seen running (killed at once): it counts for `not_ran` and `max_runs`, "
                            "never for `ran`")
    by: Literal["tool", "agent"] | None = Field(
        default=None, description="'tool': one of the agent's tool calls ran it (the id in `tool_call`); 'agent': "
                                  "the agent's own machinery did; None: not known (counted as a tool call)")

    def offset(self, run_start: float, now: float) -> float:
        # A command's place on the timeline is when it started, not when we learnt of it.
        return max(0.0, self.started_at.timestamp() - run_start)

    @property
    def command(self) -> str:
        return self.argv[0] if self.argv else ""


class ShellEvent(TraceEvent):
    """A shell the agent started through ``$SHELL``, with the id its commands carry in ``tool_call``."""

    kind: Literal["shell"] = "shell"
    id: str
    argv: list[str]


class ToolCallEvent(TraceEvent):
    kind: Literal["tool_call"] = "tool_call"
    name: str
    input: Any = None
    id: str | None = None
    is_error: bool | None = None
    output_excerpt: str | None = None


class ModelCallEvent(TraceEvent):
    kind: Literal["model_call"] = "model_call"
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    simulated: bool = False


class FileChangeEvent(TraceEvent):
    kind: Literal["file_change"] = "file_change"
    path: str
    status: Literal["A", "M", "D"]
    diff_excerpt: str = ""


class AgentOutputEvent(TraceEvent):
    kind: Literal["agent_output"] = "agent_output"
    text: str


class RunEndEvent(TraceEvent):
    kind: Literal["run_end"] = "run_end"
    status: Literal["passed", "failed", "unscored"]
    reason: str | None = None
    # whether the rule under test reached the agent (``bot.replay.delivery.Delivery``); absent without one
    delivery: dict[str, Any] | None = None


Event = Annotated[
    Union[
        RunStartEvent,
        CommandEvent,
        ShellEvent,
        ToolCallEvent,
        ModelCallEvent,
        FileChangeEvent,
        AgentOutputEvent,
        RunEndEvent,
    ],
    Field(discriminator="kind"),
]
_EVENT = TypeAdapter(Event)


def file_change_events(changes: Iterable[Any]) -> list[FileChangeEvent]:
    """Turn the sandbox's ``FileChange`` records (path, status, patch) into events."""
    return [
        FileChangeEvent(path=c.path, status=c.status, diff_excerpt=excerpt(c.patch))
        for c in changes
    ]


class TraceWriter:
    """Appends events to ``trace.jsonl``: one write and one flush per event.

    Re-opening an existing trace continues its ``seq`` numbering, so a re-score
    can append a new ``run_end`` without rewriting history.
    """

    def __init__(self, path: Path, *, run_start: float | None = None, redact: Callable[[str], str] | None = None):
        self.path = Path(path)
        self.redact = redact  # applied to each line before it is written (known secret values -> ***)
        self.run_start = time.time() if run_start is None else run_start
        self._seq = _count_lines(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    def append(self, event: TraceEvent) -> TraceEvent:
        """Stamp ``seq`` (and ``t`` unless already set), write the line, return the stamped copy."""
        update: dict[str, Any] = {"seq": self._seq}
        if event.t is None:
            update["t"] = round(event.offset(self.run_start, time.time()), 6)
        stamped = event.model_copy(update=update)
        line = stamped.model_dump_json()
        self._file.write((self.redact(line) if self.redact else line) + "\n")
        self._file.flush()
        self._seq += 1
        return stamped

    def extend(self, events: Iterable[TraceEvent]) -> list[TraceEvent]:
        return [self.append(e) for e in events]

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        """True once the run is over: what arrives later (a model answer past the deadline) is not the run's."""
        return self._file.closed

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())


def parse_event(line: str) -> TraceEvent:
    return _EVENT.validate_json(line)


def read_trace(path: Path) -> list[TraceEvent]:
    """Load every event; a bad line is a ``BadInput`` naming ``file:line``."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no trace here; run the replay first to write trace.jsonl")
    events: list[TraceEvent] = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                events.append(parse_event(line))
            except ValidationError as err:
                raise BadInput(
                    f"{path}:{lineno}: not a trace event ({_first_error(err)}); "
                    "traces are written by Replaybook — re-run the replay to regenerate it"
                ) from None
    return events


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "line"
    return f"{where}: {first.get('msg', 'invalid')}"


@dataclass(frozen=True)
class RunDir:
    """Where one run's artefacts live, so scoring and re-scoring agree on names."""

    path: Path
    redact: Callable[[bytes], bytes] | None = None  # applied to every artefact before it is written

    @property
    def trace(self) -> Path:
        return self.path / "trace.jsonl"

    @property
    def agent_raw(self) -> Path:
        return self.path / "agent.raw"

    @property
    def diff_patch(self) -> Path:
        return self.path / "diff.patch"

    def create(self) -> "RunDir":
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def writer(self, *, run_start: float | None = None) -> TraceWriter:
        return TraceWriter(self.trace, run_start=run_start)

    def write_agent_raw(self, data: str | bytes) -> None:
        _write(self.agent_raw, data, self.redact)

    def write_diff(self, patch: str) -> None:
        _write(self.diff_patch, patch, self.redact)

    def read_agent_raw(self) -> str:
        return self.agent_raw.read_text(encoding="utf-8", errors="replace")

    def events(self) -> list[TraceEvent]:
        return read_trace(self.trace)


def _write(path: Path, data: str | bytes, redact: Callable[[bytes], bytes] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", errors="surrogateescape")
    if redact:
        data = redact(data)
    path.write_bytes(data)


def relative_cwd(cwd: str, root: Path) -> str:
    """A sandbox path as checks name it: relative to the repo root (``.``), or absolute outside it."""
    for base in {str(root), os.path.realpath(root)}:
        base = base.rstrip("/")
        if cwd == base:
            return "."
        if cwd.startswith(base + "/"):
            return cwd[len(base) + 1:].rstrip("/") or "."
    return cwd
