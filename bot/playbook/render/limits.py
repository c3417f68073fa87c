"""Each host's documented size limit, checked before a rendered file would pass it.

Hosts truncate or warn silently; a rule past the cut is a rule the agent
never reads. The table is repeated, with sources, in docs/playbook.md.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from bot.replay import delivery


@dataclass(frozen=True)
class Limit:
    host: str
    files: tuple[str, ...]   # fnmatch patterns over the path relative to the root
    effect: str
    source: str
    chars: int | None = None
    bytes: int | None = None
    lines: int | None = None

    def applies(self, rel: str) -> bool:
        return any(fnmatchcase(rel, p) for p in self.files)


LIMITS: tuple[Limit, ...] = (
    Limit("claude", ("CLAUDE.md", "*/CLAUDE.md"), "Claude Code warns `Large CLAUDE.md will impact performance`",
          "https://github.com/anthropics/claude-code/issues/56406", chars=40_000),
    Limit("claude", ("MEMORY.md", "*/MEMORY.md"), "Claude Code loads only the first 200 lines or 25 KB of MEMORY.md",
          "https://code.claude.com/docs/en/memory#auto-memory", bytes=25_000, lines=200),
    Limit("windsurf", (".windsurf/rules/*", "*/.windsurf/rules/*"), "Windsurf truncates a rule file past 12,000 characters",
          "https://docs.windsurf.com/windsurf/cascade/memories#rules", chars=12_000),
    Limit("windsurf", ("global_rules.md", "*/global_rules.md", ".windsurfrules", "*/.windsurfrules"),
          "Windsurf truncates global_rules.md and the legacy .windsurfrules past 6,000 characters",
          "https://docs.windsurf.com/windsurf/cascade/memories#rules", chars=6_000),
    Limit("copilot", (".github/copilot-instructions.md", ".github/instructions/*.instructions.md"),
          "Copilot code review reads only the first 4,000 characters of an instructions file",
          "https://github.com/github/docs/issues/42761", chars=4_000),
    Limit("copilot-cli", (".github/copilot-instructions.md", ".github/instructions/*.instructions.md"),
          "Copilot CLI 1.0.7 cut an instructions file at about 160 lines",
          "https://github.com/github/copilot-cli/issues/2111", lines=160),
)

#: Codex joins every AGENTS.md from the git root down to the working directory and silently cuts the total at
#: ``project_doc_max_bytes``, root first, so the most specific file loses (checked 2026-12-02). One number for
#: rendering and for replay, which measures the chain a trial's Codex read (``bot.replay.delivery``).
CODEX_MAX_BYTES = delivery.CODEX_MAX_BYTES
#: ``playbook check`` warns once a file (or a Codex chain) reaches this share of a limit, before the host cuts it.
WARN_AT = 0.9
CODEX_SOURCE = delivery.CODEX_SOURCE
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".replaybook"}


def agents_chains(root: Path, rendered: dict[str, bytes | None]) -> list[str]:
    """The Codex budget over each chain of AGENTS.md files a run would read (the repository's own files too,
    with ``rendered`` in place of what is on disk): one line per chain past ``project_doc_max_bytes``."""
    return [_chain_over(rel, chain, total) for rel, chain, total in _chains(root, rendered) if total > CODEX_MAX_BYTES]


def agents_chains_near(root: Path, rendered: dict[str, bytes | None]) -> list[str]:
    """One warning per chain within ``WARN_AT`` of Codex's budget but not past it."""
    return [f"{rel}: Codex would read {total:,} bytes of AGENTS.md from the git root down ({' + '.join(chain)}), "
            f"{total / CODEX_MAX_BYTES:.0%} of its project_doc_max_bytes of {CODEX_MAX_BYTES:,} bytes ({CODEX_SOURCE}); "
            f"past it Codex cuts the total silently and {rel} loses first"
            for rel, chain, total in _chains(root, rendered) if WARN_AT * CODEX_MAX_BYTES <= total <= CODEX_MAX_BYTES]


