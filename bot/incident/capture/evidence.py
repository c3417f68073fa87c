"""What every scanner shares: the ``Evidence`` record, its limits, and bounded reading of inputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

from pydantic import BaseModel

from bot._util.text_safety import clean, one_line
from bot.errors import BadInput
from bot.incident.capture import clues as log_clues
from bot.incident.store import EVIDENCE_MAX

TRIGGER_MAX = 200
BLOCK = 1 << 20  # bytes read at a time
LINE_MAX = 2048  # bytes kept of one log line; the rest of a longer line is skipped
JSON_LINE_MAX = 1 << 20  # a transcript line longer than this is skipped, not parsed
SHOWN_LINE_MAX = 300  # characters of one line shown in an excerpt
BEFORE, AFTER, ERROR_BLOCKS, BLOCK_LINES, TAIL = 6, 6, 4, 40, 12
BELIEVED_UNKNOWN = "unknown: capture could not state what the agent believed; fill in by hand"
ACTUAL_UNKNOWN = "unknown: capture could not state what was actually true; fill in by hand"

M = TypeVar("M", bound=BaseModel)


class Analyst(Protocol):
    """What capture needs of a model: ``bot.model.llm.LLM`` is one. ``ask_json`` raises ``LLMError`` on failure."""

    simulated: bool

    def ask_json(self, template: str, schema: type[M], **variables: Any) -> M: ...


@dataclass(frozen=True)
class Evidence:
    """What was extracted from the input, before any model saw it."""

    trigger: str  # one line, at most TRIGGER_MAX characters
    excerpt: str  # at most EVIDENCE_MAX characters
    failing_step: str | None = None
    task_hint: str | None = None  # PR title, job name or scenario: a task when the model gives none
    source_kind: str = "manual"
    digest: str = ""  # sha256 of the raw input: the default idempotency key


# ---------------------------------------------------------------- text helpers

def one_liner(text: str, limit: int = TRIGGER_MAX) -> str:
    """:func:`bot._util.text_safety.one_line` cut to a trigger's length by default."""
    return one_line(text, limit)


def _shown(line: str) -> str:
    return line if len(line) <= SHOWN_LINE_MAX else line[:SHOWN_LINE_MAX] + " [… line cut]"


def fit(sections: list[tuple[str, list[str]]], limit: int = EVIDENCE_MAX) -> str:
    """Join titled sections in priority order into at most ``limit`` characters."""
    out, used, seen = [], 0, set()
    for title, lines in sections:
        fresh = [x for x in log_clues.collapse(list(lines)) if x in ("…", "") or x.strip() not in seen]
        seen.update(x.strip() for x in fresh)
        lines = fresh if any(x not in ("…", "") for x in fresh) else []
        if not lines:
            continue
        block = (f"--- {title} ---\n" if title else "") + "\n".join(_shown(x) for x in lines)
        room = limit - used - (1 if out else 0)
        if len(block) > room:
            marker = "\n[… cut to fit]"
            if room > 200:
                out.append(block[: room - len(marker)] + marker)
            break
        out.append(block)
        used += len(block) + (1 if len(out) > 1 else 0)
    return "\n".join(out)[:limit]


def _readlines(stream: BinaryIO, limit: int) -> Any:
    """Lines of a binary stream, each at most ``limit`` bytes; the rest of a longer line is dropped.

    Yields (line, complete): ``complete`` is False for a line that was cut, or the unterminated last line.
    """
    while True:
        line = stream.readline(limit)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line, True
            continue
        if len(line) < limit:  # the stream ended mid-line
            yield line, False
            return
        rest = line
        while rest and not rest.endswith(b"\n"):  # skip the remainder of an over-long line
            rest = stream.readline(1 << 16)
        yield line, False


def open_input(path: Path, what: str, hint: str) -> BinaryIO:
    """Open a user's input file for binary reading, or raise ``BadInput`` that says what to pass."""
    path = Path(path)
    if path.is_dir():
        raise BadInput(f"{path}: is a folder; expected a {what} file ({hint})")
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such {what} file; {hint}") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the {what}: {exc.strerror}") from None


def read_bounded(path: Path, what: str, limit: int = 64 * 1024) -> str:
    """The first ``limit`` bytes of a text file, decoded whatever they hold."""
    with open_input(path, what, f"pass the path of the {what}") as f:
        data = f.read(limit + 1)
    text = "\n".join(clean(line) for line in data[:limit].decode("utf-8", "replace").splitlines())
    return text + ("\n[… cut: the file is longer]" if len(data) > limit else "")
