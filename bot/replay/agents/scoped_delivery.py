"""A path-scoped rule, given to an agent only when its host's trigger fires (``bot.playbook.scope``).

The harness's own agents stand for a host and get the rule as that host would give it:

- ``builtin`` stands for Claude Code (trigger ``read``): the rule reaches it only after a tool call opens a file
  its globs match (``read``, ``write`` or ``edit`` of it, or a ``bash`` ``cat``/``head``/``tail``/``sed``… naming
  it, as Claude Code 2.1.328 did here), as a ``<system-reminder>`` text block in the next request, once.
- ``mini-swe-agent`` stands for Codex (trigger ``start-cwd``): the rule is read once, at start, only when the
  folder it starts in (the repository root) lies under one of the rule's folders, so a folder-scoped rule never
  reaches it; a glob with no folder is Codex's root AGENTS.md, whole, and stays in its system prompt.

The engine builds a :class:`Scoped` (:func:`plan`), puts it on the ``AgentRun``, feeds it every tool call
(:meth:`Scoped.observe`, also for Claude Code, whose own files deliver the rule), and after the run holds the
gateway's sightings against it (:meth:`Scoped.settle`): a rule seen before its trigger fired, or with no trigger
at all, is a delivery error, never a scored trial; a rule withheld because its trigger never fired is the trial the
host would give, scored as it is (``withheld``).
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from bot.replay import host_scope as scope
from bot.replay.delivery import SCOPED_REMINDER, Delivery, normalise

#: Shell programs whose file arguments Claude Code treats as reading the file (seen: cat, head, sed -n).
READERS = frozenset({"cat", "head", "tail", "sed", "less", "more", "nl", "bat"})
_FILE_ARGS = ("path", "file_path", "filePath")
_SEPARATORS = frozenset({";", "&&", "||", "|", "&"})


def reminder(text: str) -> str:
    """The block a scoped rule arrives in, as Claude Code shows a loaded rule file."""
    return f"{SCOPED_REMINDER}{text.strip()}\n</system-reminder>"


def opened(name: str, args: Any, root: str = "") -> list[str]:
    """The files (relative to ``root``) a tool call opens: a file tool's path, or the arguments of a shell read
    (``cat a.py``). Paths outside ``root`` or with ``..`` are left out; a command that does not parse opens none."""
    if not isinstance(args, dict):
        return []
    if name.lower() in ("bash", "exec_command", "shell"):
        command = args.get("command")
        return [p for p in map(lambda a: _relative(a, root), _shell_reads(command)) if p] if isinstance(
            command, str) else []
    return [p for key in _FILE_ARGS if isinstance(args.get(key), str) and (p := _relative(args[key], root))]


def _shell_reads(command: str) -> list[str]:
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        return []
    out, start = [], True
    program = ""
    for word in words:
        if word in _SEPARATORS:
            start = True
            continue
        if start:
            program, start = posixpath.basename(word), False
            continue
        if program in READERS and not word.startswith("-") and not word.isdigit():  # `head -n 3 f`
            out.append(word)
    return out


def _relative(path: str, root: str) -> str | None:
    if root and path.startswith(root.rstrip("/") + "/"):
        path = path[len(root.rstrip("/")) + 1:]
    if path.startswith("/") or "\0" in path:
        return None
    path = posixpath.normpath(path)
    return None if path == ".." or path.startswith("../") else path


@dataclass
class Scoped:
    """One run's scoped rule: the globs that fire it, and when it fired and reached the agent."""

    rule: str
    globs: tuple[str, ...]
    host: str                       # the host whose trigger applies (scope.DELIVERY)
    agent: str
    inject: bool = True             # the harness delivers it (builtin, mini-swe-agent); else the host's files do
    fired_by: str = ""              # the tool call that fired the trigger
    fired_at: int | None = None     # the request (1-based) the harness first put it in

    @property
    def trigger(self) -> str | None:
        return scope.DELIVERY[self.host].scoped_by

    def observe(self, name: str, args: Any, root: str = "") -> None:
        """One tool call the agent made; the first that opens a matching file fires a ``read`` trigger."""
        if self.fired_by or self.trigger != "read":
            return
        hit = next((p for p in opened(name, args, root) if scope.matches(p, self.globs)), None)
        if hit:
            self.fired_by = f"{name} opened {hit}"

    def at_start(self, start: str = "") -> str:
        """``start-cwd``: the rule's text when the folder the agent starts in (relative) is under its globs."""
        if self.trigger == "start-cwd" and scope.matches(start or ".", self.globs) and self.fired_at is None:
            self.fired_by, self.fired_at = f"started in {start or 'the root'}", 1
            return "\n\n" + self.rule.strip()
        return ""

    def pending(self, next_request: int) -> list[dict[str, str]]:
        """``read``: the text block to add to the next request, once, after the trigger fired."""
        if not self.inject or not self.fired_by or self.fired_at is not None:
            return []
        self.fired_at = next_request
        return [{"type": "text", "text": reminder(self.rule)}]

    def settle(self, got: Delivery, sightings: list[bool]) -> Delivery:
        """``got`` held against the trigger: seen with no trigger, or before it, is a delivery error."""
        first = next((i + 1 for i, hit in enumerate(sightings) if hit), None)
        got.how = f"{got.how}, scoped to {', '.join(self.globs)} (trigger `{self.trigger}`, as {self.host})"
        fired = bool(self.fired_by)
        if first is not None and not fired:
            got.error = (f"delivery error: the rule scoped to {', '.join(self.globs)} reached the agent at request "
                         f"{first}, but its trigger (`{self.trigger}`) never fired")
        elif first is not None and self.inject and self.fired_at is not None and first < self.fired_at:
            got.error = (f"delivery error: the rule reached the agent at request {first}, before its trigger fired "
                         f"({self.fired_by}, for request {self.fired_at})")
        elif first is None and fired and self.inject and (self.fired_at or 0) <= len(sightings):
            got.error = (f"delivery error: the harness added the rule to request {self.fired_at} ({self.fired_by}) "
                         "but the gateway never saw it")
        elif first is None and got.delivered is False and (not fired or self.inject):  # the host's own trial: scored
            got.withheld = True
            why = (f"its trigger fired ({self.fired_by}) on the agent's last turn: no request came after it" if fired
                   else f"its trigger never fired: the agent never {_never(self.trigger)} matching "
                        f"{', '.join(self.globs)} (scoped as {self.host} scopes it)")
            got.reason = why + (f"; {got.reason}" if got.reason else "")
        got.trigger = {"scoped_by": self.trigger, "globs": list(self.globs), "fired_by": self.fired_by or None,
                       "fired_at": self.fired_at}
        return got


