"""What a trial touched: the files it read and wrote, its working folders and the commands it ran.

The gate reads it to decide whether a path-scoped rule could have reached the agent in that trial
(``bot.gate.reach``): Claude Code loads a scoped rule when the agent *reads* a matching file, Codex reads the
``AGENTS.md`` chain down to the working folder, Gemini loads a folder's ``GEMINI.md`` when a tool touches it.

Where each part comes from, and how far it can be trusted:

- **commands** and **cwds**: every ``execve`` the kernel saw (``CommandEvent``: argv and working folder), so an
  agent cannot hide one;
- **writes**: the sandbox's diff against the fixture (``FileChangeEvent``): every file added, changed or deleted;
- **reads**: not from the kernel (the trace records ``execve`` only, not ``open``). They are taken from the agent's
  own tool calls (a ``read``/``Read``/``view``/``edit`` tool's path) and from the file arguments of commands that
  read files (``cat``, ``sed``, ``head``, ``grep`` …). A program that opens a file itself (a test runner importing
  a module, a script) is not seen reading it: reads are a lower bound. The gate therefore counts a working folder
  or a command argument under a scope as a touch too, for every trigger (``bot.gate.reach.touches``).

Paths are relative to the repository root (``.``), as checks name them; one outside it stays absolute.
"""

from __future__ import annotations

import posixpath
import shlex
from pathlib import Path
from typing import Any, Iterable

from bot.replay.trace.events import CommandEvent, FileChangeEvent, ToolCallEvent, TraceEvent, relative_cwd

#: Commands whose non-option arguments are files they read.
READERS = frozenset({"cat", "less", "more", "head", "tail", "sed", "awk", "grep", "rg", "egrep", "fgrep", "wc",
                     "diff", "cmp", "nl", "tac", "sort", "uniq", "cut", "strings", "od", "xxd", "file", "stat",
                     "view", "vi", "vim", "nano", "bat", "jq", "yq"})
#: Tool inputs that name a file, by the agents' tool names (builtin, Claude Code, the text editor tool).
_PATH_KEYS = ("path", "file_path", "filename", "notebook_path")
_READ_TOOLS = {"read", "view", "Read", "NotebookRead", "read_file", "open"}
_WRITE_TOOLS = {"write", "edit", "Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "create"}
LIMIT = 400  # entries kept per list: a footprint is evidence, not a full log


def footprint(events: Iterable[TraceEvent], root: Path | str) -> dict[str, Any]:
    """The trial's footprint from its trace (``root``: the sandbox's repository root as the agent saw it)."""
    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    cwds: dict[str, None] = {}
    commands: list[list[str]] = []
    for event in events:
        if isinstance(event, CommandEvent):
            cwd = relative_cwd(event.cwd, Path(root))
            cwds[cwd] = None
            commands.append([str(a)[:200] for a in event.argv[:20]])
            for arg in _file_args(event.argv):
                reads[_join(cwd, arg, root)] = None
        elif isinstance(event, FileChangeEvent):
            writes[_norm(event.path, root)] = None
        elif isinstance(event, ToolCallEvent) and isinstance(event.input, dict):
            name = event.name or ""
            path = next((event.input[k] for k in _PATH_KEYS if isinstance(event.input.get(k), str)), None)
            command = event.input.get("command")
            if path is not None:
                if name in _WRITE_TOOLS or command in ("create", "str_replace", "insert"):
                    writes[_norm(path, root)] = None
                if name in _READ_TOOLS or name in _WRITE_TOOLS or command == "view":
                    reads[_norm(path, root)] = None  # an edit reads the file first
            elif isinstance(command, str) and name.lower() == "bash":
                for argv in _simple_commands(command):
                    for arg in _file_args(argv):
                        reads[_norm(arg, root)] = None
    return {"reads": list(reads)[:LIMIT], "writes": list(writes)[:LIMIT], "cwds": list(cwds)[:LIMIT],
            "commands": commands[:LIMIT],
            "source": "commands and cwds: the kernel's exec trace; writes: the sandbox diff; reads: the agent's "
                      "tool calls and the file arguments of reading commands (not the kernel)"}


def _file_args(argv: list[str]) -> list[str]:
    if not argv or posixpath.basename(argv[0]) not in READERS:
        return []
    return [a for a in argv[1:] if a and not a.startswith("-") and ("/" in a or "." in a)]


def _simple_commands(line: str) -> list[list[str]]:
    """A shell line's simple commands, split at ``&&``, ``||``, ``;`` and ``|`` (best effort: it is evidence)."""
    try:
        words = shlex.split(line, posix=True)
    except ValueError:
        return []
    out, cur = [], []
    for w in words:
        if w in ("&&", "||", ";", "|"):
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    return [c for c in [*out, cur] if c]


def _norm(path: str, root: Path | str) -> str:
    rel = relative_cwd(path, Path(root)) if path.startswith("/") else path
    return posixpath.normpath(rel) if not rel.startswith("/") else rel


def _join(cwd: str, arg: str, root: Path | str) -> str:
    if arg.startswith("/"):
        return _norm(arg, root)
    return posixpath.normpath(posixpath.join(cwd, arg)) if not cwd.startswith("/") else posixpath.join(cwd, arg)
