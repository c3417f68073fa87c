"""The hosts a playbook is rendered for: where each agent reads its instructions.

Each host has a main file holding a marked section (bytes outside the markers
are the user's) and, where the host scopes instructions by path, one
generated file per path-scoped rule (Claude, Copilot, Cursor, Windsurf), or a
marked section in one nested main file per folder (Codex's ``AGENTS.md``,
Gemini's ``GEMINI.md``: ``folder_file``). When each host's scoped file reaches
the agent is ``bot.playbook.scope``'s. Sources for every format are in
docs/playbook.md ("Render targets", "Scope").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Callable

from bot.errors import BadInput


def _claude_scope(globs: list[str]) -> str:
    # https://code.claude.com/docs/en/memory#path-specific-rules: a YAML list of quoted globs.
    return "paths:\n" + "".join(f"  - {json.dumps(g)}\n" for g in globs)


def _copilot_scope(globs: list[str]) -> str:
    # docs.github.com: path-specific custom instructions, `applyTo` holds comma-separated globs.
    return f"applyTo: {json.dumps(','.join(globs))}\n"


def _cursor_scope(globs: list[str]) -> str:
    # cursor.com/docs/context/rules: `globs` is a comma-separated string, not quoted; alwaysApply false.
    return f"description: Replaybook playbook rule for {','.join(globs)}\nglobs: {','.join(globs)}\nalwaysApply: false\n"


def _windsurf_scope(globs: list[str]) -> str:
    # docs.windsurf.com/windsurf/cascade/memories#rules: activation `trigger: glob` with `globs`.
    return f"trigger: glob\nglobs: {','.join(globs)}\n"


@dataclass(frozen=True)
class Host:
    name: str
    main: str                      # the file holding the marked section
    agents: tuple[str, ...]        # agents (as `--agent` names) that read this host's files, or stand for one that
                                   # does (bot.playbook.scope.STANDS_FOR: builtin for Claude Code, mini-swe-agent Codex)
    new_prefix: str = ""           # what a new main file starts with (front matter the host needs)
    scoped_dir: str | None = None  # where per-rule path-scoped files go; None: scoped rules stay in the section
    scoped_suffix: str = ".md"
    scope: Callable[[list[str]], str] | None = None
    reads: tuple[str, ...] = ()    # fnmatch patterns (``*`` crosses folders): where the host reads instructions
    folder_file: bool = False      # a path-scoped rule goes into FOLDER/<main> (bot.playbook.scope.folder_of)

    def reads_at(self, rel: str) -> bool:
        return any(fnmatchcase(rel, p) for p in self.reads)


HOSTS: dict[str, Host] = {h.name: h for h in (
    Host("claude", "CLAUDE.md", ("claude-code", "builtin"), scoped_dir=".claude/rules", scope=_claude_scope,
         reads=("CLAUDE.md", "*/CLAUDE.md", "CLAUDE.local.md", "*/CLAUDE.local.md", ".claude/CLAUDE.md",
                ".claude/rules/*.md", "*/.claude/rules/*.md", "MEMORY.md", "*/MEMORY.md")),
    Host("agents", "AGENTS.md", ("codex", "opencode", "mini-swe-agent", "aider"),
         reads=("AGENTS.md", "*/AGENTS.md"), folder_file=True),
    Host("copilot", ".github/copilot-instructions.md", ("copilot",), scoped_dir=".github/instructions",
         scoped_suffix=".instructions.md", scope=_copilot_scope,
         reads=(".github/copilot-instructions.md", ".github/instructions/*.instructions.md")),
    Host("cursor", ".cursor/rules/replaybook.mdc", ("cursor",),
         new_prefix="---\ndescription: Replaybook playbook (rules proven by replay)\nglobs:\nalwaysApply: true\n---\n",
         scoped_dir=".cursor/rules", scoped_suffix=".mdc", scope=_cursor_scope,
         reads=(".cursor/rules/*.mdc", "*/.cursor/rules/*.mdc", ".cursorrules")),
    Host("gemini", "GEMINI.md", ("gemini",), reads=("GEMINI.md", "*/GEMINI.md"), folder_file=True),
    Host("windsurf", ".windsurf/rules/replaybook.md", ("windsurf",), new_prefix="---\ntrigger: always_on\n---\n",
         scoped_dir=".windsurf/rules", scope=_windsurf_scope,
         reads=(".windsurf/rules/*.md", "*/.windsurf/rules/*.md", ".windsurfrules", "*/.windsurfrules")),
)}

#: The host rule folders where any new file is read as instructions (issue 25: reported when no replay proved it).
RULE_FOLDERS = (".claude/rules/", ".cursor/rules/", ".github/instructions/", ".windsurf/rules/")


def is_instructions(rel: str) -> bool:
    """Whether some host reads the file at ``rel`` (relative to the root) as instructions for agents."""
    return not forbidden(rel) and any(h.reads_at(rel) for h in HOSTS.values())


def forbidden(rel: str) -> str | None:
    """Why nothing is ever rendered at ``rel`` (a workflow, git's own files), or None."""
    parts = rel.split("/")
    if any(p.lower() == ".git" for p in parts):
        return "is inside .git/, where git keeps hooks and config"
    if rel.lower().startswith(".github/workflows/"):
        return "is inside .github/workflows/, where a file is a workflow GitHub runs"
    return None


def check_path(host: Host, rel: str, what: str) -> None:
    """``BadInput`` unless ``rel`` is a file ``host`` reads instructions from (checked in config and at render)."""
    why = forbidden(rel)
    if why is None and not host.reads_at(rel):
        why = (f"is not a file {host.name} reads instructions from; use one of "
               + ", ".join(host.reads) + " (`*` is any path; docs/playbook.md, Render targets)")
    if why:
        raise BadInput(f"{what}: {rel!r} {why}")


@dataclass(frozen=True)
class Target:
    host: Host
    main: str  # relative path of the main file

    @property
    def name(self) -> str:
        return self.host.name


_SAFE_PATH = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,200}$")


def parse(spec: str) -> Target:
    """``NAME`` or ``NAME:PATH`` (the main file elsewhere, e.g. ``claude:.claude/rules/replaybook.md``)."""
    name, _, path = spec.partition(":")
    host = HOSTS.get(name.strip())
    if host is None:
        raise BadInput(f"render target {name!r} is unknown; use one of {', '.join(HOSTS)} (optionally NAME:PATH)")
    path = path.strip() or host.main
    if not _SAFE_PATH.match(path) or ".." in path.split("/") or path.endswith("/"):
        raise BadInput(f"render target {spec!r}: {path!r} is not a relative file path inside the repository")
    check_path(host, path, f"render target {spec!r}")
    return Target(host, path)


def parse_all(specs: list[str]) -> list[Target]:
    targets = [parse(s) for s in specs]
    mains = [t.main for t in targets]
    dupes = sorted({m for m in mains if mains.count(m) > 1})
    if dupes:
        raise BadInput(f"render targets write {', '.join(dupes)} more than once; list each file once")
    return targets
