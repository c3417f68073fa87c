"""Capture: turn the evidence of a failed run into an incident (a belief delta).

Evidence is extracted without a model and in bounded memory: a CI log is
streamed line by line (any size, any bytes), and only the failing step, the
lines around ``##[error]``, pytest/jest summaries and the last Python
traceback are kept. An analyst (the LLM) then states the belief delta; its
answer is validated against a fixed schema, so text copied from a log can
neither add fields nor smuggle in a rule. When the analyst is missing, down
or answers badly, the incident is still written from what was extracted,
with ``triage: true`` for a person to finish: capture never loses the event.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot import log_clues, records
from bot.errors import BadInput, LLMError
from bot.incident import EVIDENCE_MAX, FailureClass, Incident, IncidentStore, id_for, one_line
from bot.rule import Rule

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
    """What capture needs of a model: ``bot.llm.LLM`` is one. ``ask_json`` raises ``LLMError`` on failure."""

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

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_STAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(raw: bytes | str) -> str:
    """One log line as safe text: any bytes decode, timestamps, colours and control bytes go."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = _ANSI.sub("", text.rstrip("\r\n"))
    # Trailing blanks go too: they are invisible, and they keep YAML from writing the excerpt as a block.
    return _CONTROL.sub("\ufffd", _STAMP.sub("", text, count=1)).expandtabs(4).rstrip()


