"""The OpenAI-style Chat Completions API (``POST /v1/chat/completions``), as the CLI agents' clients speak it
(litellm under mini-swe-agent, opencode): messages with ``tool_calls`` and ``role: "tool"`` results, ``tools``
of ``type: "function"``, streaming chunks ending in ``data: [DONE]``, and ``usage`` (in the last chunk too
when ``stream_options.include_usage`` asks)."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from bot.model.local.chatml import Answer, Tool, ToolCall, Turn
from bot.model.local.messages_api import Request, RequestError, call_schema, json_schema_of

FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop"}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _content(value: Any, where: str) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) and p.get("type") == "text"
                         else "[content left out: this model reads text only]" for p in value)
    raise RequestError(f"{where}.content: a string or a list of parts")


def read(body: Any) -> Request:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: required, a non-empty list")
    system: str | None = None
    turns: list[Turn] = []
    for i, m in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise RequestError(f"{where}.role: system, user, assistant or tool")
        text = _content(m.get("content"), where)
        if m["role"] in ("system", "developer"):
            if not turns and system is None:
                system = text
            else:
                turns.append(Turn("system", text))
        elif m["role"] == "assistant":
            turns.append(Turn("assistant", text, tuple(_calls(m.get("tool_calls") or [], where))))
        else:
            turns.append(Turn(m["role"], text))
    tools = []
    for i, t in enumerate(body.get("tools") or []):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise RequestError(f"tools.{i}: a function with a name")
        tools.append(Tool(fn["name"], str(fn.get("description") or ""), fn.get("parameters") or {}))
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise RequestError("max_tokens: a positive integer")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise RequestError("stop: a string or a list of strings")
    sampling: dict[str, Any] = {}
    for key in ("temperature", "top_p", "seed"):
        value = body.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise RequestError(f"{key}: must be a number")
            sampling[key] = int(value) if key == "seed" else float(value)
    form = body.get("response_format")
    schema = None
    if form is not None and not (isinstance(form, dict) and form.get("type") == "text"):
        inner = form.get("json_schema") if isinstance(form, dict) else None
        if not (isinstance(form, dict) and form.get("type") == "json_schema" and isinstance(inner, dict)
                and isinstance(inner.get("schema"), dict)):
            raise RequestError('response_format: {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}')
        schema = json_schema_of(inner["schema"], "response_format.json_schema.schema", tools)
    forced = _forced_tool(body.get("tool_choice"), tools)
    if forced is not None:
        schema = call_schema(tools, forced, "tool_choice")
    return Request(system=system, turns=turns, tools=tools, max_tokens=limit or 0, stream=body.get("stream") is True,
                   model=str(body.get("model") or ""), stop=tuple(stop), sampling=sampling, json_schema=schema,
                   forced_call=forced is not None)


def _forced_tool(choice: Any, tools: list[Tool]) -> str | None:
    """``tool_choice`` read: None (free), "" (``"required"``: any offered tool) or the one function's name."""
    if choice is None or choice in ("auto", "none"):
        return None
    if choice == "required":
        return ""
    fn = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(fn, dict):
        raise RequestError('tool_choice: "auto", "none", "required" or {"type": "function", "function": {"name": ...}}')
    if fn.get("name") not in {t.name for t in tools}:
        raise RequestError("tool_choice.function.name: the name of one of the request's tools")
    return str(fn["name"])


def include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _calls(raw: Any, where: str) -> list[ToolCall]:
    out = []
    for j, call in enumerate(raw if isinstance(raw, list) else []):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise RequestError(f"{where}.tool_calls.{j}: a function with a name")
        args = fn.get("arguments") or "{}"
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            parsed = {"_raw": args}  # the model's own malformed call, sent back: kept, never refused
        out.append(ToolCall(fn["name"], parsed if isinstance(parsed, dict) else {"_raw": parsed}, str(call.get("id") or "")))
    return out


def _tool_calls(answer: Answer) -> list[dict[str, Any]]:
    return [{"id": c.id or "call_" + secrets.token_hex(12), "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in answer.tool_calls]


def usage(prompt_tokens: int, completion_tokens: int, cached: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": {"cached_tokens": cached}}


def completion(answer: Answer, *, model: str, stop_reason: str, usage_: dict[str, Any]) -> dict[str, Any]:
    calls = _tool_calls(answer)
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-" + secrets.token_hex(12), "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": FINISH[stop_reason]}],
            "usage": usage_}


class Stream:
    """The chunks of one streamed answer."""

    def __init__(self, model: str):
        self.model, self.id, self.created = model, "chatcmpl-" + secrets.token_hex(12), int(time.time())
        self.sent = ""

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def start(self) -> list[dict[str, Any]]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def text(self, streamable: str) -> list[dict[str, Any]]:
        if len(streamable) <= len(self.sent) or not streamable.startswith(self.sent):
            return []
        piece, self.sent = streamable[len(self.sent):], streamable
        return [self._chunk({"content": piece})]

    def finish(self, answer: Answer, *, stop_reason: str, usage_: dict[str, Any] | None) -> list[dict[str, Any]]:
        text = answer.text
        out = self.text(text) if text.startswith(self.sent) else []
        for i, call in enumerate(_tool_calls(answer)):
            out.append(self._chunk({"tool_calls": [{"index": i, **call}]}))
        out.append(self._chunk({}, FINISH[stop_reason]))
        if usage_ is not None:
            out.append({**self._chunk({}), "choices": [], "usage": usage_})
        return out
