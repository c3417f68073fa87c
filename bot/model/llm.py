"""The LLM layer: one small adapter over the anthropic SDK for capture, distill and reflection.

Prompts are jinja2 templates in ``bot/model/prompts/``. Answers that should be
JSON are pulled out of code fences and chatter, validated against a pydantic
model, and repaired once (the model is shown the validation error); after
that the call fails with ``LLMError``, which callers turn into a degraded
result, never a lost event. Retries and timeouts are the SDK's; tokens and
cost are counted here for every call.

Analysis runs at temperature 0.2. SDK 2.x no longer takes ``temperature`` as
a parameter, so it is sent in the request body (``extra_body``); a model that
refuses it is retried once without it.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anthropic
import jinja2
from pydantic import BaseModel, ValidationError

from bot._util.text_safety import fence
from bot.errors import LLMError
from bot.model import json_schema, pricing

__all__ = ["LLM", "LLMError", "Usage", "extract_json", "parse_json", "render"]

TEMPERATURE = 0.2
M = TypeVar("M", bound=BaseModel)
_templates = jinja2.Environment(loader=jinja2.PackageLoader("bot.model", "prompts"), undefined=jinja2.StrictUndefined,
                                keep_trailing_newline=True, autoescape=False)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)
_templates.globals["fence"] = lambda text, label="data": fence(text, label)


@dataclass
class Usage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, model: str, usage: Any) -> None:
        tokens_in = getattr(usage, "input_tokens", 0) or 0
        tokens_out = getattr(usage, "output_tokens", 0) or 0
        self.calls += 1
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        self.cost_usd = round(self.cost_usd + pricing.cost_usd(model, tokens_in, tokens_out), 8)


@dataclass
class LLM:
    client: anthropic.Anthropic
    model: str
    simulated: bool = False  # answered by the SIMULATED model (offline); say so wherever it is used
    label: str = ""  # a real local model's name and quantisation (bot.model.served), for reports
    structured: bool = False  # send ask_json's schema as the answer's grammar (the local model; bot.model.json_schema)
    temperature: float = TEMPERATURE
    max_tokens: int = 2048
    usage: Usage = field(default_factory=Usage)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def connect(cls, model: str, *, api_key: str, base_url: str | None = None, simulated: bool = False,
                timeout_s: float = 60.0, max_retries: int = 2, max_tokens: int = 2048, label: str = "",
                structured: bool = False) -> "LLM":
        client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries)
        return cls(client=client, model=model, simulated=simulated, max_tokens=max_tokens, label=label,
                   structured=structured)

    def complete(self, system: str, user: str, answer_schema: dict[str, Any] | None = None) -> str:
        """One answer's text (JSON of ``answer_schema`` when given: ``output_config.format``); ``LLMError`` when
        the API fails for good."""
        body: dict[str, Any] = {"temperature": self.temperature}
        if answer_schema is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": answer_schema}}
        try:
            try:
                reply = self.client.messages.create(model=self.model, max_tokens=self.max_tokens, system=system,
                                                    messages=[{"role": "user", "content": user}], extra_body=body)
            except anthropic.BadRequestError as exc:
                if "temperature" not in str(exc):
                    raise
                body.pop("temperature")
                reply = self.client.messages.create(model=self.model, max_tokens=self.max_tokens, system=system,
                                                    messages=[{"role": "user", "content": user}], extra_body=body)
        except anthropic.APIError as exc:
            raise LLMError(f"the model API failed: {type(exc).__name__}: {str(exc)[:200]}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # a 200 whose body is no Messages answer
            raise LLMError(f"the model API answered with no usable message: {type(exc).__name__}: "
                           f"{str(exc)[:200]}") from None
        if not isinstance(getattr(reply, "content", None), list) or getattr(reply, "usage", None) is None:
            raise LLMError(f"the model API answered with no usable message ({type(reply).__name__})")
        with self._lock:
            self.usage.add(self.model, reply.usage)
        if reply.stop_reason in (None, "max_tokens"):
            raise LLMError(f"the answer was cut off before it ended (stop_reason {reply.stop_reason}); "
                           "raise max_tokens or ask for less")
        return "\n".join(b.text for b in reply.content if getattr(b, "type", "") == "text")

    def ask_json(self, template: str, schema: type[M], *, answer_schema: dict[str, Any] | None = None,
                 **variables: Any) -> M:
        """Render ``prompts/<template>.j2``, ask, and return the validated answer (one repair retry).

        A ``structured`` model (the local one) is held to a grammar: ``answer_schema`` when the caller narrows
        the answer (distill: only the ids it was given), else ``schema``'s own JSON schema where a grammar can
        express it. The answer is validated against ``schema`` either way."""
        system, user = render(template, **variables)
        grammar = self._grammar(schema, answer_schema)
        text = self.complete(system, user, grammar)
        try:
            return parse_json(text, schema)
        except LLMError as first:
            repair = (f"{user}\n\nYour previous answer could not be used: {first}\n"
                      "Answer again with only the JSON object, nothing else.")
            return parse_json(self.complete(system, repair, grammar), schema)

    def _grammar(self, schema: type[M], answer_schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if not self.structured:
            return None
        try:
            return json_schema.for_grammar(answer_schema or schema.model_json_schema())
        except json_schema.Unsupported:
            return None  # a shape no grammar holds: the model answers free text, validated as ever


def render(template: str, **variables: Any) -> tuple[str, str]:
    """The (system, user) prompts of a template: its ``system`` and ``user`` blocks."""
    tpl = _templates.get_template(f"{template}.j2")
    context = tpl.new_context(variables)
    system = "".join(tpl.blocks["system"](context)).strip()
    user = "".join(tpl.blocks["user"](context)).strip()
    return system, user


def extract_json(text: str) -> Any:
    """The first JSON object in ``text``: in a code fence, or amid chatter."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = json.JSONDecoder().raw_decode(candidate[start:])
                if isinstance(value, dict):
                    return value
            except json.JSONDecodeError:
                pass
            start = candidate.find("{", start + 1)
    raise LLMError("the answer holds no JSON object")


def parse_json(text: str, schema: type[M]) -> M:
    data = extract_json(text)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()[:5])
        raise LLMError(f"the JSON does not match the expected shape: {problems}") from None
