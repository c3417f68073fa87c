"""Capture: turn the evidence of a failed run into an incident (a belief delta).

Evidence is extracted without a model and in bounded memory: a CI log is
streamed line by line (any size, any bytes), and only the failing step, the
lines around ``##[error]``, pytest/jest summaries and the last Python
traceback are kept. An analyst (the LLM) then states the belief delta; its
answer is validated against a fixed schema, so text copied from a log can
neither add fields nor smuggle in a rule. When the analyst is missing, down
or answers badly, the incident is still written from what was extracted,
with ``triage: true`` for a person to finish: capture never loses the event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot._util import records
from bot._util.text_safety import neutralise
from bot.errors import BadInput, LLMError
from bot.incident.capture.evidence import (
    ACTUAL_UNKNOWN,
    BELIEVED_UNKNOWN,
    TRIGGER_MAX,
    Analyst,
    Evidence,
    fit,
    one_liner,
    open_input,
    read_bounded,
)
from bot.incident.capture.grounding import refusal as grounding_refusal
from bot.incident.capture.log import LogScanner, evidence_from_log
from bot.incident.capture.pr import evidence_from_pr
from bot.incident.capture.transcript import TranscriptScanner, evidence_from_transcript
from bot.incident.store import Actual, Believed, FailureClass, Incident, IncidentStore, id_for

# The scanners live in their own modules (evidence.py, log.py, transcript.py, pr.py); callers keep
# importing every name from bot.incident.capture.
__all__ = [
    "ACTUAL_UNKNOWN", "BELIEVED_UNKNOWN", "TRIGGER_MAX", "Analysis", "Analyst", "Captured", "Evidence", "LogScanner",
    "TranscriptScanner", "analyse", "capture", "draft", "evidence_from_log", "evidence_from_pr",
    "evidence_from_transcript", "evidence_text", "fit", "one_liner", "open_input", "read_bounded", "sealed",
    "source_key",
]


class Rule(Protocol):
    """What capture reads of an admitted rule (:class:`bot.playbook.rule.Rule`): incidents sit below the playbook."""

    id: str
    rule: str
    created: date


# ---------------------------------------------------------------- the incident

class Analysis(BaseModel):
    """The analyst's answer. Only these keys are read; any other key (a `rule`, say) is dropped."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    task: str = Field(min_length=1, max_length=300)
    believed: Believed
    actual: Actual
    failure_class: FailureClass
    cost_minutes: int = Field(default=0, ge=0, le=10_000)
    repeat_of: str | None = Field(default=None, max_length=40)  # an admitted rule's id; checked in ``repeat_link``

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        if "\n" in value:
            raise ValueError("must be one line")
        return value



@dataclass
class Captured:
    incident: Incident
    created: bool  # False when the source key was already stored, or on a dry run
    path: Path | None  # where it is stored; None on a dry run that found nothing stored
    triage_reason: str | None = None  # why the belief delta is left for a person
    simulated: bool = False  # the SIMULATED model answered


def source_key(evidence: Evidence, explicit: str | None = None) -> str:
    return explicit or f"{evidence.source_kind.replace('_', '-')}-sha256-{evidence.digest[:16]}"


_PROMPT_TAG = re.compile(r"<(?=\s*/?\s*(?:task|step|trigger|evidence)\b)", re.I)


def sealed(text: str | None) -> str | None:
    """Untrusted text that cannot open or close the prompt's data tags: the ``<`` of any
    ``<evidence>``, ``</evidence >``, ``</TASK`` … becomes ``‹``. (The backtick fence around
    it is ``bot._util.text_safety.fence``'s.)"""
    return None if text is None else _PROMPT_TAG.sub("‹", text)


def analyse(evidence: Evidence, analyst: Analyst | None, task: str | None,
            rules: list[Rule] = ()) -> tuple[Analysis | None, str | None]:
    """The analyst's belief delta, or None and the reason it could not be had."""
    if analyst is None:
        return None, "no model was configured (set ANTHROPIC_API_KEY to use one)"
    try:
        return analyst.ask_json("capture", Analysis, trigger=sealed(evidence.trigger), excerpt=sealed(evidence.excerpt),
                                failing_step=sealed(evidence.failing_step), task=sealed(task),
                                source_kind=evidence.source_kind,
                                rules=[{"id": r.id, "rule": sealed(r.rule)} for r in rules]), None
    except LLMError as exc:  # the model is down or answered badly: degrade to triage, keep the event
        return None, f"the model's answer could not be used ({type(exc).__name__}: {one_liner(str(exc), 240)})"


