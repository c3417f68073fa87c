"""Qwen2.5's chat format (ChatML with tools), rendered and parsed here rather than by the engine.

The conversation arrives from either API front as :class:`Turn` values; :func:`render` lays them out as the
model's own chat template does (tools listed in ``<tools>`` in the system turn, calls as ``<tool_call>`` JSON,
results as ``<tool_response>`` in a user turn). The prompt is a list of segments: the template's markers are
special tokens, every text that came in a request is tokenized as plain text, so a request cannot forge a turn.

:func:`parse` turns the model's answer back into blocks: text, and each well-formed tool call to a tool the
request offered; an answer that is nothing but one such call's JSON (bare or in a ```json fence, as a 1.5B model
often writes it) is that call too. A malformed call (not JSON, no name, an unknown tool, arguments that are not an
object) stays text: the agent decides what it means.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
OPEN_CALL, CLOSE_CALL = "<tool_call>", "</tool_call>"
_TOOLS_INTRO = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
_TOOLS_OUTRO = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')

Segment = tuple[str, bool]  # (text, whether it is special tokens)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Turn:
    role: str  # "system", "user", "assistant" or "tool"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def key(content: str, calls: "list[ToolCall] | tuple[ToolCall, ...]") -> str:
    """What identifies an assistant turn however a client sends it back (blanks and call ids aside)."""
    return json.dumps([re.sub(r"\s+", "", content), [[c.name, c.arguments] for c in calls]], sort_keys=True)


def render(system: str | None, turns: list[Turn], tools: list[Tool],
           verbatim: dict[str, str] | None = None) -> list[Segment]:
    """The prompt for ``turns`` after ``system`` with ``tools``, ending where the assistant's answer begins.
    ``verbatim``: for an assistant turn whose :func:`key` it holds, the text the model wrote, used as it was."""
    out: list[Segment] = [("<|im_start|>", True), ("system\n", False), (system or DEFAULT_SYSTEM, False)]
    if tools:
        out.append((_TOOLS_INTRO + "".join("\n" + _dumps(t.schema()) for t in tools) + _TOOLS_OUTRO, False))
    out += [("<|im_end|>", True), ("\n", False)]
    for i, turn in enumerate(turns):
        if turn.role == "tool":
            if i == 0 or turns[i - 1].role != "tool":
                out += [("<|im_start|>", True), ("user", False)]
            out.append((f"\n<tool_response>\n{turn.content}\n</tool_response>", False))
            if i == len(turns) - 1 or turns[i + 1].role != "tool":
                out += [("<|im_end|>", True), ("\n", False)]
        elif turn.role == "assistant" and verbatim and (raw := verbatim.get(key(turn.content, turn.tool_calls))):
            out += [("<|im_start|>", True), ("assistant\n" + raw, False), ("<|im_end|>", True), ("\n", False)]
        elif turn.role == "assistant" and turn.tool_calls:
            text = "assistant" + (f"\n{turn.content}" if turn.content else "")
            for call in turn.tool_calls:
                text += f'\n{OPEN_CALL}\n{{"name": "{call.name}", "arguments": {_dumps(call.arguments)}}}\n{CLOSE_CALL}'
            out += [("<|im_start|>", True), (text, False), ("<|im_end|>", True), ("\n", False)]
        else:
            out += [("<|im_start|>", True), (f"{turn.role}\n{turn.content}", False), ("<|im_end|>", True),
                    ("\n", False)]
    out += [("<|im_start|>", True), ("assistant\n", False)]
    return _merged(out)


def _merged(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for text, special in segments:
        if out and out[-1][1] == special and not special:
            out[-1] = (out[-1][0] + text, special)
        else:
            out.append((text, special))
    return out


@dataclass(frozen=True)
class Answer:
    """The model's answer as blocks: ("text", str) or ("tool_use", ToolCall), in order."""

    blocks: tuple[tuple[str, Any], ...]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b for kind, b in self.blocks if kind == "tool_use"]

    @property
    def text(self) -> str:
        return "".join(b for kind, b in self.blocks if kind == "text")


_CALL = re.compile(re.escape(OPEN_CALL) + r"(.*?)(?:" + re.escape(CLOSE_CALL) + r"|\Z)", re.S)


def parse(raw: str, tools: list[Tool]) -> Answer:
    """The blocks of the answer ``raw``; text around the calls is kept, stripped, when it is not blank."""
    names = {t.name for t in tools}
    blocks: list[tuple[str, Any]] = []
    pending = ""
    at = 0
    for match in _CALL.finditer(raw):
        pending += raw[at:match.start()]
        at = match.end()
        call = _call(match.group(1), names)
        if call is None:
            pending += match.group(0)
            continue
        if pending.strip():
            blocks.append(("text", pending.strip() if blocks else pending.rstrip()))
        pending = ""
        blocks.append(("tool_use", call))
    pending += raw[at:]
    if not blocks and names and (bare := _call(_unfenced(pending), names)) is not None:
        return Answer((("tool_use", bare),))  # the whole answer is one call, without its tags (a small model's habit)
    if pending.strip():
        blocks.append(("text", pending.strip() if blocks else pending.rstrip()))
    return Answer(tuple(blocks))


_FENCE = re.compile(r"\A```(?:json)?\s*\n(.*?)\n?```\Z", re.S)


def _unfenced(text: str) -> str:
    match = _FENCE.match(text.strip())
    return match.group(1) if match else text


def _call(body: str, names: set[str]) -> ToolCall | None:
    try:
        data = json.loads(body.strip())
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("name") not in names:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(name=data["name"], arguments=arguments)


def streamable(raw: str, tools: bool = True) -> str:
    """How much of a partial answer can be streamed as text already: up to the first tool call (or what may
    be the start of one), less trailing blanks, which the final answer strips. With ``tools``, an answer that
    opens like JSON or a fence may turn out to be a bare call: none of it is text yet."""
    if tools and raw.lstrip().startswith(("{", "`")):
        return ""
    cut = raw.find(OPEN_CALL)
    if cut < 0:
        cut = len(raw)
        for n in range(min(len(OPEN_CALL) - 1, len(raw)), 0, -1):
            if OPEN_CALL.startswith(raw[-n:]):
                cut = len(raw) - n
                break
    return raw[:cut].rstrip()
