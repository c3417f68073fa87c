"""The SIMULATED model for analysis prompts (capture, distill, reflection).

Where ``Policy`` scripts an agent's tool calls, an ``AnswerBook`` scripts
text answers: each entry names a text to look for in the request's last user
message and the answer to give. The first entry that matches answers; with
none, it says so plainly, so a missing script shows up as a bad answer the
caller handles, never as a silent success. It plugs into the same
``Gateway`` as a policy, so tests and the offline demo drive the real
anthropic SDK over HTTP.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from bot.replay.gateway.policy import (
    SIM_TAG,
    SIMULATED_MODEL,
    Reply,
    estimate_input_tokens,
    estimate_tokens,
)


@dataclass
class Answer:
    match: str  # text looked for in the last user message ("" matches anything)
    text: str  # the answer
    times: int | None = None  # how often it may answer; None: always


@dataclass
class AnswerBook:
    answers: list[Answer] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, match: str, text: str, times: int | None = None) -> "AnswerBook":
        self.answers.append(Answer(match, text, times))
        return self

    def respond(self, request: dict[str, Any]) -> Reply:
        prompt = _last_user_text(request)
        with self._lock:
            self.requests.append(request)
            answer = next((a for a in self.answers if a.match in prompt and a.times != 0), None)
            if answer is not None and answer.times is not None:
                answer.times -= 1
        text = answer.text if answer else f"{SIM_TAG} no scripted answer matches this prompt"
        content = [{"type": "text", "text": f"{SIM_TAG} scripted answer"}, {"type": "text", "text": text}]
        message = {
            "id": f"msg_sim_answer_{len(self.requests):05d}", "type": "message", "role": "assistant",
            "model": SIMULATED_MODEL, "content": content, "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": estimate_input_tokens(request), "output_tokens": estimate_tokens(content),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }
        return Reply(message, "answer", len(self.requests) - 1)


def _last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    return ""
