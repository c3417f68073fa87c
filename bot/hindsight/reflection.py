"""Hindsight: record a run, chronicle it, reflect on it, and inject what it taught into the next run.

The loop of ``Hindsight.run_task_with_feedback``:

1. inject: at most three lessons for the task type go into ``task_input["extra_context"]``;
2. run: the runner gets an ``event_callback``; every event is recorded with a UTC time;
3. chronicle: the event store turns the run's events into a short list of nodes;
4. reflect: the model names the root cause, 3-5 suggestions and a general rule (JSON, temperature 0.2);
5. store: the general rule becomes a lesson (flagged when it conflicts, doubtful when the reflection was).

Hindsight is never the reason a task fails: a failure to record, chronicle, reflect or
store is logged and kept in ``Hindsight.last_run.problems``, and the runner's result
is returned. The runner's own exception propagates unchanged, after its run was reflected on.

``reflection_to_incident`` bridges a reflection to an ``Incident`` for the distiller.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Protocol, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator

from bot._util import records
from bot._util.text_safety import one_line
from bot.errors import LLMError
from bot.hindsight.lesson import Added, Conflict, Lesson, LessonStore, directives
from bot.incident.store import EVIDENCE_MAX, ONE_LINE_MAX, Incident, Source

__all__ = ["EventStore", "Feedback", "Hindsight", "Reflection", "TraceEvents", "reflect", "reflection_to_incident"]

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
CHRONICLE_MAX_CHARS = 6000  # the reflection needs the turning points, not the whole log
MIN_SUGGESTIONS, MAX_SUGGESTIONS = 3, 5


class EventStore(Protocol):
    """What hindsight needs of the event store. A store that buffers may also have ``flush()``,
    called at the end of every run."""

    def record(self, task_id: str, event: dict[str, Any], timestamp: datetime) -> Any: ...

    def chronicle(self, task_id: str) -> list[dict[str, Any]]: ...


class TraceEvents:
    """The ``EventStore`` of the loop: ``bot.hindsight.traces`` records, ``bot.hindsight.chronicle`` reads.

    Events are buffered by a ``Recorder`` (noise dropped, long fields cut); ``chronicle``
    writes the buffer and samples a long task before it reads the key nodes.
    """

    def __init__(self, trace: Any, **recorder_options: Any):
        from bot.hindsight.traces import Recorder

        self.trace = trace
        self.recorder = Recorder(trace, **recorder_options)

    def record(self, task_id: str, event: dict[str, Any], timestamp: datetime) -> bool:
        return self.recorder.record(task_id, event, timestamp)

    def chronicle(self, task_id: str) -> list[dict[str, Any]]:
        from bot.hindsight import chronicle

        self.flush()
        return [node.to_dict() for node in chronicle.build(self.trace, task_id).nodes]

    def flush(self) -> None:
        """Write buffered events and sample long tasks; the recorder stays usable, the store open."""
        self.recorder.close()


class Analyst(Protocol):
    """What reflection needs of a model: ``bot.model.llm.LLM`` is one. ``ask_json`` raises ``LLMError``."""

    def ask_json(self, template: str, schema: type[M], **variables: Any) -> M: ...


# --- reflection ----------------------------------------------------------------------------------


class _Answer(BaseModel):
    """The model's answer. Root cause and rule are required (a missing one earns the repair retry);
    the number of suggestions is checked afterwards, so a short list still keeps the rule."""

    root_cause: str = Field(min_length=1)
    suggestions: list[str] = Field(default_factory=list)
    general_rule: str = Field(min_length=1)

    @field_validator("root_cause", "general_rule", mode="before")
    @classmethod
    def _one_line(cls, value: Any) -> Any:
        return one_line(value) if isinstance(value, str) else value

    @field_validator("suggestions", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        if isinstance(value, str):  # one string of lines or bullets
            value = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line) for line in value.splitlines()]
        if isinstance(value, list):  # blanks dropped; a non-string is left to fail validation
            return [" ".join(v.split()) if isinstance(v, str) else v for v in value
                    if not (isinstance(v, str) and not v.strip())]
        return value


@dataclass(frozen=True)
class Reflection:
    """What one run taught. ``doubtful``: the answer was missing or off-shape; ``reason`` says how."""

    root_cause: str = ""
    suggestions: tuple[str, ...] = ()
    general_rule: str = ""
    doubtful: bool = False
    reason: str = ""

    @property
    def value(self) -> float:
        """A rough score of the reflection's worth, 0..1, used to rank lessons after hits.

        0.6 for a sound reflection, +0.2 when its rule opens with a condition ("When …"),
        +0.2 when it names something to use or avoid; a doubtful one scores 0.2 at most.
        """
        if not self.general_rule:
            return 0.0
        if self.doubtful:
            return 0.2
        score = 0.6
        if re.match(r"(?i)(when|whenever|before|after|if|for|while|on)\b", self.general_rule):
            score += 0.2
        if any(directives(self.general_rule)):
            score += 0.2
        return round(score, 2)

    def to_dict(self) -> dict[str, Any]:
        return {"root_cause": self.root_cause, "suggestions": list(self.suggestions),
                "general_rule": self.general_rule, "doubtful": self.doubtful, "reason": self.reason,
                "value": self.value}


def reflect(llm: Analyst | None, chronicle_nodes: list[dict[str, Any]], task_input_summary: str, *,
            task_type: str = "unknown") -> Reflection:
    """Reflect on one run's chronicle. Never raises: a failure is a doubtful reflection."""
    if llm is None:
        return Reflection(doubtful=True, reason="no model is configured for reflection")
    try:
        text, truncated = _chronicle_text(chronicle_nodes)
        answer = llm.ask_json("reflect", _Answer, task_type=task_type, task_summary=task_input_summary or "(none)",
                              chronicle=text, node_count=len(chronicle_nodes), truncated=truncated)
    except LLMError as exc:
        return Reflection(doubtful=True, reason=f"the reflection failed: {exc.message}")
    except Exception as exc:  # a bug here must not break the task's run
        log.exception("hindsight: reflection crashed")
        return Reflection(doubtful=True, reason=f"the reflection crashed: {type(exc).__name__}: {exc}")
    suggestions = tuple(answer.suggestions)
    problems = []
    if len(suggestions) < MIN_SUGGESTIONS:
        problems.append(f"it gave {len(suggestions)} suggestion(s), not {MIN_SUGGESTIONS}-{MAX_SUGGESTIONS}")
    if len(suggestions) > MAX_SUGGESTIONS:
        problems.append(f"it gave {len(suggestions)} suggestions; the first {MAX_SUGGESTIONS} were kept")
        suggestions = suggestions[:MAX_SUGGESTIONS]
    return Reflection(answer.root_cause, suggestions, answer.general_rule, doubtful=bool(problems),
                      reason="; ".join(problems))


