"""Agents the replay engine can run: ``builtin``, ``claude-code``, ``codex``, ``mini-swe-agent``, ``opencode`` and ``command``.

Every agent gets the same ``AgentRun`` (task, playbook text, sandbox, gateway,
limits) and returns an ``AgentResult``. Agents talk only to the gateway; the
commands they run see only the sandbox's scrubbed environment.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from bot.errors import BadInput

# finished: the agent ended on its own; max_turns: it used every turn (scored:
# looping is behaviour). The rest are infrastructure failures and never scored.
Status = Literal["finished", "max_turns", "crashed", "api_error", "timeout", "budget", "limit"]
UNSCORED = frozenset({"crashed", "api_error", "timeout", "budget", "limit"})  # limit: a sandbox bound was hit


@dataclass
class AgentRun:
    task: str
    system_prompt: str  # the playbook text under test (may be empty)
    sandbox: Any  # bot.replay.sandbox.workspace.Sandbox
    gateway: Any  # bot.replay.gateway.server.Gateway
    model: str
    max_turns: int
    timeout_s: float
    started: float = field(default_factory=time.monotonic)
    on_tool_call: Callable[..., None] | None = None
    scoped: Any = None  # a path-scoped rule given by its host's trigger (bot.replay.agents.scoped_delivery.Scoped)

    @property
    def remaining_s(self) -> float:
        return self.timeout_s - (time.monotonic() - self.started)


@dataclass
class AgentResult:
    status: Status
    final_text: str = ""
    raw: str = ""  # the agent's own output, stored as agent.raw
    reason: str = ""
    turns: int = 0
    version: str = ""
    # instruction files the agent says it loaded (Claude Code's InstructionsLoaded hook): {file, how}; None: it
    # does not say. Only an explanation: whether the rule arrived is the gateway's to tell (bot.replay.delivery).
    loaded: list[dict[str, str]] | None = None

    @property
    def scored(self) -> bool:
        return self.status not in UNSCORED


AGENTS = ("builtin", "claude-code", "codex", "mini-swe-agent", "opencode", "command")


def upstream_env(agent: str) -> tuple[str, str]:
    """(the env var holding the real key, the default upstream URL) for ``agent``'s API shape.

    Codex speaks the OpenAI Responses API; every other agent the Messages API.
    """
    if agent == "codex":
        return "OPENAI_API_KEY", "https://api.openai.com"
    return "ANTHROPIC_API_KEY", "https://api.anthropic.com"


def direct_argv(program: str, sandbox) -> list[str]:
    """How to start an agent program without going through a PATH shim.

    An agent needs the gateway token, which shims scrub, yet it must keep the
    shims on its PATH so the commands it runs are recorded. So it is started
    by its real absolute path, and a ``#!/usr/bin/env node`` script through
    its real interpreter.
    """
    path = program if os.path.isabs(program) else (sandbox.which(program) or program)
    try:
        with open(path, "rb") as handle:
            head = handle.readline(200)
    except OSError:
        return [path]
    words = head[2:].split() if head.startswith(b"#!") else []
    if len(words) >= 2 and words[0].endswith(b"/env"):
        interpreter = words[-1].decode(errors="replace")
        real = sandbox.which(interpreter)
        if real:
            return [real, path]
    return [path]


def make(name: str, *, command: str | None = None):
    """The agent called ``name``; ``command`` is the template of the ``command`` agent."""
    if name == "builtin":
        from bot.replay.agents.builtin import BuiltinAgent

        return BuiltinAgent()
    if name == "claude-code":
        from bot.replay.agents.claude_code import ClaudeCodeAgent

        return ClaudeCodeAgent()
    if name == "codex":
        from bot.replay.agents.codex import CodexAgent

        return CodexAgent()
    if name == "mini-swe-agent":
        from bot.replay.agents.mini_swe import MiniSweAgent

        return MiniSweAgent()
    if name == "opencode":
        from bot.replay.agents.opencode import OpencodeAgent

        return OpencodeAgent()
    if name == "command":
        from bot.replay.agents.command import CommandAgent

        if not command:
            raise BadInput("--agent command needs --command 'TEMPLATE' with {task} and {playbook_file}")
        return CommandAgent(command)
    raise BadInput(f"unknown agent {name!r}; choose one of {', '.join(AGENTS)}")
