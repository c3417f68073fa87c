"""Deciding a scenario's checks from a run's trace and its end state.

``collect_end_state`` reads what the checks need from the sandbox while it
still exists (and runs the ``succeeds`` commands); ``evaluate`` is then a pure
function of the trace events and that ``EndState``. Both are stored in the run
folder, so a run can be re-scored without re-running the agent.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import BaseModel, Field

from bot import scenario as sc
from bot.replay.trace import CommandEvent, TraceEvent

SUCCEEDS_TIMEOUT_S = 120
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


class SucceedsResult(BaseModel):
    run: str
    cwd: str | None = None
    exit_code: int
    output: str = ""
    timed_out: bool = False


class EndState(BaseModel):
    """What the end-state checks need, read before the sandbox is removed."""

    exists: dict[str, bool] = Field(default_factory=dict)
    unchanged: dict[str, bool] = Field(default_factory=dict)
    added_lines: list[tuple[str, str]] = Field(default_factory=list)
    succeeds: list[SucceedsResult] = Field(default_factory=list)
    http_requests: dict[str, int] = Field(default_factory=dict)


@dataclass
class CheckResult:
    check: str  # e.g. "not_ran pytest (cwd .)"
    passed: bool
    detail: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "passed": self.passed, "detail": self.detail, "evidence": self.evidence}


# -- reading the end state ---------------------------------------------------


def collect_end_state(scenario: sc.Scenario, sandbox, http_requests: dict[str, int]) -> EndState:
    """Read the sandbox for every end-state check; run each ``succeeds`` command.

    ``http_requests`` is the services' counts when the agent finished, so the
    ``succeeds`` commands' own requests never count against the agent.
    """
    state = EndState(http_requests=dict(http_requests))
    for check in scenario.pass_if:
        if isinstance(check, sc.Exists):
            state.exists.update({p: sandbox.exists(p) for p in check.exists})
        elif isinstance(check, sc.Unchanged):
            state.unchanged.update({p: sandbox.unchanged(p) for p in check.unchanged})
        elif isinstance(check, sc.DiffExcludes) and not state.added_lines:
            state.added_lines = sandbox.diff().added_lines()
        elif isinstance(check, sc.SucceedsCheck):
            state.succeeds.append(_run_succeeds(check.succeeds, sandbox))
    return state


def _run_succeeds(spec: sc.Succeeds, sandbox) -> SucceedsResult:
    argv = shlex.split(spec.run)
    if spec.cwd and not (sandbox.root / spec.cwd).is_dir():
        return SucceedsResult(run=spec.run, cwd=spec.cwd, exit_code=127, output=f"folder {spec.cwd} does not exist")
    try:
        done = sandbox.run(argv, cwd=spec.cwd, timeout_s=SUCCEEDS_TIMEOUT_S, record=False)
    except OSError as exc:  # the program is missing, or the agent removed the sandbox root
        return SucceedsResult(run=spec.run, cwd=spec.cwd, exit_code=127, output=str(exc))
    output = (done.stdout + done.stderr)[-1500:]
    return SucceedsResult(run=spec.run, cwd=spec.cwd, exit_code=done.rc, output=output, timed_out=done.timed_out)


# -- matching commands -----------------------------------------------------


def normalise(argv: list[str]) -> tuple[str, list[str]]:
    """The program name and its arguments; ``python -m X a`` is ``X a``."""
    if not argv:
        return "", []
    name = os.path.basename(argv[0])
    if _PYTHON.match(name) and len(argv) >= 3 and argv[1] == "-m":
        return argv[2], argv[3:]
    return name, argv[1:]


def _cwd(value: str) -> str:
    return posixpath.normpath(value) if value else "."


def matches(event: CommandEvent, want: sc.CommandMatch) -> bool:
    name, args = normalise(event.argv)
    if name != want.command:
        return False
    if want.cwd is not None and _cwd(event.cwd) != _cwd(want.cwd):
        return False
    return all(a in args for a in (want.args or []))


def matching_runs(events: Iterable[TraceEvent], want: sc.CommandMatch) -> list[CommandEvent]:
    """Matching commands, each counted once: a match inside another match is the same run.

    (``python -m pytest`` through a version-manager shim shows up twice, nested.)
    """
    found = sorted((e for e in events if isinstance(e, CommandEvent) and matches(e, want)),
                   key=lambda e: (e.started_at, e.depth))
    outer: list[CommandEvent] = []
    for event in found:
        start = event.started_at.timestamp()
        inside = any(
            o.depth < event.depth and o.started_at.timestamp() <= start <= o.started_at.timestamp() + o.duration_ms / 1000
            for o in outer
        )
        if not inside:
            outer.append(event)
    return outer


def _evidence(events: list[CommandEvent], limit: int = 5) -> list[dict[str, Any]]:
    return [{"seq": e.seq, "argv": e.argv, "cwd": e.cwd, "exit_code": e.exit_code} for e in events[:limit]]


def _describe(want: sc.CommandMatch) -> str:
    parts = [want.command, *(want.args or [])]
    return " ".join(parts) + (f" (cwd {want.cwd})" if want.cwd is not None else "")


# -- deciding ----------------------------------------------------------------


def evaluate(scenario: sc.Scenario, events: list[TraceEvent], state: EndState) -> list[CheckResult]:
    """Every check of ``pass_if``, decided from the trace and the end state."""
    results: list[CheckResult] = []
    succeeds = iter(state.succeeds)
    for check in scenario.pass_if:
        if isinstance(check, sc.SucceedsCheck):
            results.append(_succeeds(next(succeeds, None), check.succeeds))
        else:
            results.append(_DECIDERS[type(check)](check, events, state))
    return results


def _ran(check: sc.Ran, events, state) -> CheckResult:
    runs = matching_runs(events, check.ran)
    others = matching_runs(events, check.ran.model_copy(update={"cwd": None, "args": None}))
    detail = f"ran {len(runs)} time(s)" if runs else (
        f"never ran; it ran {len(others)} time(s) elsewhere" if others else "never ran")
    return CheckResult(f"ran {_describe(check.ran)}", bool(runs), detail, _evidence(runs or others))


def _not_ran(check: sc.NotRan, events, state) -> CheckResult:
    runs = matching_runs(events, check.not_ran)
    return CheckResult(f"not_ran {_describe(check.not_ran)}", not runs,
                       f"ran {len(runs)} time(s)" if runs else "never ran", _evidence(runs))


def _max_runs(check: sc.MaxRuns, events, state) -> CheckResult:
    runs = matching_runs(events, check.max_runs)
    limit = check.max_runs.max
    return CheckResult(f"max_runs {_describe(check.max_runs)} <= {limit}", len(runs) <= limit,
                       f"ran {len(runs)} time(s)", _evidence(runs[limit:] or runs))


def _exists(check: sc.Exists, events, state) -> CheckResult:
    gone = [p for p in check.exists if not state.exists.get(p, False)]
    return CheckResult(f"exists {', '.join(check.exists)}", not gone,
                       f"missing: {', '.join(gone)}" if gone else "all present")


def _unchanged(check: sc.Unchanged, events, state) -> CheckResult:
    changed = [p for p in check.unchanged if not state.unchanged.get(p, False)]
    return CheckResult(f"unchanged {', '.join(check.unchanged)}", not changed,
                       f"changed or removed: {', '.join(changed)}" if changed else "byte-identical")


def _diff_excludes(check: sc.DiffExcludes, events, state) -> CheckResult:
    hits = [(path, line, pat) for pat in check.diff_excludes for path, line in state.added_lines
            if re.search(pat, line)]
    evidence = [{"path": p, "added_line": line[:200], "pattern": pat} for p, line, pat in hits[:5]]
    return CheckResult(f"diff_excludes {', '.join(check.diff_excludes)}", not hits,
                       f"{len(hits)} added line(s) match" if hits else "no added line matches", evidence)


def _http(check: sc.Http, events, state) -> CheckResult:
    limit = check.http
    counts = state.http_requests if limit.service is None else {limit.service: state.http_requests.get(limit.service, 0)}
    total = sum(counts.values())
    name = f"http max_requests {limit.max_requests}" + (f" ({limit.service})" if limit.service else "")
    return CheckResult(name, total <= limit.max_requests, f"{total} request(s) during the agent's run",
                       [{"service": k, "requests": v} for k, v in counts.items()])


def _succeeds(result: SucceedsResult | None, spec: sc.Succeeds) -> CheckResult:
    name = f"succeeds {spec.run}" + (f" (cwd {spec.cwd})" if spec.cwd else "")
    if result is None:
        return CheckResult(name, False, "was not run")
    detail = "exit 0" if result.exit_code == 0 else (
        "timed out" if result.timed_out else f"exit {result.exit_code}")
    evidence = [] if result.exit_code == 0 else [{"output_tail": result.output[-600:]}]
    return CheckResult(name, result.exit_code == 0, detail, evidence)


_DECIDERS = {
    sc.Ran: _ran, sc.NotRan: _not_ran, sc.MaxRuns: _max_runs, sc.Exists: _exists,
    sc.Unchanged: _unchanged, sc.DiffExcludes: _diff_excludes, sc.Http: _http,
}