def _chronicle_text(nodes: list[dict[str, Any]]) -> tuple[str, bool]:
    text = json.dumps(nodes, ensure_ascii=False, indent=1, default=str)
    if len(text) <= CHRONICLE_MAX_CHARS:
        return text, False
    return text[:CHRONICLE_MAX_CHARS] + "\n… (cut)", True


# --- the loop ------------------------------------------------------------------------------------


@dataclass
class Feedback:
    """What hindsight did around one run; ``problems`` lists what it could not do."""

    task_id: str
    task_type: str
    injected: str = ""
    events: int = 0
    chronicle: list[dict[str, Any]] = field(default_factory=list)
    reflection: Reflection | None = None
    lesson: Lesson | None = None
    conflicts: list[Conflict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


Runner = Callable[..., Any]


class Hindsight:
    """The loop around a runner: inject, run with an event callback, chronicle, reflect, store."""

    def __init__(self, store: EventStore, lessons: LessonStore, llm: Analyst | None, *, max_lessons: int = 3):
        self.store = store
        self.lessons = lessons
        self.llm = llm
        self.max_lessons = max_lessons
        self.last_run: Feedback | None = None

    def run_task_with_feedback(self, task_type: str, runner: Runner, task_input: Mapping[str, Any], *,
                               task_id: str | None = None) -> Any:
        """Run ``runner(task_input, event_callback=...)`` inside the loop and return its result.

        ``task_input`` is not changed: the runner gets a copy with the lessons appended to
        ``extra_context``. Reflection is skipped when the result says ``needs_review: False``.
        """
        feedback = Feedback(task_id or uuid.uuid4().hex, task_type)
        self.last_run = feedback
        given = dict(task_input)
        feedback.injected = self._guard(feedback, "inject lessons", "",
                                        lambda: self.lessons.inject(task_type, self.max_lessons))
        if feedback.injected:
            earlier = given.get("extra_context")
            given["extra_context"] = f"{earlier}\n\n{feedback.injected}" if earlier else feedback.injected
        try:
            result = runner(given, event_callback=lambda event, timestamp=None: self._record(feedback, event, timestamp))
        except BaseException as exc:
            if isinstance(exc, Exception):  # a crash is worth a reflection; Ctrl-C is not
                self._record(feedback, {"type": "task_crashed", "result": {
                    "status": "failed", "error_type": type(exc).__name__, "error_message": str(exc)[:500]}}, None)
                self._guard(feedback, "review the run", None, lambda: self._review(feedback, given))
            self._flush(feedback)
            raise
        needs_review = result.get("needs_review", True) if isinstance(result, Mapping) else True
        if needs_review:
            self._guard(feedback, "review the run", None, lambda: self._review(feedback, given))
        self._flush(feedback)
        return result

    def _flush(self, feedback: Feedback) -> None:
        """A buffering store (``TraceEvents``) writes what it holds, reviewed or not."""
        flush = getattr(self.store, "flush", None)
        if callable(flush):
            self._guard(feedback, "write the events", None, flush)

    def _review(self, feedback: Feedback, task_input: Mapping[str, Any]) -> None:
        feedback.chronicle = self._guard(feedback, "chronicle the run", [],
                                         lambda: list(self.store.chronicle(feedback.task_id)))
        if not feedback.chronicle:  # no failure, hesitation or anomaly, or nothing recorded
            feedback.problems.append("nothing to reflect on: the chronicle has no key nodes")
            return
        feedback.reflection = reflect(self.llm, feedback.chronicle, _summary(task_input), task_type=feedback.task_type)
        if feedback.reflection.doubtful:
            feedback.problems.append(f"reflection is doubtful: {feedback.reflection.reason}")
            log.warning("hindsight: reflection on %s is doubtful: %s", feedback.task_id, feedback.reflection.reason)
        if feedback.reflection.general_rule:
            self._guard(feedback, "store the lesson", None, lambda: self._store(feedback))

    def _store(self, feedback: Feedback) -> None:
        reflection = feedback.reflection
        lesson = Lesson.new(feedback.task_type, reflection.general_rule, source_task=feedback.task_id,
                            value=reflection.value, doubtful=reflection.doubtful)
        added: Added = self.lessons.add(lesson)
        feedback.lesson, feedback.conflicts = added.lesson, added.conflicts
        for conflict in added.conflicts:
            log.warning("hindsight: new %s is a %s of %s (%s); it is not injected until confirmed",
                        added.lesson.id, conflict.kind, conflict.id, conflict.reason)

    def _record(self, feedback: Feedback, event: Any, timestamp: Any) -> None:
        def record() -> None:
            data = dict(event) if isinstance(event, Mapping) else {"type": "note", "result": {"text": str(event)}}
            when = _utc(timestamp if timestamp is not None else data.pop("timestamp", None))
            self.store.record(feedback.task_id, data, when)
            feedback.events += 1
        self._guard(feedback, "record an event", None, record)

    @staticmethod
    def _guard(feedback: Feedback, what: str, fallback: Any, step: Callable[[], Any]) -> Any:
        try:
            return step()
        except Exception as exc:
            feedback.problems.append(f"could not {what}: {type(exc).__name__}: {exc}")
            log.warning("hindsight: could not %s for %s: %s", what, feedback.task_id, exc, exc_info=True)
            return fallback


def _utc(value: Any) -> datetime:
    """An aware UTC time from what the runner gave. A naive time is taken as UTC; a bad one becomes now."""
    when: datetime | None = None
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        when = datetime.fromtimestamp(value, timezone.utc)
    elif isinstance(value, str) and value.strip():
        try:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            log.warning("hindsight: event time %r is not ISO 8601; using now", value)
    if when is None:
        when = datetime.now(timezone.utc)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def _summary(task_input: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in task_input.items() if k != "extra_context"}  # the lessons are not the task
    return json.dumps(shown, ensure_ascii=False, default=str)[:2000]


# --- the bridge to incidents ---------------------------------------------------------------------


def reflection_to_incident(reflection: Reflection, task: str, task_id: str, *, task_type: str | None = None,
                           created: datetime | None = None) -> Incident:
    """A reflection as an incident (belief delta) the distiller can use.

    believed: what the agent assumed, per the root cause; actual: the general rule's fact.
    A doubtful reflection becomes a triage incident: a person fills in the delta.
    """
    created = (created or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(microsecond=0)
    slug = re.sub(r"[^a-z0-9-]+", "-", task_id.lower()).strip("-")[:40] or "run"
    triage = reflection.doubtful or not reflection.root_cause or not reflection.general_rule
    evidence = "\n".join([f"root cause: {reflection.root_cause or '(none)'}",
                          *[f"- {s}" for s in reflection.suggestions],
                          f"general rule: {reflection.general_rule or '(none)'}",
                          *([f"doubtful: {reflection.reason}"] if reflection.doubtful else [])])
    fields = dict(
        id=f"hindsight-{slug}",
        task=_line(task) or "(task not given)",
        task_type=task_type if task_type and re.match(records.SLUG, task_type) else None,
        failure_class="wrong_assumption",
        trigger=f"hindsight reflection on run {task_id}",
        believed=_line(reflection.root_cause) or _UNKNOWN,
        actual=_line(reflection.general_rule) or _UNKNOWN,
        source=Source(kind="transcript", key=f"hindsight:{task_id}"),
        created=created,
        triage=triage,
        evidence=evidence[:EVIDENCE_MAX],
    )
    try:
        return Incident(**fields)
    except ValidationError:  # e.g. a root cause that quotes a stack trace: a person states the delta
        return Incident(**{**fields, "believed": _UNKNOWN, "actual": _UNKNOWN, "triage": True})


_UNKNOWN = "unknown: the reflection did not say; read the evidence"


def _line(text: str) -> str:
    return one_line(text, ONE_LINE_MAX)

