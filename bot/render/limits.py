"""Each host's documented size limit, checked before a rendered file would pass it.

Hosts truncate or warn silently; a rule past the cut is a rule the agent
never reads. The table is repeated, with sources, in docs/playbook.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase


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
    Limit("copilot", (".github/copilot-instructions.md", ".github/instructions/*.instructions.md"),
          "Copilot code review reads only the first 4,000 characters of an instructions file",
          "https://github.com/github/docs/issues/42761", chars=4_000),
)


def measure(data: bytes) -> tuple[int, int, int]:
    """(characters, bytes, lines) of a file's content."""
    text = data.decode("utf-8", errors="replace")
    return len(text), len(data), text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def over(rel: str, data: bytes) -> list[str]:
    """One line per limit ``data`` would pass at ``rel``; empty when it fits."""
    chars, size, lines = measure(data)
    out = []
    for limit in LIMITS:
        if not limit.applies(rel):
            continue
        for value, cap, unit in ((chars, limit.chars, "characters"), (size, limit.bytes, "bytes"),
                                 (lines, limit.lines, "lines")):
            if cap is not None and value > cap:
                out.append(f"{rel}: would be {value:,} {unit}, over the {cap:,} {unit} limit ({limit.effect}; "
                           f"{limit.source}); retire rules or move text out of the file")
    return out