def one_liner(text: str, limit: int = TRIGGER_MAX) -> str:
    """Whitespace collapsed to one line, cut to ``limit`` characters."""
    line = " ".join(clean(text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


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


# ---------------------------------------------------------------- CI logs

# Words that mark an error line in many languages: the fallback when a log has no known structure.
_KEYWORDS = ["error", "fail", "fatal", "exception", "panic", "denied", "not found", "错误", "失败", "異常",
             "エラー", "失敗", "fehler", "fehlgeschlagen", "erreur", "échec", "ошибка", "오류"]
_KEYWORD = re.compile("|".join(_KEYWORDS), re.I)
# Searched in lowered blocks of the log: a line none of these match is only kept as context.
_MARKER = re.compile("|".join([r"##\[", r"traceback \(most recent", "===", "●", "tests:", "complete job name",
                               "rootdir:", r"retr(?:y|ies|ying)", "attempt", "giving up", r"timed? ?out",
                               *_KEYWORDS]).encode("utf-8"))
_RETRY = re.compile(r"retr(?:y|ies|ying)|\battempts?\b|giving up|timed? ?out", re.I)
_BLOCK_HEADER = re.compile(r"^_{3,} .* _{3,}$")
_SOURCE_LOC = re.compile(r"^\S+:\d+: in ")
_GO_PACKAGE_FAIL = re.compile(r"^FAIL\s+\S+\s+[\d.]+s$")
_GH_ERROR = re.compile(r"^(?:##\[error\]|::error(?: [^:]*)?::)(?P<msg>.*)")
_PYTEST_HEADER = re.compile(r"^={3,} ?(?P<title>.*?) ?={3,}$")
_COUNTS = re.compile(r"\b\d+ (?:failed|errors?)\b")
_PYTEST_KEEP = re.compile(r"^(?:E\s|>\s|\S+:\d+: \w)")
_GENERIC_ERROR = re.compile(r"^Process completed with exit code \d+\.?$")


@dataclass
class LogScanner:
    """Keeps what matters of a log fed to it line by line, in bounded memory."""

    lines: int = 0
    ended_mid_line: bool = False
    job: str | None = None
    step: str | None = None
    failing_step: str | None = None
    error_count: int = 0
    error_messages: list[str] = field(default_factory=list)
    blocks: list[list[str]] = field(default_factory=list)
    after: int = 0
    pytest_section: str | None = None
    pytest_blocks: log_clues.Blocks = field(default_factory=log_clues.Blocks)
    source_next: bool = False  # the next failures line is the source line a `file:N: in` line points at
    rootdir: str | None = None
    retries: log_clues.Runs = field(default_factory=log_clues.Runs)
    lint: list[str] = field(default_factory=list)
    lint_counts: str | None = None
    go: list[str] = field(default_factory=list)
    go_failed: str | None = None
    pytest_summary: list[str] = field(default_factory=list)
    pytest_counts: str | None = None
    failed: list[str] = field(default_factory=list)
    first_e_line: str | None = None
    jest: list[str] = field(default_factory=list)
    jest_follow: int = 0
    jest_counts: str | None = None
    tb: deque | None = None
    tb_prefix: str = ""
    tb_cut: int = 0
    tracebacks: deque = field(default_factory=lambda: deque(maxlen=2))
    exception: str | None = None
    keywords: deque = field(default_factory=lambda: deque(maxlen=8))
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL))
    digest: Any = field(default_factory=hashlib.sha256)

    def read(self, stream: BinaryIO) -> None:
        """Scan a whole stream in blocks; memory stays bounded whatever its size or line lengths."""
        pending, overlong = b"", False  # the unfinished last line (at most LINE_MAX bytes kept)
        while block := stream.read(BLOCK):
            self.digest.update(block)
            first = block.find(b"\n")
            if first == -1:
                pending, overlong = (pending + block)[:LINE_MAX], overlong or len(pending) + len(block) > LINE_MAX
                continue
            if overlong:
                self._line(pending, complete=False)
            elif pending:
                self.feed_lines(pending + block[: first + 1])
            else:
                first = -1
            last = block.rfind(b"\n") + 1
            self.feed_lines(block[first + 1: last])
            pending, overlong = block[last: last + LINE_MAX], len(block) - last > LINE_MAX
        if pending:
            self._line(pending, complete=False)
            self.ended_mid_line = True

    def feed_lines(self, seg: bytes) -> None:
        """Complete lines: the few that match a marker are looked at, the rest only kept as context."""
        low, pos = seg.lower(), 0
        while pos < len(seg):
            if self.after or self.tb is not None or self.pytest_section or self.jest_follow:
                end = seg.index(b"\n", pos) + 1
            else:
                found = _MARKER.search(low, pos)
                if found is None:
                    return self._skip(seg, pos, len(seg))
                start = seg.rfind(b"\n", pos, found.start()) + 1 or pos
                self._skip(seg, pos, start)
                pos, end = start, seg.index(b"\n", found.start()) + 1
            self._line(seg[pos:end], complete=end - pos <= LINE_MAX + 1)
            pos = end

    def _skip(self, seg: bytes, start: int, end: int) -> None:
        """Lines nobody looks at: count them and keep the last few as context."""
        if start >= end:
            return
        self.lines += seg.count(b"\n", start, end)
        kept: list[bytes] = []
        while end > start and len(kept) < TAIL:
            begin = max(seg.rfind(b"\n", start, end - 1) + 1, start)
            kept.append(seg[begin: min(end, begin + LINE_MAX)])
            end = begin
        self.tail.extend(reversed(kept))

    def _line(self, raw: bytes, complete: bool = True) -> None:
        self.lines += 1
        raw = raw[:LINE_MAX]
        self._look(clean(raw) + ("" if complete else " [… line cut]"))
        self.tail.append(raw)

    def _look(self, s: str) -> None:
        self._github(s)
        self._pytest(s)
        self._jest(s)
        self._traceback(s)
        self._clues(s)
        if _KEYWORD.search(s):
            self.keywords.append(s.strip())

    def _recent(self) -> list[str]:
        return [clean(r) for r in list(self.tail)[-10:]]

    def _clues(self, s: str) -> None:
        """Retries, the linter's own error lines and go test failures."""
        text = s.strip()
        if _RETRY.search(text) and not text.startswith("##[group]"):
            self.retries.add(text)
        if log_clues.LINT_SUMMARY.match(text):
            self.lint_counts = text
        elif len(self.lint) < 12 and (lint := log_clues.lint_error(s, self._recent)):
            self.lint.append(lint)
        if text.startswith("--- FAIL:") and len(self.go) < 30:
            failure = log_clues.go_failure(text, self._recent())
            self.go += failure or []
            self.go_failed = self.go_failed or " ".join(x.strip() for x in (failure or [])[:2])
        elif _GO_PACKAGE_FAIL.match(text) and len(self.go) < 30:
            self.go.append(text)

    def _github(self, s: str) -> None:
        if s.startswith("##[group]Run "):
            self.step = s[len("##[group]"):].strip()
        elif s.startswith("Complete job name:"):
            self.job = s.split(":", 1)[1].strip() or None
        error = _GH_ERROR.match(s)
        if error:
            self.error_count += 1
            if self.error_count == 1:
                self.failing_step = self.step
            message = error.group("msg").strip()
            if message and len(self.error_messages) < 5 and message not in self.error_messages:
                self.error_messages.append(message)
            if self.after and len(self.blocks[-1]) < BLOCK_LINES:  # close to the last one: extend it
                self.blocks[-1].append(s)
                self.after = AFTER
            elif not self.after and len(self.blocks) < ERROR_BLOCKS:
                self.blocks.append([clean(r) for r in list(self.tail)[-BEFORE:]] + [s])
                self.after = AFTER
        elif self.after:
            self.after -= 1
            if self.blocks:
                self.blocks[-1].append(s)

    def _pytest(self, s: str) -> None:
        text = s.strip()
        header = _PYTEST_HEADER.match(text)
        if header:
            title = header.group("title")
            if _COUNTS.search(title):
                self.pytest_counts, self.pytest_section = title, None
            else:
                self.pytest_section = {"FAILURES": "failures", "ERRORS": "failures",
                                       "short test summary info": "summary"}.get(title)
            return
        if not self.pytest_counts and _COUNTS.search(text) and re.search(r" in [\d.]+s\b", text):
            self.pytest_counts = text
        if text.startswith("rootdir:") and self.rootdir is None:
            self.rootdir = text
        if self.pytest_section == "failures":
            self._failure_line(s, text)
        elif self.pytest_section == "summary" and text and len(self.pytest_summary) < 30:
            self.pytest_summary.append(text)
        if text.startswith("FAILED ") and len(self.failed) < 20:
            self.failed.append(text)

    def _failure_line(self, s: str, text: str) -> None:
        """A line of pytest's FAILURES or ERRORS: block headers, source, E and location lines are kept."""
        if _BLOCK_HEADER.match(text):
            self.pytest_blocks.header(text)
        elif self.source_next and text:
            self.pytest_blocks.add(s.rstrip())
        elif _PYTEST_KEEP.match(text):
            self.pytest_blocks.add(s.rstrip() if text.startswith(">") else text)
            if text.startswith("E ") and self.first_e_line is None and len(text) > 2:
                self.first_e_line = text[1:].strip()
        self.source_next = bool(_SOURCE_LOC.match(text))

    def _jest(self, s: str) -> None:
        text = s.strip()
        if text.startswith("●") and len(self.jest) < 30:
            self.jest.append(text)
            self.jest_follow = 6
        elif self.jest_follow and text:  # the next few non-blank lines say what was expected
            self.jest_follow -= 1
            if len(self.jest) < 30:
                self.jest.append(text)
        if text.startswith("Tests:") and "failed" in text:
            self.jest_counts = text

    def _traceback(self, s: str) -> None:
        start = s.find("Traceback (most recent call last):")
        if start != -1:
            self.tb, self.tb_prefix, self.tb_cut = deque(maxlen=14), s[:start], 0
            return
        if self.tb is None:
            return
        body = s[len(self.tb_prefix):] if s.startswith(self.tb_prefix) else s
        if not body.strip():
            return
        if body[0] in " \t":
            self.tb_cut += len(self.tb) == self.tb.maxlen
            self.tb.append(body)
            return
        self.exception = body.strip()
        self._close_traceback(self.exception)

    def _close_traceback(self, last: str) -> None:
        cut = [f"  [… {self.tb_cut} line(s) cut]"] if self.tb_cut else []
        self.tracebacks.append(["Traceback (most recent call last):", *cut, *self.tb, last])
        self.tb = None

    def evidence(self) -> Evidence:
        if self.tb is not None:
            last_frame = next((x.strip() for x in reversed(self.tb) if x.strip().startswith("File ")), None)
            self.exception = self.exception or "the log ends inside a Python traceback" + (
                f" (last frame: {last_frame})" if last_frame else "")
            self._close_traceback("[the log ends inside this traceback]")
        header = [f"{k}: {v}" for k, v in (("job", self.job), ("failing step", self.failing_step)) if v]
        header += [self.rootdir] if self.rootdir else []
        header.append(f"{self.lines:,} line(s) read; {self.error_count} error line(s)"
                      + ("; the log ends mid-line (truncated?)" if self.ended_mid_line else ""))
        blocks = [line for i, b in enumerate(self.blocks) for line in ([] if i == 0 else ["…"]) + b]
        structured = blocks or self.pytest_summary or self.failed or self.jest or self.tracebacks or self.lint
        counts = [x for x in [self.pytest_counts] if x]
        sections = [
            ("", header),
            ("linter errors", self.lint + ([self.lint_counts] if self.lint_counts else [])),
            ("go test failures", self.go),
            ("pytest failures", self.pytest_blocks.lines()),
            ("pytest summary", (self.pytest_summary or self.failed) + counts),
            ("jest", self.jest + ([self.jest_counts] if self.jest_counts else [])),
            ("retries and time-outs", self.retries.lines()),
            (f"around the first ##[error] lines ({len(self.blocks)} passage(s))" if self.blocks else "", blocks),
            ("traceback", self.tracebacks[-1] if self.tracebacks else []),
            ("error-like lines", [] if structured else list(self.keywords)),
            ("log tail", [] if structured and not self.ended_mid_line else [clean(r) for r in self.tail]),
        ]
        return Evidence(trigger=self.trigger(), excerpt=fit(sections), failing_step=self.failing_step,
                        task_hint=f"CI job {self.job}" if self.job else None, source_kind="workflow_run",
                        digest=self.digest.hexdigest())

    def trigger(self) -> str:
        specific = [m for m in self.error_messages if not _GENERIC_ERROR.match(m)]
        counts = (f"pytest: {self.pytest_counts}" if self.pytest_counts
                  else f"jest: {self.jest_counts}" if self.jest_counts else None)
        first_jest = next((x for x in self.jest if x.startswith("●")), None)
        why = next((x for x in (self.exception, self.first_e_line, *self.lint[:1], self.go_failed, first_jest,
                                *specific[:1], *self.failed[:1]) if x), None)
        detail = "; ".join(x for x in (counts, why) if x)
        if not detail:
            tail = [t for t in (clean(r).strip() for r in self.tail) if t]
            detail = (self.error_messages[:1] or list(self.keywords)[-1:] or tail[-1:] or ["no error line found"])[0]
        where = f" in `{self.failing_step}`" if self.failing_step else ""
        return one_liner(f"CI failed{where}: {detail}")