def repeat_link(answer: str | None, rules: list[Rule], created: datetime) -> str | None:
    """The model's ``repeat_of``, kept only when it names an admitted rule created before the incident's day
    (a model answer is data: anything else is dropped)."""
    known = {r.id: r for r in rules}
    rule = known.get((answer or "").strip())
    return rule.id if rule is not None and rule.created < created.date() else None


def evidence_text(evidence: Evidence, task: str | None = None) -> str:
    """What a belief delta may name (:mod:`bot.incident.capture.grounding`): the trigger, the failing step,
    the excerpt the model was shown, and the known task."""
    return "\n".join(x for x in (evidence.trigger, evidence.failing_step, evidence.excerpt, task) if x)


def draft(evidence: Evidence, analyst: Analyst | None = None, *, task: str | None = None,
          task_type: str | None = None, source_url: str | None = None, key: str | None = None,
          content_key: str | None = None, now: datetime | None = None,
          rules: list[Rule] = ()) -> tuple[Incident, str | None]:
    """The incident for ``evidence`` and, when it needs triage, why. With ``rules`` (the admitted
    ones) the model is asked whether the incident repeats one of them."""
    if task_type is not None and not re.match(records.SLUG, task_type):
        raise BadInput(f"task type {task_type!r} is not a slug; use lowercase letters, digits and - . _ (e.g. api)")
    pr_title = evidence.task_hint if evidence.source_kind in ("pull_request", "review") else None
    known = one_liner(task, 300) if task else pr_title
    rules = list(rules)
    analysis, reason = analyse(evidence, analyst, known, rules)
    created = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(second=0, microsecond=0)
    base = {"id": id_for(created), "task_type": task_type, "trigger": evidence.trigger,
            "resolved_by": "unresolved", "created": created, "evidence": evidence.excerpt or None,
            "source": {"kind": evidence.source_kind, "url": source_url, "key": key, "content_key": content_key}}
    if analysis is not None:
        reason = grounding_refusal(analysis.believed, analysis.actual, evidence_text(evidence, known))
        analysis = None if reason else analysis
    if analysis is not None:
        try:
            return Incident.model_validate({**base, "task": known or analysis.task, "believed": analysis.believed,
                                            "actual": analysis.actual, "failure_class": analysis.failure_class,
                                            "cost_minutes": analysis.cost_minutes,
                                            "repeat_of": repeat_link(analysis.repeat_of, rules, created)}), None
        except ValidationError as exc:
            reason = f"the model's answer did not make a valid incident ({exc.error_count()} problem(s))"
    fallback = known or evidence.task_hint or f"unknown task (captured from {evidence.source_kind.replace('_', ' ')})"
    incident = Incident.model_validate({**base, "task": fallback, "believed": BELIEVED_UNKNOWN,
                                        "actual": ACTUAL_UNKNOWN, "failure_class": "unknown", "triage": True,
                                        "triage_reason": neutralise(one_liner(reason, 300)) if reason else None})
    return incident, reason


def capture(evidence: Evidence, store: IncidentStore, analyst: Analyst | None = None, *, dry_run: bool = False,
            task: str | None = None, task_type: str | None = None, source_url: str | None = None,
            key: str | None = None, now: datetime | None = None, rules: list[Rule] = ()) -> Captured:
    """Store the incident for ``evidence`` once per source key (nothing on a dry run).

    A key already stored returns the stored incident without asking the model.
    """
    content = source_key(evidence)
    key = source_key(evidence, key)
    for known in dict.fromkeys((key, content)):  # an explicit key, then the content hash: either one dedupes
        existing = store.find_by_key(known)
        if existing is not None:
            return Captured(existing, created=False, path=store.path_of(existing.id), triage_reason=None)
    incident, reason = draft(evidence, analyst, task=task, task_type=task_type, source_url=source_url,
                             key=key, content_key=None if key == content else content, now=now, rules=rules)
    simulated = bool(analyst is not None and getattr(analyst, "simulated", False))
    if dry_run:
        return Captured(incident, created=False, path=None, triage_reason=reason, simulated=simulated)
    stored, created = store.add(incident, explicit_id=False)
    return Captured(stored, created=created, path=store.path_of(stored.id), triage_reason=reason, simulated=simulated)
