"""The transcript scanner: a Claude Code stream-json transcript or a replay's ``trace.jsonl``."""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot._util.text_safety import clean
from bot.errors import BadInput
from bot.incident.capture.evidence import (
    JSON_LINE_MAX,
    Evidence,
    _readlines,
    fit,
    one_liner,
    open_input,
)

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
