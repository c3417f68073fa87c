"""The OpenAI Responses API shape (``POST /v1/responses``), as Codex CLI speaks it.

The gateway's simulated model answers Messages API requests, so a Responses
request is translated into one (instructions and developer messages become
the system text; ``function_call`` / ``function_call_output`` items become
``tool_use`` / ``tool_result`` blocks; the agent's shell tool is offered as
``bash``), and the Messages answer is translated back, streamed as Responses
SSE events. Usage is counted from the ``response.completed`` event (or the
JSON body), in the same ``Usage`` the Messages API fills: cached input tokens
count as cache reads, the rest as input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# The shell tools Codex offers, and how a command string becomes their arguments.
_SHELL_TOOLS = {
    "exec_command": lambda cmd: {"cmd": cmd, "login": False, "tty": False},
    "shell_command": lambda cmd: {"command": cmd},
    "shell": lambda cmd: {"command": ["bash", "-lc", cmd]},
}
_BASH_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p]
    return []


def shell_tool(request: dict[str, Any]) -> str | None:
    names = {t.get("name") for t in request.get("tools") or [] if isinstance(t, dict)}
    return next((n for n in _SHELL_TOOLS if n in names), None)


def _is_instructions(text: str) -> bool:
    # Codex sends AGENTS.md as a user message: it is instructions, not the task.
    return text.lstrip().startswith("# AGENTS.md instructions")


def to_messages(request: dict[str, Any]) -> dict[str, Any]:
    """A Messages API request body with the same meaning, for the simulated model."""
    system = _texts(request.get("instructions"))
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in request.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "message" and role in ("developer", "system"):
            system += _texts(item.get("content"))
        elif kind == "message" and role in ("user", "assistant"):
            for text in _texts(item.get("content")):
                if role == "user" and _is_instructions(text):
                    system.append(text)
                else:
                    add(role, {"type": "text", "text": text})
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            add("assistant", {"type": "tool_use", "id": str(item.get("call_id") or item.get("id")),
                              "name": str(item.get("name") or kind), "input": {}})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            add("user", {"type": "tool_result", "tool_use_id": str(item.get("call_id")), "content": text})
    tools = [{"name": "bash", "description": "Run a shell command.", "input_schema": _BASH_SCHEMA}] \
        if shell_tool(request) else []
    return {"model": request.get("model"), "system": "\n".join(system), "messages": messages, "tools": tools,
            "stream": bool(request.get("stream"))}


def from_message(message: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The Responses API ``response`` object for a Messages API answer."""
    shell = shell_tool(request)
    output: list[dict[str, Any]] = []
    for i, block in enumerate(message.get("content") or []):
        if block.get("type") == "text":
            output.append({"type": "message", "id": f"msg_{message['id']}_{i}", "role": "assistant",
                           "status": "completed",
                           "content": [{"type": "output_text", "text": block["text"], "annotations": []}]})
        elif block.get("type") == "tool_use" and shell:
            command = str((block.get("input") or {}).get("command", ""))
            output.append({"type": "function_call", "id": f"fc_{block['id']}", "call_id": block["id"],
                           "name": shell, "arguments": json.dumps(_SHELL_TOOLS[shell](command)),
                           "status": "completed"})
    usage = message.get("usage") or {}
    return {
        "id": "resp_" + str(message.get("id", "")), "object": "response", "status": "completed",
        "model": message.get("model"), "output": output,
        "usage": {"input_tokens": usage.get("input_tokens", 0), "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": usage.get("output_tokens", 0), "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": usage.get("input_tokens", 0) + usage.get("output_tokens", 0)},
    }


def response_events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The SSE events that deliver ``response``, in Responses API order."""
    seq = iter(range(1_000_000))
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "sequence_number": next(seq), "response": start}
    for index, item in enumerate(response["output"]):
        empty = {**item, "content": []} if item["type"] == "message" else {**item, "arguments": ""}
        yield {"type": "response.output_item.added", "sequence_number": next(seq), "output_index": index,
               "item": {**empty, "status": "in_progress"}}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield {"type": "response.output_text.delta", "sequence_number": next(seq), "item_id": item["id"],
                   "output_index": index, "content_index": 0, "delta": text}
        else:
            yield {"type": "response.function_call_arguments.delta", "sequence_number": next(seq),
                   "item_id": item["id"], "output_index": index, "delta": item["arguments"]}
        yield {"type": "response.output_item.done", "sequence_number": next(seq), "output_index": index, "item": item}
    yield {"type": "response.completed", "sequence_number": next(seq), "response": response}


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def add_usage(usage: Any, body: dict[str, Any]) -> None:
    """Fill a gateway ``Usage`` from a response body or a ``response.completed``/``response.incomplete`` event."""
    response = body.get("response") if "response" in body and isinstance(body.get("response"), dict) else body
    if body.get("type") not in (None, "response.completed", "response.incomplete", "response.failed"):
        return
    raw = response.get("usage") or {}
    if not isinstance(raw, dict):
        return
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens") or 0
    if isinstance(raw.get("input_tokens"), int):
        usage.input_tokens = max(0, raw["input_tokens"] - int(cached))
        usage.cache_read_input_tokens = int(cached)
    if isinstance(raw.get("output_tokens"), int):
        usage.output_tokens = raw["output_tokens"]
    usage.stop_reason = response.get("status") or usage.stop_reason
