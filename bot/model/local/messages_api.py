"""The Anthropic Messages API, as the local model server speaks it: a request read into :class:`Request`, an
answer written back as a message body or as its server-sent events (``usage`` in both ``message_start`` and
``message_delta``: the SDK needs both).

Accepted: ``system`` (text or text blocks), ``messages`` with text, ``tool_use`` and ``tool_result`` blocks (and
``role: "system"`` entries, as Claude Code sends), ``tools`` (``input_schema``), ``max_tokens``, ``temperature``,
``top_p``, ``top_k``, ``stop_sequences``, ``stream``, ``tool_choice``. Images and documents are replaced by a note
saying they were left out (the model reads text only). ``tool_choice`` ``{"type": "any"}`` or ``{"type": "tool",
"name": ...}`` is held by a grammar (:func:`call_schema`): the answer can only be one call to an offered tool, its
arguments of that tool's input schema; ``auto`` and ``none`` leave the answer free.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from bot.model import json_schema
from bot.model.local.chatml import Answer, Tool, ToolCall, Turn

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               413: "request_too_large", 500: "api_error", 504: "api_error", 529: "overloaded_error"}


class RequestError(ValueError):
    """The request cannot be served as sent (an HTTP 400 unless ``status`` says otherwise)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Request:
    """A request of either API, read: what the model sees, and how to answer."""

    system: str | None
    turns: list[Turn]
    tools: list[Tool]
    max_tokens: int
    stream: bool = False
    model: str = ""
    stop: tuple[str, ...] = ()
    sampling: dict[str, Any] = field(default_factory=dict)
    json_schema: dict[str, Any] | None = None  # the answer is JSON of this schema (a grammar; bot.model.json_schema)
    forced_call: bool = False  # json_schema is call_schema(tools): the answer is one tool call


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"{where}: content must be a string or a list of blocks")
    parts = []
    for block in content:
        if not isinstance(block, dict):
            raise RequestError(f"{where}: each content block must be an object")
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") in ("image", "document"):
            parts.append(f"[{block['type']} left out: this model reads text only]")
    return "\n".join(parts)


