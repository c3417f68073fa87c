"""The CI log scanner: a log of any size and any bytes, streamed line by line, kept to the lines that explain the failure."""

from __future__ import annotations

import hashlib
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from bot._util.text_safety import clean
from bot.errors import BadInput
from bot.incident.capture import clues as log_clues
from bot.incident.store import not_text
from bot.incident.capture.evidence import (
    AFTER,
    BEFORE,
    BLOCK,
    BLOCK_LINES,
    ERROR_BLOCKS,
    LINE_MAX,
    TAIL,
    Evidence,
    fit,
    one_liner,
    open_input,
)

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
    probed: bool = False  # the first block was looked at for binary content
    binary: str | None = None  # why the stream is not text, when it is not

    def read(self, stream: BinaryIO) -> None:
        """Scan a whole stream in blocks; memory stays bounded whatever its size or line lengths.

        A stream that is not text (its first 8,000 bytes mostly NUL, control or non-UTF-8 bytes) sets
        :attr:`binary` and is not scanned."""
        pending, overlong = b"", False  # the unfinished last line (at most LINE_MAX bytes kept)
        while block := stream.read(BLOCK):
            if not self.probed:
                self.probed = True
                self.binary = binary_reason(block[:BINARY_PROBE])
                if self.binary:
                    return
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


BINARY_PROBE = 8000  # bytes looked at to call a file binary, as git does


def binary_reason(head: bytes) -> str | None:
    """Why ``head`` (a stream's first bytes) is not text, or None (:func:`bot.incident.store.not_text`)."""
    return not_text(head.decode("utf-8", errors="replace")[:-1])  # a character cut at the probe's end is not bad


def evidence_from_log(source: Path | BinaryIO, *, name: str = "stdin") -> Evidence:
    """Evidence from a CI log of any size: a path, or an open binary stream (stdin)."""
    if isinstance(source, (str, Path)):
        with open_input(Path(source), "log", "pass the path of a CI job log, or - to read it from stdin") as f:
            return evidence_from_log(f, name=str(source))
    scanner = LogScanner()
    scanner.read(source)
    if scanner.binary:
        raise BadInput(f"{name}: not text ({scanner.binary}); pass the failing job's log as text, e.g. "
                       "`gh run view RUN --log-failed > ci.log`")
    if scanner.lines == 0:
        raise BadInput(f"{name}: the log is empty; nothing to capture (pass the failing job's log)")
    return scanner.evidence()