def _never(trigger: str | None) -> str:
    return {"read": "opened a file", "start-cwd": "started in a folder", "touch": "touched a folder"}.get(
        trigger or "", "triggered anything")


def plan(agent: str, rule: str, paths: tuple[str, ...], deliver: str) -> Scoped | None:
    """The run's scoped rule, or None when the rule is not scoped for ``agent`` (no paths, no dependable form,
    a glob its host cannot scope, or an agent whose prompt channel delivers everything at once)."""
    if not rule.strip() or not paths:
        return None
    delivery = scope.for_agent(agent)
    if delivery is None or delivery.scoped_by is None:
        return None
    globs = scope.effective(list(paths), delivery.host)
    if globs is None:
        return None
    if agent in scope.HARNESS_AGENTS and deliver == "prompt":
        return Scoped(rule, tuple(globs), delivery.host, agent)
    if agent in ("claude-code", "codex") and deliver == "files":  # the host's own files deliver it; the check holds
        return Scoped(rule, tuple(globs), delivery.host, agent, inject=False)  # (the replay starts at the root)
    return None


def without(playbook: str, rule: str) -> str:
    """``playbook`` without the lines that hold ``rule`` (it is given by its trigger instead)."""
    needle = normalise(rule)
    return "\n".join(line for line in playbook.split("\n") if needle not in normalise(line))