def evidence_from_log(source: Path | BinaryIO, *, name: str = "stdin") -> Evidence:
    """Evidence from a CI log of any size: a path, or an open binary stream (stdin)."""
    if isinstance(source, (str, Path)):
        with open_input(Path(source), "log", "pass the path of a CI job log, or - to read it from stdin") as f:
            return evidence_from_log(f, name=str(source))
    scanner = LogScanner()
    scanner.read(source)
    if scanner.lines == 0:
        raise BadInput(f"{name}: the log is empty; nothing to capture (pass the failing job's log)")
    return scanner.evidence()


# ---------------------------------------------------------------- transcripts

def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(b.get("text", b.get("content", ""))) for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content)[:500]


def _call(name: str, args: Any) -> str:
    if isinstance(args, dict):
        value = args.get("command") or args.get("file_path") or args.get("path") or args.get("pattern")
        shown = value if isinstance(value, str) else json.dumps(args, ensure_ascii=False)
    else:
        shown = json.dumps(args, ensure_ascii=False)
    return f"{name} `{one_liner(str(shown), 160)}`"


@dataclass
class TranscriptScanner:
    """Failing tool calls and the end of a run, from Claude Code stream-json or a Replaybook trace."""

    events: int = 0
    skipped: int = 0
    task: str | None = None
    calls: dict[str, str] = field(default_factory=dict)
    recent: deque = field(default_factory=lambda: deque(maxlen=8))
    errors: deque = field(default_factory=lambda: deque(maxlen=6))
    error_count: int = 0
    final_text: str | None = None
    end: str | None = None
    end_failed: bool = False
    digest: Any = field(default_factory=hashlib.sha256)

    def feed(self, raw: bytes, complete: bool) -> None:
        self.digest.update(raw)
        if not raw.strip():
            return
        try:
            event = json.loads(raw.decode("utf-8", "replace")) if complete or raw.endswith(b"}") else None
        except ValueError:
            event = None
        if not isinstance(event, dict) or not ({"type", "kind"} & event.keys()):
            self.skipped += 1
            return
        self.events += 1
        if "kind" in event:
            self._trace(event)
        else:
            self._claude(event)

    def _error(self, what: str, output: str) -> None:
        self.error_count += 1
        lines = [clean(x) for x in output.strip().splitlines()[-8:]]
        self.errors.append([what, *(f"    {x}" for x in lines)])

    def _claude(self, event: dict) -> None:
        kind = event.get("type")
        content = (event.get("message") or {}).get("content")
        blocks = content if isinstance(content, list) else []
        if kind == "assistant":
            for b in (x for x in blocks if isinstance(x, dict)):
                if b.get("type") == "tool_use":
                    call = _call(str(b.get("name")), b.get("input"))
                    self.calls[str(b.get("id"))] = call
                    self.recent.append(call)
                    while len(self.calls) > 500:  # bounded: old ids are no longer answered
                        self.calls.pop(next(iter(self.calls)))
                elif b.get("type") == "text" and b.get("text"):
                    self.final_text = str(b["text"])[-1500:]
        elif kind == "user":
            if isinstance(content, str) and self.task is None:
                self.task = one_liner(content)
            for b in (x for x in blocks if isinstance(x, dict)):
                if b.get("type") == "tool_result" and b.get("is_error"):
                    self._error(self.calls.get(str(b.get("tool_use_id")), "a tool call"), _text_of(b.get("content")))
                elif b.get("type") == "text" and self.task is None:
                    self.task = one_liner(str(b.get("text", "")))
        elif kind == "result":
            subtype, turns = event.get("subtype"), event.get("num_turns")
            self.end_failed = bool(event.get("is_error")) or subtype not in (None, "success")
            cost = event.get("total_cost_usd")
            self.end = (f"Claude Code run ended: {subtype}" + (f" after {turns} turns" if turns is not None else "")
                        + (f", ${cost:.2f}" if isinstance(cost, (int, float)) else "")
                        + (" (is_error)" if event.get("is_error") else ""))
            if isinstance(event.get("result"), str) and event["result"]:
                self.final_text = event["result"][-1500:]

    def _trace(self, event: dict) -> None:
        kind = event.get("kind")
        if kind == "run_start" and event.get("scenario"):
            self.task = self.task or f"replay of scenario {event['scenario']}"
        elif kind == "command":
            argv = event.get("argv") or []
            call = f"`{one_liner(' '.join(map(str, argv)), 160)}` in {event.get('cwd', '.')}"
            self.recent.append(call)
            if event.get("exit_code") not in (0, None):
                self.error_count += 1
                self.errors.append([f"{call} exited {event.get('exit_code')}"])  # no output: shims log none
        elif kind == "tool_call":
            call = _call(str(event.get("name")), event.get("input"))
            self.recent.append(call)
            if event.get("is_error"):
                self._error(call, str(event.get("output_excerpt") or ""))
        elif kind == "agent_output" and event.get("text"):
            self.final_text = str(event["text"])[-1500:]
        elif kind == "run_end":
            self.end_failed = event.get("status") == "failed"
            self.end = f"replay run {event.get('status')}: {event.get('reason') or 'no reason given'}"

    def evidence(self) -> Evidence:
        failures = [line for block in self.errors for line in block]  # call, then its indented output
        header = [f"{self.events} event(s); {self.error_count} failing call(s)"
                  + (f"; {self.skipped} unreadable line(s) skipped" if self.skipped else "")]
        sections = [("", header + ([self.end] if self.end else [])),
                    (f"failing calls (last {len(self.errors)})", failures),
                    ("final message", [clean(x) for x in (self.final_text or "").splitlines()[-15:]]),
                    ("last calls", list(self.recent))]
        if self.end_failed or not self.errors:
            trigger = self.end or "the run ended without a result line"
        else:
            trigger = f"{self.error_count} failing call(s); last: {self.errors[-1][0]}"
        if self.errors and self.end_failed:
            trigger += f"; last failing call: {self.errors[-1][0]}"
        return Evidence(trigger=one_liner(trigger), excerpt=fit(sections), task_hint=self.task,
                        source_kind="transcript", digest=self.digest.hexdigest())


