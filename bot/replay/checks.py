"""Deciding a scenario's checks from a run's trace and its end state.

``collect_end_state`` reads what the checks need from the sandbox while it
still exists (and runs the ``succeeds`` commands); ``evaluate`` is then a pure
function of the trace events and that ``EndState``. Both are stored in the run
folder, so a run can be re-scored without re-running the agent.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from pydantic import BaseModel, Field

from bot.replay.trace import programs
from bot.replay.trace.attribution import attribute, attribute_new  # noqa: F401 - part of this module's API
from bot.replay.trace.events import (
    AgentOutputEvent,
    CommandEvent,
    ToolCallEvent,
    TraceEvent,
)
from bot.replay.unchanged import names_nothing, unchanged
from bot.scenario import spec as sc

SUCCEEDS_TIMEOUT_S = 120
STDOUT_KEPT = 20_000  # of a `succeeds` command's stdout, for `stdout_matches` (re-scoring reads it again)
HITS_KEPT = 5
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


class SucceedsResult(BaseModel):
    """The result of one command run after the agent finished (a `succeeds` or `fails` check)."""

    run: str
    cwd: str | None = None
    exit_code: int
    output: str = ""  # the tail of stdout and stderr, for the report
    stdout: str = ""  # the head of stdout, for `stdout_matches`
    timed_out: bool = False
    started: bool = True  # False when its folder was gone: the agent's doing, not the harness's

    @property
    def cannot_start(self) -> bool:
        """126 or 127 from a command the harness started: its program is missing or not runnable in the sandbox."""
        return self.started and not self.timed_out and self.exit_code in (126, 127)


class EndState(BaseModel):
    """What the end-state checks need, read before the sandbox is removed."""

    exists: dict[str, bool] = Field(default_factory=dict)
    unchanged: dict[str, bool] = Field(default_factory=dict)
    unchanged_absent: list[str] = Field(
        default_factory=list, description="`unchanged` paths in neither the fixture nor the result: a path that "
                                          "names nothing is a scenario error (a typo), never a pass")
    added_lines: list[tuple[str, str]] = Field(default_factory=list)
    succeeds: list[SucceedsResult] = Field(default_factory=list)  # `succeeds` and `fails`, in pass_if order
    http_requests: dict[str, int] = Field(default_factory=dict)
    output_hits: dict[str, list[str]] = Field(
        default_factory=dict, description="each `output_excludes` pattern found in the agent's full transcript, "
                                          "with a few excerpts around it")


@dataclass
class CheckResult:
    check: str  # e.g. "not_ran pytest (cwd .)"
    passed: bool
    detail: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "passed": self.passed, "detail": self.detail, "evidence": self.evidence}


# -- reading the end state ---------------------------------------------------


def collect_end_state(scenario: sc.Scenario, sandbox, http_requests: dict[str, int], *,
                      transcript: str = "") -> EndState:
    """Read the sandbox for every end-state check; run each ``succeeds`` and ``fails`` command.

    ``http_requests`` is the services' counts when the agent finished, so the
    ``succeeds`` commands' own requests never count against the agent.
    ``transcript`` is the agent's raw output (messages, tool calls and their
    results), searched whole for ``output_excludes``: the trace keeps only excerpts.
    """
    state = EndState(http_requests=dict(http_requests))
    for check in scenario.pass_if:
        if isinstance(check, sc.Exists):
            state.exists.update({p: sandbox.exists(p) for p in check.exists})
        elif isinstance(check, sc.Unchanged):
            state.unchanged.update({p: unchanged(sandbox.pristine, sandbox.root, p) for p in check.unchanged})
            state.unchanged_absent += [p for p in check.unchanged if names_nothing(sandbox.pristine, sandbox.root, p)]
        elif isinstance(check, sc.DiffExcludes) and not state.added_lines:
            state.added_lines = sandbox.diff().added_lines()
        elif isinstance(check, sc.OutputExcludes):
            state.output_hits.update({p: found for p in check.output_excludes if (found := search(p, transcript))})
        elif isinstance(check, sc.END_COMMANDS):
            spec = check.succeeds if isinstance(check, sc.SucceedsCheck) else check.fails
            state.succeeds.append(_run_succeeds(spec, sandbox))
    return state


def _run_succeeds(spec: sc.Succeeds | sc.Fails, sandbox) -> SucceedsResult:
    argv = shlex.split(spec.run)
    if spec.cwd and not (sandbox.root / spec.cwd).is_dir():
        return SucceedsResult(run=spec.run, cwd=spec.cwd, exit_code=127, output=f"folder {spec.cwd} does not exist",
                              started=False)
    try:
        done = sandbox.run(argv, cwd=spec.cwd, timeout_s=SUCCEEDS_TIMEOUT_S, record=False)
    except OSError as exc:  # the program is missing, or the agent removed the sandbox root
        return SucceedsResult(run=spec.run, cwd=spec.cwd, exit_code=127, output=str(exc))
    output = (done.stdout + done.stderr)[-1500:]
    return SucceedsResult(run=spec.run, cwd=spec.cwd, exit_code=done.rc, output=output,
                          stdout=done.stdout[:STDOUT_KEPT], timed_out=done.timed_out)


def infrastructure_problem(state: EndState) -> str | None:
    """Why the checks cannot be trusted to judge the agent, if they cannot: a check's program could not start.

    Exit 126 and 127 are the shell's "not executable" and "not found": the
    scenario's environment lacks the tool, or the sandbox cannot reach it. That is
    the harness's failure or the scenario's, never the agent's, so the trial is unscored.
    """
    for result in state.succeeds:
        if result.cannot_start:
            what = "is not executable" if result.exit_code == 126 else "was not found"
            return (f"the check `{result.run}` exited {result.exit_code}: its program {what} in the sandbox; "
                    "declare it in the scenario's `requirements`, or fix the command")
    return None


def search(pattern: str, text: str, limit: int = HITS_KEPT) -> list[str]:
    """Excerpts around the first matches of ``pattern`` in ``text`` (at most ``limit``)."""
    found = []
    for m in re.finditer(pattern, text):
        found.append(text[max(0, m.start() - 40):m.end() + 40].replace("\n", " "))
        if len(found) >= limit:
            break
    return found


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


def command_line(argv: list[str]) -> str:
    """The command line as a shell would show it, program by its base name, which ``match`` searches.

    However the program was spelled (``/usr/bin/git``, ``./git``, a path ``os.execv``
    was given), ``^git .*push`` sees ``git push …``.
    """
    if not argv:
        return ""
    return shlex.join([os.path.basename(argv[0]) or argv[0], *argv[1:]])


def spelled(event: CommandEvent) -> list[str]:
    """The argv checks see: the program the kernel ran first, by its base name, when the trace knows it
    (``exec -a ls git push`` is ``git push``, a link ``./g`` to git is ``git``), else argv[0]. One exception:
    a Python interpreter called by another Python's name keeps the name it was called by (``python`` is a
    link to ``python3.11`` in every venv), so ``command: python`` still means what it says."""
    argv = list(event.argv) or [""]
    if event.program and programs.LOADER.match(os.path.basename(event.program)):
        at = programs.loader_program(argv)  # strace alone: the loader's program, as its argv names it
        if at is not None:
            return [os.path.basename(argv[at]), *argv[at + 1:]]
    if event.program:
        name, called = os.path.basename(event.program), os.path.basename(event.called or "")
        argv[0] = called if called and _PYTHON.match(name) and _PYTHON.match(called) else name
    return argv


def matches(event: CommandEvent, want: sc.CommandMatch) -> bool:
    """Whether ``event`` is the command ``want`` names; one whose argv was rewritten matches under either."""
    if event.claimed and _matches(spelled(event.model_copy(update={"argv": event.claimed})), event, want):
        return True
    return _matches(spelled(event), event, want)


def _matches(argv: list[str], event: CommandEvent, want: sc.CommandMatch) -> bool:
    name, args = normalise(argv)
    if event.module is not None:
        name = event.module  # `python -m X` of a workspace file X is that file, never the tool X
    if want.command is not None and name != want.command:
        return False
    if want.match is not None and not _regex(want.match).search(command_line(argv)):
        return False
    if want.cwd is not None and _cwd(event.cwd) != _cwd(want.cwd):
        return False
    return all(a in args for a in (want.args or []))


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def matching_runs(events: Iterable[TraceEvent], want: sc.CommandMatch) -> list[CommandEvent]:
    """Matching commands, each counted once: a match inside another match is the same run.

    (``python -m pytest`` through a version-manager shim shows up twice, nested.)
    Unless ``want.by`` is ``any``, only the commands of the agent's tool calls count.
    """
    found = sorted((e for e in events if isinstance(e, CommandEvent) and matches(e, want)
                    and (want.by == "any" or e.by != "agent")),
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
    return [{"seq": e.seq, "argv": e.argv, "cwd": e.cwd, "exit_code": e.exit_code,
             **({"by": e.by, "tool_call": e.tool_call} if e.by else {})} for e in events[:limit]]


def _describe(want: sc.CommandMatch) -> str:
    parts = [p for p in (want.command, *(want.args or [])) if p]
    if want.match is not None:
        parts.append(f"matching /{want.match}/")
    if want.by == "any":
        parts.append("by any")
    return " ".join(parts) + (f" (cwd {want.cwd})" if want.cwd is not None else "")


# -- deciding ----------------------------------------------------------------


def evaluate(scenario: sc.Scenario, events: list[TraceEvent], state: EndState) -> list[CheckResult]:
    """Every check of ``pass_if``, decided from the trace and the end state."""
    results: list[CheckResult] = []
    events = attribute(events)
    ended = iter(state.succeeds)
    for check in scenario.pass_if:
        if isinstance(check, sc.SucceedsCheck):
            results.append(_succeeds(next(ended, None), check.succeeds))
        elif isinstance(check, sc.FailsCheck):
            results.append(_fails(next(ended, None), check.fails))
        else:
            results.append(_DECIDERS[type(check)](check, events, state))
    return results


def _ran(check: sc.Ran, events, state) -> CheckResult:
    # An attempt proves no run, nor does a run whose argv was rewritten before the tracer read it.
    events = [e for e in events if not isinstance(e, CommandEvent) or (e.confirmed and not e.claimed)]
    runs = matching_runs(events, check.ran)
    others = matching_runs(events, check.ran.model_copy(update={"cwd": None, "args": None})) \
        if check.ran.command is not None else []
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
    nothing = [p for p in check.unchanged if p in state.unchanged_absent]
    changed = [p for p in check.unchanged if not state.unchanged.get(p, False) and p not in nothing]
    details = [f"changed or removed: {', '.join(changed)}"] if changed else []
    if nothing:
        details.append(f"names nothing in the fixture or the result: {', '.join(nothing)} (a scenario error: "
                       "fix the path in scenario.yaml; `replaybook scenario validate` says so)")
    return CheckResult(f"unchanged {', '.join(check.unchanged)}", not (changed or nothing),
                       "; ".join(details) or "byte-identical")


def _diff_excludes(check: sc.DiffExcludes, events, state) -> CheckResult:
    lines = state.added_lines if check.paths is None else [
        (path, line) for path, line in state.added_lines if any(glob_matches(g, path) for g in check.paths)]
    hits = [(path, line, pat) for pat in check.patterns for path, line in lines if re.search(pat, line)]
    evidence = [{"path": p, "added_line": line[:200], "pattern": pat} for p, line, pat in hits[:5]]
    name = f"diff_excludes {', '.join(check.patterns)}" + (f" (in {', '.join(check.paths)})" if check.paths else "")
    return CheckResult(name, not hits, f"{len(hits)} added line(s) match" if hits else "no added line matches",
                       evidence)


def glob_matches(glob: str, path: str) -> bool:
    """``*`` and ``?`` stay inside a folder, ``**`` crosses folders; a glob with no ``/`` matches a file name
    at any depth (as in .gitignore)."""
    if "/" not in glob.rstrip("/"):
        glob = "**/" + glob
    if glob.endswith("/"):
        glob += "**"
    return _glob(glob).fullmatch(path) is not None


@lru_cache(maxsize=256)
def _glob(glob: str) -> re.Pattern:
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _output_excludes(check: sc.OutputExcludes, events, state) -> CheckResult:
    texts = list(_agent_texts(events))
    evidence = []
    for pattern in check.output_excludes:
        found = list(state.output_hits.get(pattern, []))
        for text in texts:
            found += search(pattern, text, HITS_KEPT - len(found)) if len(found) < HITS_KEPT else []
        evidence += [{"pattern": pattern, "excerpt": f[:200]} for f in found[:HITS_KEPT]]
    hit = sorted({e["pattern"] for e in evidence})
    return CheckResult(f"output_excludes {', '.join(check.output_excludes)}", not evidence,
                       f"found {', '.join(hit)} in the agent's output" if hit else "no pattern appears",
                       evidence[:HITS_KEPT])


def _agent_texts(events: Iterable[TraceEvent]) -> Iterable[str]:
    """What the agent said and did, as the trace keeps it: its messages, tool inputs and tool results."""
    for event in events:
        if isinstance(event, AgentOutputEvent):
            yield event.text
        elif isinstance(event, ToolCallEvent):
            yield json.dumps(event.input, ensure_ascii=False) if not isinstance(event.input, str) else event.input
            yield event.output_excerpt or ""


def _http(check: sc.Http, events, state) -> CheckResult:
    limit = check.http
    counts = state.http_requests if limit.service is None else {limit.service: state.http_requests.get(limit.service, 0)}
    total = sum(counts.values())
    name = f"http max_requests {limit.max_requests}" + (f" ({limit.service})" if limit.service else "")
    return CheckResult(name, total <= limit.max_requests, f"{total} request(s) during the agent's run",
                       [{"service": k, "requests": v} for k, v in counts.items()])


def _succeeds(result: SucceedsResult | None, spec: sc.Succeeds) -> CheckResult:
    name = f"succeeds {spec.run}" + (f" (cwd {spec.cwd})" if spec.cwd else "") + (
        f" exit {spec.exit}" if spec.exit else "")
    return _end_command(name, result, lambda code: code == spec.exit, spec.stdout_matches)


def _fails(result: SucceedsResult | None, spec: sc.Fails) -> CheckResult:
    name = f"fails {spec.run}" + (f" (cwd {spec.cwd})" if spec.cwd else "")
    return _end_command(name, result, lambda code: code != 0, spec.stdout_matches)


def _end_command(name: str, result: SucceedsResult | None, exit_ok, stdout_matches: str | None) -> CheckResult:
    if stdout_matches is not None:
        name += f" stdout /{stdout_matches}/"
    if result is None:
        return CheckResult(name, False, "was not run")
    detail = "timed out" if result.timed_out else f"exit {result.exit_code}"
    passed = exit_ok(result.exit_code) and not result.timed_out
    if passed and stdout_matches is not None and not re.search(stdout_matches, result.stdout):
        passed, detail = False, f"{detail}, but stdout does not match /{stdout_matches}/"
    evidence = [] if passed else [{"output_tail": result.output[-600:]}]
    return CheckResult(name, passed, detail, evidence)


_DECIDERS = {
    sc.Ran: _ran, sc.NotRan: _not_ran, sc.MaxRuns: _max_runs, sc.Exists: _exists,
    sc.Unchanged: _unchanged, sc.DiffExcludes: _diff_excludes, sc.OutputExcludes: _output_excludes, sc.Http: _http,
}