def _chain_over(rel: str, chain: list[str], total: int) -> str:
    return (f"{rel}: Codex would read {total:,} bytes of AGENTS.md from the git root down "
            f"({' + '.join(chain)}), over its project_doc_max_bytes of {CODEX_MAX_BYTES:,} bytes: Codex "
            f"cuts the total silently and {rel} loses first ({CODEX_SOURCE}); shorten the chain, retire "
            "rules, or raise project_doc_max_bytes in the Codex config")


def agents_overridden(root: Path, rendered: dict[str, bytes | None]) -> list[str]:
    """One warning per rendered AGENTS.md beside an AGENTS.override.md, which Codex reads in its place."""
    files = _agents_files(root, rendered)
    return [f"{rel}: Codex reads {_override(rel)} in that folder instead, so the playbook rendered into {rel} never "
            f"reaches Codex; move the rules into {_override(rel)} or remove it"
            for rel, data in sorted(rendered.items()) if data is not None and posixpath.basename(rel) == "AGENTS.md"
            and files.get(_override(rel)) is not None]


def _override(rel: str) -> str:
    return posixpath.join(posixpath.dirname(rel), "AGENTS.override.md")


def _agents_files(root: Path, rendered: dict[str, bytes | None]) -> dict[str, bytes | None]:
    files = dict(rendered)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for name in ("AGENTS.md", "AGENTS.override.md"):
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            if name in filenames and rel not in files:
                files[rel] = (Path(dirpath) / name).read_bytes()
    return files


def _chains(root: Path, rendered: dict[str, bytes | None]) -> list[tuple[str, list[str], int]]:
    """(the deepest file, the chain Codex reads for it, its joined size) for each AGENTS.md; in a folder with an
    AGENTS.override.md, Codex reads that one instead (``bot.replay.delivery.codex_chain``)."""
    files = _agents_files(root, rendered)
    agents: dict[str, bytes] = {}  # None: to be removed
    for rel, data in files.items():
        if data is not None and posixpath.basename(rel) == "AGENTS.md":
            override = files.get(_override(rel))
            agents[_override(rel) if override is not None else rel] = override if override is not None else data
    out = []
    for rel in sorted(agents):
        folder = posixpath.dirname(rel)
        chain = [a for a in sorted(agents, key=lambda r: r.count("/"))
                 if (d := posixpath.dirname(a)) == "" or folder == d or folder.startswith(d + "/")]
        total = sum(len(agents[a]) for a in chain) + 2 * (len(chain) - 1)  # joined with a blank line
        out.append((rel, chain, total))
    return out


def measure(data: bytes) -> tuple[int, int, int]:
    """(characters, bytes, lines) of a file's content."""
    text = data.decode("utf-8", errors="replace")
    return len(text), len(data), text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def _measured(rel: str, data: bytes):
    """(limit, value, cap, unit) for each limit that applies at ``rel`` and bounds what ``data`` measures."""
    chars, size, lines = measure(data)
    for limit in LIMITS:
        if not limit.applies(rel):
            continue
        for value, cap, unit in ((chars, limit.chars, "characters"), (size, limit.bytes, "bytes"),
                                 (lines, limit.lines, "lines")):
            if cap is not None:
                yield limit, value, cap, unit


def over(rel: str, data: bytes) -> list[str]:
    """One line per limit ``data`` would pass at ``rel``; empty when it fits."""
    return [f"{rel}: would be {value:,} {unit}, over the {cap:,} {unit} limit ({limit.effect}; "
            f"{limit.source}); retire rules or move text out of the file"
            for limit, value, cap, unit in _measured(rel, data) if value > cap]


def near(rel: str, data: bytes) -> list[str]:
    """One warning per limit ``data`` at ``rel`` has reached ``WARN_AT`` of without passing it."""
    return [f"{rel}: {value:,} {unit}, {value / cap:.0%} of the {cap:,} {unit} limit ({limit.effect}; "
            f"{limit.source}); a few more rules and the host cuts it"
            for limit, value, cap, unit in _measured(rel, data) if WARN_AT * cap <= value <= cap]