def evidence_from_transcript(path: Path) -> Evidence:
    """Evidence from a Claude Code stream-json transcript or a Replaybook ``trace.jsonl``."""
    hint = "pass a Claude Code transcript (claude -p … --output-format stream-json --verbose) or a trace.jsonl"
    scanner = TranscriptScanner()
    with open_input(Path(path), "transcript", hint) as f:
        for raw, complete in _readlines(f, JSON_LINE_MAX):
            scanner.feed(raw, complete)
    if scanner.events == 0:
        what = "is empty" if scanner.skipped == 0 else f"has {scanner.skipped} line(s) but no JSON events"
        raise BadInput(f"{path}: the transcript {what}; {hint}")
    return scanner.evidence()


# ---------------------------------------------------------------- pull requests

def _diff_stat(text: str) -> list[str]:
    """A ``git diff --stat``-like summary of a full diff; a stat is kept as it is."""
    if "diff --git " not in text:
        return [x for x in text.splitlines() if x.strip()][:40]
    files: dict[str, list[int]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[-1]
            files.setdefault(current, [0, 0])
        elif current and line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            files[current][line[0] == "-"] += 1
    return [f"{name} | +{add} -{rem}" for name, (add, rem) in list(files.items())[:40]]


def evidence_from_pr(title: str, body: str = "", review: str | None = None, diff: str | None = None) -> Evidence:
    """Evidence from a pull request: its title and body, a review, and a diff or diff stat."""
    if not title or not title.strip():
        raise BadInput("capture pr: the title is empty; pass the pull request's title with --title")
    review_lines = [x for x in (review or "").splitlines() if x.strip()]
    sections = [("", [f"title: {one_liner(title, 300)}"]), ("review", review_lines),
                ("body", (body or "").splitlines()), ("diff stat", _diff_stat(diff or ""))]
    digest = hashlib.sha256("\0".join([title, body or "", review or "", diff or ""]).encode()).hexdigest()
    first = review_lines[0] if review_lines else None
    trigger = f"review of PR “{one_liner(title, 80)}”: {first}" if first else f"pull request “{title}” failed"
    return Evidence(trigger=one_liner(trigger), excerpt=fit(sections), task_hint=one_liner(title),
                    source_kind="review" if review_lines else "pull_request", digest=digest)


# ---------------------------------------------------------------- the incident

class Analysis(BaseModel):
    """The analyst's answer. Only these keys are read; any other key (a `rule`, say) is dropped."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    task: str = Field(min_length=1, max_length=300)
    believed: str
    actual: str
    failure_class: FailureClass
    cost_minutes: int = Field(default=0, ge=0, le=10_000)
    repeat_of: str | None = Field(default=None, max_length=40)  # an admitted rule's id; checked in ``repeat_link``

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        if "\n" in value:
            raise ValueError("must be one line")
        return value

    @field_validator("believed")
    @classmethod
    def _believed(cls, value: str) -> str:
        return one_line(value, "believed")

    @field_validator("actual")
    @classmethod
    def _actual(cls, value: str) -> str:
        return one_line(value, "found to be actually true")


@dataclass
class Captured:
    incident: Incident
    created: bool  # False when the source key was already stored, or on a dry run
    path: Path | None  # where it is stored; None on a dry run that found nothing stored
    triage_reason: str | None = None  # why the belief delta is left for a person
    simulated: bool = False  # the SIMULATED model answered


def source_key(evidence: Evidence, explicit: str | None = None) -> str:
    return explicit or f"{evidence.source_kind.replace('_', '-')}-sha256-{evidence.digest[:16]}"


_PROMPT_TAG = re.compile(r"<(?=\s*/?\s*(?:task|step|trigger|evidence)\b)", re.I)


def sealed(text: str | None) -> str | None:
    """Untrusted text that cannot open or close the prompt's data tags: the ``<`` of any
    ``<evidence>``, ``</evidence >``, ``</TASK`` … becomes ``‹``. (The backtick fence around
    it is ``bot.llm.fence``'s.)"""
    return None if text is None else _PROMPT_TAG.sub("‹", text)


def analyse(evidence: Evidence, analyst: Analyst | None, task: str | None,
            rules: list[Rule] = ()) -> tuple[Analysis | None, str | None]:
    """The analyst's belief delta, or None and the reason it could not be had."""
    if analyst is None:
        return None, "no model was configured (set ANTHROPIC_API_KEY to use one)"
    try:
        return analyst.ask_json("capture", Analysis, trigger=sealed(evidence.trigger), excerpt=sealed(evidence.excerpt),
                                failing_step=sealed(evidence.failing_step), task=sealed(task),
                                source_kind=evidence.source_kind,
                                rules=[{"id": r.id, "rule": sealed(r.rule)} for r in rules]), None
    except LLMError as exc:  # the model is down or answered badly: degrade to triage, keep the event
        return None, f"the model's answer could not be used ({type(exc).__name__}: {one_liner(str(exc), 240)})"


def repeat_link(answer: str | None, rules: list[Rule], created: datetime) -> str | None:
    """The model's ``repeat_of``, kept only when it names an admitted rule created before the incident's day
    (a model answer is data: anything else is dropped)."""
    known = {r.id: r for r in rules}
    rule = known.get((answer or "").strip())
    return rule.id if rule is not None and rule.created < created.date() else None


def draft(evidence: Evidence, analyst: Analyst | None = None, *, task: str | None = None,
          task_type: str | None = None, source_url: str | None = None, key: str | None = None,
          content_key: str | None = None, now: datetime | None = None,
          rules: list[Rule] = ()) -> tuple[Incident, str | None]:
    """The incident for ``evidence`` and, when it needs triage, why. With ``rules`` (the admitted
    ones) the model is asked whether the incident repeats one of them."""
    if task_type is not None and not re.match(records.SLUG, task_type):
        raise BadInput(f"task type {task_type!r} is not a slug; use lowercase letters, digits and - . _ (e.g. api)")
    pr_title = evidence.task_hint if evidence.source_kind in ("pull_request", "review") else None
    known = one_liner(task, 300) if task else pr_title
    rules = list(rules)
    analysis, reason = analyse(evidence, analyst, known, rules)
    created = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(second=0, microsecond=0)
    base = {"id": id_for(created), "task_type": task_type, "trigger": evidence.trigger,
            "resolved_by": "unresolved", "created": created, "evidence": evidence.excerpt or None,
            "source": {"kind": evidence.source_kind, "url": source_url, "key": key, "content_key": content_key}}
    if analysis is not None:
        try:
            return Incident.model_validate({**base, "task": known or analysis.task, "believed": analysis.believed,
                                            "actual": analysis.actual, "failure_class": analysis.failure_class,
                                            "cost_minutes": analysis.cost_minutes,
                                            "repeat_of": repeat_link(analysis.repeat_of, rules, created)}), None
        except ValidationError as exc:
            reason = f"the model's answer did not make a valid incident ({exc.error_count()} problem(s))"
    fallback = known or evidence.task_hint or f"unknown task (captured from {evidence.source_kind.replace('_', ' ')})"
    incident = Incident.model_validate({**base, "task": fallback, "believed": BELIEVED_UNKNOWN,
                                        "actual": ACTUAL_UNKNOWN, "failure_class": "unknown", "triage": True})
    return incident, reason


def capture(evidence: Evidence, store: IncidentStore, analyst: Analyst | None = None, *, dry_run: bool = False,
            task: str | None = None, task_type: str | None = None, source_url: str | None = None,
            key: str | None = None, now: datetime | None = None, rules: list[Rule] = ()) -> Captured:
    """Store the incident for ``evidence`` once per source key (nothing on a dry run).

    A key already stored returns the stored incident without asking the model.
    """
    content = source_key(evidence)
    key = source_key(evidence, key)
    for known in dict.fromkeys((key, content)):  # an explicit key, then the content hash: either one dedupes
        existing = store.find_by_key(known)
        if existing is not None:
            return Captured(existing, created=False, path=store.path_of(existing.id), triage_reason=None)
    incident, reason = draft(evidence, analyst, task=task, task_type=task_type, source_url=source_url,
                             key=key, content_key=None if key == content else content, now=now, rules=rules)
    simulated = bool(analyst is not None and getattr(analyst, "simulated", False))
    if dry_run:
        return Captured(incident, created=False, path=None, triage_reason=reason, simulated=simulated)
    stored, created = store.add(incident, explicit_id=False)
    return Captured(stored, created=created, path=store.path_of(stored.id), triage_reason=reason, simulated=simulated)