def _number(body: dict[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise RequestError(f"{key}: must be a number")
    return kind(value)


def read(body: Any) -> Request:
    """The Messages API request ``body``; :class:`RequestError` naming the field that is wrong."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    max_tokens = _number(body, "max_tokens", int)
    if max_tokens is None or max_tokens < 1:
        raise RequestError("max_tokens: required, a positive integer")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: required, a non-empty list")
    system = body.get("system")
    system_text = _text(system, "system") if system is not None else None
    turns: list[Turn] = []
    for i, message in enumerate(messages):
        turns += _turns(message, f"messages.{i}")
    tools = []
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise RequestError(f"tools.{i}: each tool needs a name")
        if "input_schema" in tool:
            tools.append(Tool(tool["name"], str(tool.get("description") or ""), tool.get("input_schema") or {}))
    stops = body.get("stop_sequences") or []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise RequestError("stop_sequences: a list of non-empty strings")
    sampling = {k: v for k in ("temperature", "top_p") if (v := _number(body, k, float)) is not None}
    if (top_k := _number(body, "top_k", int)) is not None:
        sampling["top_k"] = top_k
    output = body.get("output_config") or {}
    if not isinstance(output, dict):
        raise RequestError("output_config: an object")
    form = output.get("format", body.get("output_format"))  # GA name, and the structured-outputs beta's
    schema = None
    if form is not None:
        if not isinstance(form, dict) or form.get("type") != "json_schema" or not isinstance(form.get("schema"), dict):
            raise RequestError('output_config.format: {"type": "json_schema", "schema": {...}}')
        schema = json_schema_of(form["schema"], "output_config.format.schema", tools)
    forced = _forced_tool(body.get("tool_choice"), tools)
    if forced is not None:
        schema = call_schema(tools, forced, "tool_choice")
    return Request(system=system_text, turns=turns, tools=tools, max_tokens=max_tokens, stream=body.get("stream") is True,
                   model=str(body.get("model") or ""), stop=tuple(stops), sampling=sampling, json_schema=schema,
                   forced_call=forced is not None)


def _forced_tool(choice: Any, tools: list[Tool]) -> str | None:
    """``tool_choice`` read: None (the answer is free), "" (any offered tool) or the one tool's name."""
    if choice is None:
        return None
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise RequestError('tool_choice: {"type": "auto" | "any" | "none"} or {"type": "tool", "name": ...}')
    if choice["type"] in ("auto", "none"):
        return None
    if choice["type"] == "any":
        return ""
    name = choice.get("name")
    if not isinstance(name, str) or name not in {t.name for t in tools}:
        raise RequestError("tool_choice.name: the name of one of the request's tools")
    return name


def call_schema(tools: list[Tool], only: str, where: str) -> dict[str, Any]:
    """The grammar of an answer that is one call: ``{"name": N, "arguments": {...}}`` for an offered tool N (``only``,
    when not empty), its arguments of N's input schema; RequestError naming ``where`` and the tool whose schema a
    grammar cannot hold."""
    if not tools:
        raise RequestError(f"{where}: a tool call is required, but the request offers no tools")
    options = []
    for i, tool in enumerate(tools):
        if only and tool.name != only:
            continue
        try:
            arguments = json_schema.for_grammar(tool.parameters or {"type": "object", "properties": {}})
        except json_schema.Unsupported as exc:
            raise RequestError(f"tools.{i} ({tool.name}): its input schema cannot be held by a grammar: {exc}") from None
        options.append({"type": "object", "properties": {"name": {"const": tool.name}, "arguments": arguments},
                        "required": ["name", "arguments"]})
    schema = options[0] if len(options) == 1 else {"oneOf": options}
    if len(json.dumps(schema)) > json_schema.MAX_BYTES:
        raise RequestError(f"{where}: the tools' input schemas are larger than {json_schema.MAX_BYTES} bytes")
    return schema


def json_schema_of(schema: dict[str, Any], where: str, tools: list[Tool]) -> dict[str, Any]:
    """A request's answer schema, in the subset the engine compiles; RequestError naming ``where``."""
    if tools:
        raise RequestError(f"{where}: not with tools; this server constrains a plain answer only")
    if len(json.dumps(schema)) > json_schema.MAX_BYTES:
        raise RequestError(f"{where}: larger than {json_schema.MAX_BYTES} bytes")
    try:
        return json_schema.for_grammar(schema)
    except json_schema.Unsupported as exc:
        raise RequestError(f"{where}: {exc}") from None


def _turns(message: Any, where: str) -> list[Turn]:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
        raise RequestError(f"{where}: role must be user or assistant")
    role, content = message["role"], message.get("content")
    if isinstance(content, str) or role == "system":
        return [Turn(role, _text(content, where))]
    if not isinstance(content, list):
        raise RequestError(f"{where}.content: must be a string or a list of blocks")
    out: list[Turn] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            result = _text(block.get("content") or "", f"{where}.content.{j}")
            out.append(Turn("tool", ("Error: " if block.get("is_error") else "") + result))
        elif kind == "tool_use":
            if not isinstance(block.get("name"), str) or not isinstance(block.get("input", {}), dict):
                raise RequestError(f"{where}.content.{j}: a tool_use needs a name and an input object")
            calls.append(ToolCall(block["name"], block.get("input") or {}, str(block.get("id") or "")))
        elif kind is None:
            raise RequestError(f"{where}.content.{j}: each block must be an object with a type")
        else:
            texts.append(_text([block], f"{where}.content.{j}"))
    text = "\n".join(t for t in texts if t)
    if role == "assistant":
        return [Turn("assistant", text, tuple(calls))]
    return out + ([Turn("user", text)] if text or not out else [])


def tool_id() -> str:
    return "toolu_" + secrets.token_hex(12)


def message(answer: Answer, *, model: str, stop_reason: str, usage: dict[str, int],
            stop_sequence: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for kind, value in answer.blocks:
        if kind == "text":
            content.append({"type": "text", "text": value})
        else:
            content.append({"type": "tool_use", "id": value.id or tool_id(), "name": value.name,
                            "input": value.arguments})
    return {"id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage}


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class Stream:
    """The events of one streamed answer: text as it comes, the remaining blocks once the answer is parsed."""

    def __init__(self, model: str):
        self.model, self.id = model, "msg_" + secrets.token_hex(12)
        self.index = 0
        self.open_text = False
        self.sent = ""

    def start(self, usage: dict[str, int]) -> list[dict[str, Any]]:
        start = {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                 "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 0}}
        return [{"type": "message_start", "message": start}]

    def text(self, streamable: str) -> list[dict[str, Any]]:
        """Events for the answer's text so far (``streamable``: what :func:`chatml.streamable` allows)."""
        if len(streamable) <= len(self.sent) or not streamable.startswith(self.sent):
            return []
        out = []
        if not self.open_text:
            out.append({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
            self.open_text = True
        out.append({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": streamable[len(self.sent):]}})
        self.sent = streamable
        return out

    def finish(self, answer: Answer, *, stop_reason: str, usage: dict[str, int],
               stop_sequence: str | None = None) -> list[dict[str, Any]]:
        blocks = list(answer.blocks)
        out: list[dict[str, Any]] = []
        if blocks and blocks[0][0] == "text" and (self.open_text or not self.sent):
            out += self.text(blocks.pop(0)[1]) if blocks[0][1].startswith(self.sent) else []
        if self.open_text:
            out.append({"type": "content_block_stop", "index": 0})
            self.index = 1
        for i, block in enumerate(message(Answer(tuple(blocks)), model=self.model, stop_reason=stop_reason,
                                          usage=usage)["content"], start=self.index):
            if block["type"] == "text":
                out += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                        {"type": "content_block_delta", "index": i,
                         "delta": {"type": "text_delta", "text": block["text"]}}]
            else:
                out += [{"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}},
                        {"type": "content_block_delta", "index": i,
                         "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}]
            out.append({"type": "content_block_stop", "index": i})
        out.append({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                    "usage": {"output_tokens": usage["output_tokens"]}})
        out.append({"type": "message_stop"})
        return out
