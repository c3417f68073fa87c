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

    def ask_json(self, template: str, schema: type[M], **variables: Any) -> M: ...


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")  # a hostile answer's extra keys reach nothing


class NewScenario(_Loose):
    id: str
    task: str
    task_type: str | None = None
    pass_if: Any = None
    budget: dict[str, Any] | None = None
    files: dict[str, str] = Field(default_factory=dict)
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
