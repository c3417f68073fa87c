"""The clue in a CI log: collapsing what repeats, and the lines a person reads first.

Capture's scanner (``bot.incident.capture.LogScanner``) feeds lines to these small
collectors. Each is bounded in memory whatever the log's size.

* ``template`` reduces a line to its shape (numbers, paths and hex ids
  masked), so ``retrying attempt 7/40`` and ``retrying attempt 8/40`` are the
  same line; ``collapse`` turns a run of them into one line with a count
  (``retrying attempt 1/40 ×40``).
* ``Blocks`` keeps pytest's failure and collection-error blocks, one of each
  shape: 14 ``ERROR collecting`` blocks that differ only in the file name
  become one block and a list of the files.
* ``lint_error`` and ``go_failure`` read the linter's and ``go test``'s own
  error lines, which make a better trigger than "Process completed with exit
  code 1.".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

_PATHLIKE = re.compile(r"[\w~.-]*[/\\][\w./\\-]*|\b[\w-]+\.(?:py|js|ts|tsx|go|rs|java|rb)\b")
_HEX = re.compile(r"\b[0-9a-f]{7,}\b")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
RUN_MIN = 2  # lines of one shape in a row that collapse into one


def template(line: str) -> str:
    """The shape of a line: paths, hex ids and numbers masked."""
    return _NUMBER.sub("N", _HEX.sub("H", _PATHLIKE.sub("P", line.strip())))


def run_line(first: str, last: str, count: int) -> str:
    """A run of ``count`` lines of one shape as one line: ``retrying attempt 1/40 ×40``.

    When the lines differ in more than numbers (a file name, say), the last one is shown too.
    """
    if count < RUN_MIN:
        return first
    if _NUMBER.sub("N", first) == _NUMBER.sub("N", last):
        return f"{first} ×{count}"
    return f"{first} [×{count} lines like this; the last: {last.strip()}]"


def collapse(lines: list[str]) -> list[str]:
    """Runs of lines of one shape as one line with a count (see ``run_line``)."""
    out: list[str] = []
    run: list = []  # [first, last, shape, count]
    for line in lines:
        shape = template(line) if line.strip() else None
        if run and shape is not None and shape == run[2]:
            run[1], run[3] = line, run[3] + 1
            continue
        if run:
            out.append(run_line(run[0], run[1], run[3]))
        run = [line, line, shape, 1]
    if run:
        out.append(run_line(run[0], run[1], run[3]))
    return out


@dataclass
class Runs:
    """Lines kept as they come, a run of one shape stored once with its count; at most ``limit`` entries."""

    limit: int = 12
    entries: list[list] = field(default_factory=list)  # [first line, last line, shape, count]

    def add(self, line: str) -> None:
        shape = template(line)
        if self.entries and self.entries[-1][2] == shape:
            self.entries[-1][1] = line
            self.entries[-1][3] += 1
        elif len(self.entries) < self.limit:
            self.entries.append([line, line, shape, 1])

    def lines(self) -> list[str]:
        return [run_line(first, last, count) for first, last, _, count in self.entries]


@dataclass
class Blocks:
    """pytest failure blocks (a ``____ name ____`` header and its kept lines), one per shape."""

    limit: int = 12
    lines_max: int = 16
    blocks: list[dict] = field(default_factory=list)
    _current: dict | None = None

    def header(self, text: str) -> None:
        self._close()
        self._current = {"header": text, "lines": [], "like": []}

    def add(self, text: str) -> None:
        if self._current is None:
            self.header("")
        if len(self._current["lines"]) < self.lines_max:
            self._current["lines"].append(text)

    def _close(self) -> None:
        block, self._current = self._current, None
        if block is None:
            return
        shape = [template(x) for x in block["lines"]]
        for kept in self.blocks:
            if kept["shape"] == shape:
                kept["like"].append(_name(block["header"]))
                return
        if len(self.blocks) < self.limit:
            block["shape"] = shape
            self.blocks.append(block)

    def lines(self) -> list[str]:
        self._close()
        out = []
        for block in self.blocks:
            out += ([block["header"]] if block["header"] else []) + block["lines"]
            if block["like"]:
                names = ", ".join(block["like"][:4]) + (", …" if len(block["like"]) > 4 else "")
                out.append(f"[… and {len(block['like'])} more block(s) like this one: {names}]")
        return out


def _name(header: str) -> str:
    return header.strip("_ ").removeprefix("ERROR collecting ").strip()


# ---------------------------------------------------------------- linters and go test

_ESLINT = re.compile(r"^\s*(?P<pos>\d+:\d+)\s+(?P<level>error|warning)\s+(?P<msg>.+?)(?:\s{2,}(?P<rule>[\w@/-]+))?$")
_COLON_STYLE = re.compile(r"^(?P<file>[^\s:]+\.\w+):(?P<pos>\d+(?::\d+)?):? (?P<rule>[A-Z]{1,4}\d{2,4}) (?P<msg>.+)$")
_FILE_LINE = re.compile(r"^(?:/|[\w.-]+/)\S*\.\w+$")
LINT_SUMMARY = re.compile(r"^(?:✖ \d+ problems?\b.*|Found \d+ errors?\b.*)$")


def lint_error(text: str, recent: Callable[[], list[str]]) -> str | None:
    """A linter's own error line (eslint, ruff, flake8, pylint style), with its file; else None.

    ``recent()`` gives the lines before it, newest last: eslint names the file on a line of its own.
    """
    line = text.rstrip()
    match = _ESLINT.match(line)
    if match and match.group("level") == "error":
        file = next((r.strip() for r in reversed(recent()) if _FILE_LINE.match(r.strip())), "")
        rule = f" ({match.group('rule')})" if match.group("rule") else ""
        return f"{file}:{match.group('pos')} {match.group('msg')}{rule}".lstrip(":")
    match = _COLON_STYLE.match(line.strip())
    if match:
        return f"{match.group('file')}:{match.group('pos')} {match.group('rule')} {match.group('msg')}"
    return None


def go_failure(text: str, recent: list[str]) -> list[str] | None:
    """``--- FAIL: TestX`` and the lines ``go test`` printed for it (they come before it)."""
    if not text.strip().startswith("--- FAIL:"):
        return None
    said = []
    for line in reversed(recent):
        if line.strip().startswith(("=== RUN", "--- ", "=== CONT")) or not line.strip():
            break
        said.insert(0, line.rstrip())
    return [text.strip(), *said[-6:]]
