"""One run folder, read for the page: the agent's turns, the kernel trace, the checks, the diff, the delivery.

Everything here was written by the harness from what an agent did, so it is data and never trusted: a run
folder is found by its name inside the runs folder the reviewer names (never by a path the gate's JSON
gives), no link is followed, each file is read up to a cap, and a file that does not parse is shown as
missing, never as an error of the page.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bot.errors import BadInput
from bot.replay import checks as checks_mod
from bot.replay.checks import CheckResult
from pydantic import ValidationError

from bot._util.credentials import Redactor
from bot.replay.trace.events import AgentOutputEvent, CommandEvent, RunEndEvent, ToolCallEvent, parse_event
from bot.scenario import spec as sc

FILE_CAP = 4 << 20  # bytes of one artefact read; a run folder is the harness's, but its content is the agent's
TEXT_CAP = 4000  # characters of one text or tool output on the page (the rest is in the run folder)
PREVIEW = 320  # characters shown before the expand control
COMMANDS_CAP = 200  # kernel trace rows per trial
DIFF_CAP = 24_000  # characters of a trial's end-state diff
TURNS_CAP = 80
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


@dataclass
class Text:
    """A text cut for the page: ``head`` shown, ``rest`` behind an expand control, ``cut`` characters left out."""

    head: str
    rest: str = ""
    cut: int = 0


def clip(text: str, limit: int = TEXT_CAP, preview: int = PREVIEW) -> Text:
    kept, cut = text[:limit], max(0, len(text) - limit)
    if len(kept) <= preview:
        return Text(kept, "", cut)
    at = kept.rfind("\n", 0, preview)
    at = at if at > preview // 2 else preview
    return Text(kept[:at], kept[at:], cut)


@dataclass
class ToolCall:
    name: str
    id: str
    input: Text
    output: Text | None = None
    is_error: bool = False


@dataclass
class Turn:
    n: int
    text: Text | None = None
    calls: list[ToolCall] = field(default_factory=list)


@dataclass
class Command:
    seq: int | None
    program: str
    argv: str
    cwd: str
    exit_code: int
    t: float | None
    duration_ms: float
    depth: int
    tool_call: str  # "turn 3 · bash", the raw id, or "" (none)


@dataclass
class Check:
    name: str
    passed: bool
    detail: str
    lines: list[str] = field(default_factory=list)  # the trace lines, added lines or output that decided it
    hunk: str = ""  # the diff hunk of a diff_excludes hit


@dataclass
class RunView:
    """What the page shows of one trial; ``missing`` says why a part is absent."""

    name: str
    turns: list[Turn] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    commands_cut: int = 0
    checks: list[Check] = field(default_factory=list)
    diff: Text | None = None
    delivery: dict[str, Any] | None = None
    final: str = ""
    missing: list[str] = field(default_factory=list)


def locate(runs_root: Path | None, run_dir: str | None) -> Path | None:
    """The run folder named by ``run_dir`` (its last part only) inside ``runs_root``; None when it is not there,
    is a link, or its name is not a run folder's."""
    if runs_root is None or not run_dir:
        return None
    name = Path(str(run_dir)).name
    if not _NAME.match(name):
        return None
    path = Path(runs_root) / name
    return path if path.is_dir() and not path.is_symlink() else None


def _read(path: Path, redact: Callable[[str], str]) -> str | None:
    """The file's text, secrets redacted before anything cuts it (a cut must never split a secret)."""
    if not path.is_file() or path.is_symlink():
        return None
    with path.open("rb") as f:
        data = f.read(FILE_CAP)
    return redact(data.decode("utf-8", errors="replace"))


def read(path: Path, loaded: sc.LoadedScenario | None, redactor: Redactor) -> RunView:
    """Read one run folder; ``loaded``: its scenario, to decide the checks again from the folder."""
    view = RunView(path.name)
    events = _events(path, view, redactor.text)  # None: no trace, or one that does not parse
    calls = {e.id: e for e in events or [] if isinstance(e, ToolCallEvent) and e.id}
    view.turns = _turns(_read(path / "agent.raw", redactor.text), events or [])
    where = {c.id: f"turn {t.n} · {c.name}" for t in view.turns for c in t.calls}
    commands = [e for e in events or [] if isinstance(e, CommandEvent)]
    view.commands = [_command(e, where, calls) for e in commands[:COMMANDS_CAP]]
    view.commands_cut = max(0, len(commands) - COMMANDS_CAP)
    view.final = next((e.text for e in reversed(events or []) if isinstance(e, AgentOutputEvent)), "")
    end = next((e for e in events or [] if isinstance(e, RunEndEvent)), None)
    view.delivery = end.delivery if end else None
    patch = _read(path / "diff.patch", redactor.text)
    if patch is None:
        view.missing.append("diff.patch")
    else:
        view.diff = clip(patch, DIFF_CAP, DIFF_CAP)
    view.checks = _checks(path, loaded, events, patch or "", view, redactor)
    return view


def _events(path: Path, view: RunView, redact: Callable[[str], str]) -> list | None:
    text = _read(path / "trace.jsonl", redact)
    if text is None:
        view.missing.append("trace.jsonl")
        return None
    events = []
    for n, line in enumerate(text.splitlines(), start=1):
        try:
            events.append(parse_event(line)) if line.strip() else None
        except (ValidationError, ValueError):
            view.missing.append(f"trace.jsonl from line {n} (not a trace event)")
            return None
    return events


