"""The distiller's answers as we read them: only these fields, every other key dropped, each checked."""


from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal, Protocol, TypeVar, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    model_validator,
)

from bot._util import records
from bot.distill.spec_change import Refused as _Refused
from bot.distill.spec_change import SpecChangeAnswer
from bot.playbook.rule import Rule

M = TypeVar("M", bound=BaseModel)


class AsksJson(Protocol):
    """What distill needs of a model: ``bot.model.llm.LLM`` fits. Failures raise an exception."""

    def ask_json(self, template: str, schema: type[M], *, answer_schema: dict[str, Any] | None = None,
                 **variables: Any) -> M: ...


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")  # a hostile answer's extra keys reach nothing


class NewScenario(_Loose):
    id: str
    task: str
    task_type: str | None = None
    pass_if: Any = None
    budget: dict[str, Any] | None = None
    files: dict[str, str] = Field(default_factory=dict)
    solution: list[str] | None = None  # the reference solution's command lines: proven in the sandbox before proposing
    policy: dict[str, Any] | None = None


class ScenarioChoice(_Loose):
    existing: str | None = None
    new: NewScenario | None = None

    @model_validator(mode="after")
    def _one(self) -> "ScenarioChoice":
        if (self.existing is None) == (self.new is None):
            raise ValueError('give exactly one of {"existing": "<scenario id>"} or {"new": {...}}')
        return self


class RuleAnswer(_Loose):
    kind: Literal["rule"]
    rule: str
    cites: list[str]
    task_types: list[str] = Field(default_factory=list)
    paths: list[str] = Field(default_factory=list)  # optional globs: a narrower scope (a re-proposal after a regression)
    scenario: ScenarioChoice


class Answer(RootModel[Annotated[Union[RuleAnswer, SpecChangeAnswer], Field(discriminator="kind")]]):
    """One proposal: a rule with its scenario, or a spec change."""


class AnswerSet(_Loose):
    """The distiller's answer for one batch: several proposals (a lone proposal is accepted too)."""

    proposals: list[Answer] = Field(max_length=20)

    @model_validator(mode="before")
    @classmethod
    def _lone(cls, value: Any) -> Any:
        if isinstance(value, dict) and "kind" in value and "proposals" not in value:
            return {"proposals": [value]}
        return value


def answer_schema(incident_ids: list[str], scenario_ids: list[str], checks: dict[str, type[BaseModel]],
                  most: int = 2) -> dict[str, Any]:
    """The JSON schema a grammar holds the local model's answer to (``bot.model.json_schema``): ``AnswerSet``'s
    shape, narrowed to this batch. ``cites`` may hold only the batch's incident ids, ``existing`` only a scenario
    that exists (none: a new scenario it must be), each check one of ``checks``' shapes, and a new scenario
    carries no ``policy`` (a script for the simulated model, which a real model's distill does not write), and the
    whole answer stays short (``most`` proposals, at most 6 files). No string has a length bound: llama.cpp refuses
    a grammar whose repetitions multiply past its limits (a 2,000-character bound did).
    The answer is still validated in full afterwards: this only narrows what a small model can say wrong."""
    from bot.model.json_schema import for_grammar

    text = {"type": "string", "minLength": 1}
    cites = {"type": "array", "items": {"enum": list(incident_ids)}, "minItems": 1, "maxItems": len(incident_ids)}
    check = {"oneOf": [for_grammar(model.model_json_schema()) for model in checks.values()]}
    new = {"type": "object", "required": ["id", "task", "pass_if", "files", "solution"], "properties": {
        "id": text, "task": text, "pass_if": {"type": "array", "items": check, "minItems": 1, "maxItems": 6},
        "files": {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1,
                  "maxProperties": 6},
        "solution": {"type": "array", "items": text, "minItems": 1, "maxItems": 8}}}
    choices = [{"type": "object", "required": ["new"], "properties": {"new": new}}]
    if scenario_ids:
        choices.insert(0, {"type": "object", "required": ["existing"],
                           "properties": {"existing": {"enum": list(scenario_ids)}}})
    rule = {"type": "object", "required": ["kind", "rule", "cites", "scenario"], "properties": {
        "kind": {"const": "rule"}, "rule": text, "cites": cites, "scenario": choices[0] if len(choices) == 1 else {"oneOf": choices}}}
    spec = {"type": "object", "required": ["kind", "cites", "template_change", "why"], "properties": {
        "kind": {"const": "spec_change"}, "cites": cites, "template_change": text, "why": text}}
    return {"type": "object", "required": ["proposals"], "properties": {
        "proposals": {"type": "array", "items": {"oneOf": [rule, spec]}, "minItems": 1, "maxItems": most}}}


def validate_rule(text: str, task_types: list[str], paths: list[str] = ()) -> None:
    try:
        Rule.model_validate({"id": "rule-0000", "rule": text, "task_types": task_types, "paths": list(paths),
                             "replay": "scenarios/x", "created": date.today()})
    except ValidationError as exc:
        raise _Refused("rule: " + validation_errors(exc)) from None


def validation_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for i, p in enumerate(err["loc"]) if i == 0 or p != err["loc"][i - 1])
        parts.append(f"{loc + ': ' if loc else ''}{records.error_message(err)}")
    return "; ".join(parts)
