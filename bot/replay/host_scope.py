"""How each host delivers a path-scoped rule: its scoped form and the trigger that decides when the agent gets it.

One typed table, :data:`DELIVERY` (host -> :class:`HostDelivery`), read by rendering (``bot.playbook.render``), by
replay (``bot.replay.agents.scoped_delivery``: the harness's agents get a scoped rule as the host they stand for
would give it) and by the gate (through ``bot.playbook.scope``, which prices a rule as its host delivers it). It
sits in the replay layer so replay can read it; the rule-level functions are ``bot.playbook.scope``'s.

==========  =====================================  ===============  ==========================================
host        scoped form                            ``scoped_by``    fired by
==========  =====================================  ===============  ==========================================
claude      ``.claude/rules/*.md``, ``paths:``     ``read``         a tool opening a matching file (seen here)
agents      ``FOLDER/AGENTS.md`` (Codex)           ``start-cwd``    the start folder is in FOLDER (seen here)
gemini      ``FOLDER/GEMINI.md``                   ``touch``        a tool touching FOLDER (documented only)
windsurf    ``.windsurf/rules/*.md``, glob         ``touch``        Cascade reading or editing a match (docs)
copilot     ``*.instructions.md``, ``applyTo``     None             undocumented; attached regardless (bugs)
cursor      ``.cursor/rules/*.mdc``, ``globs``     None             files open in tabs, not the agent's tools
==========  =====================================  ===============  ==========================================

``scoped_by`` is what the gate may rely on: None means the host has no dependable scoped form, so the gate prices
the rule as global there. docs/playbook.md ("Scope") has the table, the sources and what was checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

ScopedBy = Literal["start-cwd", "read", "touch"]
Form = Literal["glob-file", "folder-file", "whole-file"]


@dataclass(frozen=True)
class HostDelivery:
    """How one host (a render target) delivers a path-scoped rule."""

    host: str                   # the render target's name (bot.playbook.render.hosts.HOSTS)
    form: Form                  # glob-file: a file per rule with globs; folder-file: a file per folder
    scoped_by: ScopedBy | None  # the trigger the gate may rely on; None: priced as global
    trigger: str                # the host's trigger, in words, as documented or as seen
    checked: str                # what was checked, where (a real CLI here, or docs only)
    bugs: tuple[str, ...] = ()  # open reports against the trigger
    knows_task_type: bool = False  # no host knows a task's type: task_types never narrow a host's delivery


DELIVERY: dict[str, HostDelivery] = {d.host: d for d in (
    HostDelivery("claude", "glob-file", "read",
                 "a tool call that opens a matching file: Read, Write, or a Bash `cat`/`head`/`sed` of it; the rule "
                 "is appended to that tool's result as a <system-reminder>",
                 "Claude Code 2.1.328 against a fake Messages server here (2026-12-06): Read, Write, Bash `cat`, "
                 "`head`, `sed -n` of packages/api/app.py loaded `paths: [packages/api/**]` into that tool's result; "
                 "`ls`, Grep, Glob, `cd`, a shell redirect and `python -c open(...)` did not; nothing before",
                 ("anthropics/claude-code#16299 (loads regardless of paths)", "#17204 (fails to load silently)")),
    HostDelivery("agents", "folder-file", "start-cwd",
                 "Codex joins AGENTS.md from the git root down to the folder it starts in, once, at start; a file "
                 "below that folder is never read",
                 "docs and issues (openai/codex#13288, #12115); the replay starts every agent at the root",
                 ("openai/codex#13288", "#12115")),
    HostDelivery("gemini", "folder-file", "touch",
                 "Gemini CLI loads FOLDER/GEMINI.md when a tool reads, lists, writes or replaces in FOLDER, appended "
                 "to that tool's output", "docs only (google-gemini/gemini-cli#22736); no CLI runs here"),
    HostDelivery("windsurf", "glob-file", "touch",
                 "Cascade applies a `trigger: glob` rule when it reads or edits a matching file",
                 "docs only (docs.windsurf.com); no CLI runs here"),
    HostDelivery("copilot", "glob-file", None,
                 "`applyTo` is honoured by the coding agent and code review; when the agent injects it is not "
                 "documented", "docs only", ("microsoft/vscode#258378 (attached regardless of applyTo)",
                                             "#293592 (only ** works in agent mode)")),
    HostDelivery("cursor", "glob-file", None,
                 "a glob rule attaches for files open in tabs, reportedly not for files the agent reads through "
                 "tools", "docs and forum reports only"),
)}

#: The host each agent reads its instructions through. The harness's own agents stand for one: builtin, whose
#: read/write/edit/bash tools are Claude Code's, for Claude Code; mini-swe-agent, a bash-only agent started in
#: one folder, for Codex. opencode is given the root AGENTS.md alone by the harness (``agents/opencode.py``).
STANDS_FOR: dict[str, str] = {"claude-code": "claude", "builtin": "claude", "codex": "agents",
                              "mini-swe-agent": "agents", "opencode": "agents"}
#: The agents the harness gives a scoped rule by its trigger itself (the others get it from the host's files).
HARNESS_AGENTS = ("builtin", "mini-swe-agent")
#: Agents of a host whose scoped reading is not checked for them: opencode reads AGENTS.md, but whether it reads a
#: folder's own is not known here, and the harness gives it the root file alone. Priced as global.
UNSCOPED_AGENTS = frozenset({"opencode"})
_GLOB_CHARS = re.compile(r"[*?\[\]{}!]")


def for_agent(agent: str) -> HostDelivery | None:
    """The delivery of the host ``agent`` reads (stands for); None for an agent of no host (``command``)."""
    host = STANDS_FOR.get(agent)
    return DELIVERY[host] if host else None


def folder_of(glob: str) -> str | None:
    """The folder a folder-file host (Codex, Gemini) scopes ``glob`` to: its leading folders with no glob
    character. ``packages/api/**`` and ``packages/api/**/*.py`` give ``packages/api`` (the second widened to the
    whole folder); a plain file gives its folder; ``**/*.py`` or ``*.md`` have no folder prefix: None, and the
    rule goes into the root file whole, priced as global on that host."""
    parts = glob.split("/")
    literal = []
    for part in parts[:-1]:
        if _GLOB_CHARS.search(part):
            break
        literal.append(part)
    return "/".join(literal) or None


def folders(paths: list[str]) -> list[str] | None:
    """The folders a folder-file host renders a rule with these ``paths`` into; None when one glob has no folder
    (whole-file)."""
    out = [folder_of(g) for g in paths]
    if not out or any(f is None for f in out):
        return None
    return sorted(set(out))  # type: ignore[arg-type]


def effective(paths: list[str], host: str) -> list[str] | None:
    """:func:`effective_globs` of a rule with these ``paths``."""
    delivery = DELIVERY.get(host)
    if not paths or delivery is None or delivery.scoped_by is None:
        return None
    if delivery.form == "folder-file":
        found = folders(paths)
        return None if found is None else [f"{f}/**" for f in found]
    return list(paths)


def matches(rel: str, globs: list[str] | tuple[str, ...]) -> bool:
    """Whether the path ``rel`` (relative to the root) matches one of ``globs`` as the hosts read them: ``*`` crosses
    folders (as the gate's ``reaches`` reads it), ``**/`` also matches no folder (``a/**/*.py`` holds ``a/x.py``),
    and ``DIR/**`` also matches ``DIR`` itself."""
    rel = rel.strip("/")
    return any(fnmatchcase(rel, form) for g in globs for form in _forms(g)) or any(
        g.endswith("/**") and rel == g[:-3] for g in globs)


def _forms(glob: str) -> set[str]:
    return {glob, glob.replace("/**/", "/"), glob[3:] if glob.startswith("**/") else glob}
