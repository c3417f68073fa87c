"""Which of the agent's tool calls ran each command, or whether its own machinery did (``by``)."""

from __future__ import annotations

import shlex
from typing import Any, Iterable

from bot.replay.trace.events import UNATTRIBUTED, CommandEvent, ShellEvent, ToolCallEvent, TraceEvent


def attribute(events: Iterable[TraceEvent]) -> list[TraceEvent]:
    """The events, each command's ``by`` decided: one of the agent's tool calls ran it, or its own machinery.

    A command carries the tool call id the agent adapter set (``builtin``), or
    the id of the ``$SHELL`` it ran under (``shell:…``, Claude Code). A shell
    runs a tool call when the tool call's command occurs in the shell's
    arguments; a shell that runs none (Claude Code's shell snapshot) and a
    command under no shell or tool call (its own git calls) are the agent's
    machinery. Where the trace cannot tell (no ids: an old trace; no tool
    calls: an agent that reports none, a ``command`` agent, whose execs outside
    a shell count as well), ``by`` stays None and counts as a tool call.
    """
    events = list(events)
    commands = [e for e in events if isinstance(e, CommandEvent)]
    if not any(c.tool_call and c.tool_call != UNATTRIBUTED for c in commands):
        return events  # (a command of no known origin says nothing of the others: they all still count)
    tools = [e for e in events if isinstance(e, ToolCallEvent)]
    runs_of = {e.id: next((t.id for t in tools if _runs(e.argv, t)), None)
               for e in events if isinstance(e, ShellEvent)}
    out = []
    for event in events:
        if isinstance(event, CommandEvent) and event.by is None:
            event = event.model_copy(update=_origin(event, runs_of, bool(tools)))
        out.append(event)
    return out


def attribute_new(earlier: list[TraceEvent], new: list[TraceEvent]) -> list[TraceEvent]:
    """``new`` events (the command log), attributed against the trace so far (its tool calls)."""
    return attribute([*earlier, *new])[len(earlier):]


def _runs(shell_argv: list[str], tool: ToolCallEvent) -> bool:
    """Whether a shell ran this tool call's command: as its whole script (``-c CMD``), or as
    Claude Code's ``eval 'CMD'`` after its snapshot. Exact, so a short command such as ``ls``
    is not found inside the snapshot script."""
    command = tool.input.get("command") if isinstance(tool.input, dict) else None
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = shlex.join(command)
    if not isinstance(command, str) or not command.strip() or not shell_argv:
        return False
    script = shell_argv[-1]
    if script.strip() == _inner_script(command).strip():  # Codex: the call is `/bin/bash -c 'CMD'`, whole
        return True
    quoted = {shlex.quote(command), "'" + command.replace("'", "'\\''") + "'"}
    return script.strip() == command.strip() or any(f"eval {q}" in script for q in quoted)


_SHELLS = ("bash", "sh", "dash", "zsh")


def _inner_script(command: str) -> str:
    """``CMD`` when a tool call's command is itself ``bash -c CMD`` (or ``-lc``); else the command."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in _SHELLS and argv[-2] in ("-c", "-lc"):
        return argv[-1]
    return command


def _origin(event: CommandEvent, runs_of: dict[str, str | None], has_tools: bool) -> dict[str, Any]:
    marker = event.tool_call or ""
    if not marker.startswith("shell:"):
        # Outside every shell: the agent's own machinery only where it reports its tool calls (their commands
        # then run in shells we can match). A `command` agent reports none: all it runs counts.
        return {"by": "tool" if marker else ("agent" if has_tools else None)}
    if not has_tools:
        return {"by": None}  # an agent that reports no tool calls: every shell may be one
    tool = runs_of.get(marker)
    return {"by": "tool", "tool_call": tool} if tool else {"by": "agent"}