def _command(e: CommandEvent, where: dict[str, str], calls: dict[str, ToolCallEvent]) -> Command:
    call = e.tool_call or ""
    label = where.get(call) or (f"{calls[call].name} ({call})" if call in calls else call)
    return Command(e.seq, e.program or (e.argv[0] if e.argv else ""), _argv(e.argv), e.cwd, e.exit_code, e.t,
                   e.duration_ms, e.depth, label)


def _argv(argv: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)[:TEXT_CAP]


def _show(value: Any) -> str:
    """A tool call's input as a reader wants it: a command as it is, a file's content unescaped under its path."""
    if isinstance(value, dict) and set(value) == {"command"} and isinstance(value["command"], str):
        return value["command"]
    if isinstance(value, dict) and value and all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        short = [f"{k}: {v}" for k, v in value.items() if "\n" not in str(v)]
        long = [f"{k}:\n{v}" for k, v in value.items() if "\n" in str(v)]
        return "\n".join(short + long)
    return value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False)


def _turns(raw: str | None, events: list) -> list[Turn]:
    """Turns from an Anthropic-style transcript (one message a line), else from the trace's tool calls."""
    turns = _from_messages(raw) if raw else []
    if turns:
        return turns[:TURNS_CAP]
    out = []
    for e in events:
        if isinstance(e, ToolCallEvent):
            out.append(Turn(len(out) + 1, None, [ToolCall(e.name, e.id or "", clip(_show(e.input)),
                                                          clip(e.output_excerpt or ""), bool(e.is_error))]))
        elif isinstance(e, AgentOutputEvent):
            out.append(Turn(len(out) + 1, clip(e.text)))
    return out[:TURNS_CAP]


def _from_messages(raw: str) -> list[Turn]:
    turns: list[Turn] = []
    calls: dict[str, ToolCall] = {}
    for line in raw.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
            continue
        blocks = [b for b in msg["content"] if isinstance(b, dict)]
        if msg.get("role") == "assistant":
            turn = Turn(len(turns) + 1)
            texts = [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
            turn.text = clip("\n".join(texts)) if texts else None
            for b in blocks:
                if b.get("type") == "tool_use":
                    call = ToolCall(str(b.get("name", "")), str(b.get("id", "")), clip(_show(b.get("input"))))
                    calls[call.id] = call
                    turn.calls.append(call)
            turns.append(turn)
        elif msg.get("role") == "user":
            for b in blocks:
                if b.get("type") == "tool_result" and str(b.get("tool_use_id")) in calls:
                    content = b.get("content")
                    text = content if isinstance(content, str) else "\n".join(
                        c.get("text", "") for c in content or [] if isinstance(c, dict))
                    call = calls[str(b.get("tool_use_id"))]
                    call.output, call.is_error = clip(str(text)), bool(b.get("is_error"))
    return turns


def _checks(path: Path, loaded: sc.LoadedScenario | None, events: list | None, patch: str, view: RunView,
            redactor: Redactor) -> list[Check]:
    if events is None:
        return []
    if loaded is None:
        view.missing.append("the checks (the scenario is not in the suite given)")
        return []
    state = _read(path / "end_state.json", redactor.text)
    if state is None:
        view.missing.append("the checks (no end_state.json: the trial was unscored)")
        return []
    try:  # as engine.rescore decides them, from the events already read (and redacted)
        results = checks_mod.evaluate(loaded.scenario, events, checks_mod.EndState.model_validate_json(state))
    except (BadInput, ValueError) as exc:
        view.missing.append(f"the checks ({redactor.text(str(exc))[:200]})")
        return []
    return [_check(r, patch) for r in results]


def _check(r: CheckResult, patch: str) -> Check:
    lines, hunk = [], ""
    for ev in r.evidence:
        if "argv" in ev:
            lines.append(f"#{ev.get('seq')} (cwd {ev.get('cwd')}) $ {_argv(ev['argv'])} → exit {ev.get('exit_code')}")
        elif "added_line" in ev:
            lines.append(f"{ev.get('path')}: +{ev['added_line']}  (matches /{ev.get('pattern')}/)")
            hunk = hunk or hunk_of(patch, str(ev.get("path")), str(ev["added_line"]))
        elif "output_tail" in ev:
            lines.append(str(ev["output_tail"]))
        else:
            lines.append(", ".join(f"{k}: {v}" for k, v in ev.items()))
    return Check(r.check, r.passed, r.detail, [x[:TEXT_CAP] for x in lines], hunk[:TEXT_CAP])


def hunk_of(patch: str, path: str, added: str) -> str:
    """The hunk of ``patch`` in file ``path`` that adds the line ``added``; "" when none does."""
    file_ok, hunk = False, []
    for line in patch.splitlines() + ["diff --git end"]:
        if line.startswith("diff --git ") or line.startswith("@@"):
            if file_ok and any(h == "+" + added for h in hunk):
                return "\n".join(hunk)
            hunk = [line] if line.startswith("@@") else []
            if line.startswith("diff --git "):
                file_ok = line.endswith(f" b/{path}")
        elif hunk:
            hunk.append(line)
    return ""


__all__ = ["Check", "Command", "RunView", "Text", "ToolCall", "Turn", "clip", "hunk_of", "locate", "read"]
