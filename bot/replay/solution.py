"""The reference solution: a scenario proves itself passable before it costs a replay.

A scenario's ``solution:`` (a patch beside scenario.yaml, and/or shell command lines) is replayed by
:class:`SolutionAgent`: a real trial in the same sandbox, with the same tracer, as any agent's, in which each
step is one tool call, so ``ran``/``not_ran`` checks see its commands with their working directories exactly as
they would see an agent's ``bash`` calls. Every check must hold after it; with the do-nothing control failing
(``bot.replay.validate``), the scenario can fail and can be passed. Nothing of the solution runs outside the
sandbox: the patch is read here and handed to ``git apply`` inside it on stdin.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from bot.replay.agents import AgentResult, AgentRun
from bot.replay.cache import ReplayCache, trial_key
from bot.replay.engine import ReplayOptions, TrialResult, run_trial
from bot.replay.trace.shims import TOOL_ENV
from bot.scenario import spec as sc

STEP_TIMEOUT_S = 300.0
OUTPUT_SHOWN = 300

# The solution calls no model: a gateway whose upstream is never reached, and a model id of its own that keeps
# its cache entries apart from every real replay's.
SOLUTION = ReplayOptions(agent="reference-solution", model="none (reference solution)", api_key="unused",
                         upstream_url="http://127.0.0.1:9")


class SolutionAgent:
    """Runs a scenario's reference solution as an agent's tool calls: the patch (``git apply``), then each line."""

    name = "reference-solution"

    def __init__(self, loaded: sc.LoadedScenario):
        solution = loaded.scenario.solution
        self.commands = list(solution.run) if solution else []
        self.patch = (loaded.folder / solution.patch).read_bytes() if solution and solution.patch else None
        digest = hashlib.sha256(repr((self.commands, self.patch)).encode()).hexdigest()[:16]
        self.version = f"reference-solution-1:{digest}"  # the solution's content keys its cached trial

    def steps(self, sandbox) -> list[tuple[dict, list[str], bytes | None]]:
        """(what the trace shows as the call's input, argv, stdin) per step: the patch, then each command line."""
        bash = sandbox.which("bash") or "/bin/bash"
        out = [({"command": "git apply -  # the solution's patch"},
                [sandbox.which("git") or "git", "apply", "--whitespace=nowarn", "-"], self.patch)] if self.patch else []
        return out + [({"command": line}, [bash, "-c", line], None) for line in self.commands]

    def run(self, job: AgentRun) -> AgentResult:
        log: list[str] = []
        steps = self.steps(job.sandbox)
        for index, (shown, argv, stdin) in enumerate(steps):
            if job.remaining_s <= 0:
                return AgentResult(status="timeout", raw="\n".join(log), reason="wall-clock timeout",
                                   turns=index, version=self.version)
            call = f"toolu_solution_{index}"  # every process the step starts is this call's, as a bash tool call's
            done = job.sandbox.run(argv, env={**job.sandbox.env(), TOOL_ENV: call}, stdin=stdin,
                                   timeout_s=max(0.1, min(job.remaining_s, STEP_TIMEOUT_S)), tool_call=call)
            output = f"exit code {done.rc}{' (timed out)' if done.timed_out else ''}\n{done.stdout}{done.stderr}"
            log.append(f"{shown['command']}: {output}")
            if job.on_tool_call:
                job.on_tool_call(name="bash", input=shown, id=call, is_error=done.rc != 0, output=output)
        return AgentResult(status="finished", raw="\n".join(log), turns=len(steps), version=self.version,
                           final_text="reference solution applied")


def run_solution(loaded: sc.LoadedScenario, cache: ReplayCache | None = None,
                 opts: ReplayOptions = SOLUTION) -> TrialResult:
    """The reference solution's trial; cached by content like any replay."""
    return cached_trial(loaded, opts, SolutionAgent(loaded), cache)


def cached_trial(loaded: sc.LoadedScenario, opts: ReplayOptions, agent, cache: ReplayCache | None) -> TrialResult:
    """One trial with no playbook by a harness agent (the reference solution, the do-nothing control), read from
    ``cache`` when it holds it and written there otherwise."""
    key = trial_key(loaded, "", opts, 0, agent.version) if cache else None
    cached = cache.get(key) if cache else None
    if cached is not None:
        return cached
    result = run_trial(loaded, "", opts, 0, agent)
    if cache:
        cache.put(key, result)
    return result


def solution_problems(loaded: sc.LoadedScenario, result: TrialResult) -> list[str]:
    """Why the reference solution does not prove the scenario passable (empty: it does), naming each check."""
    file = loaded.folder / "scenario.yaml"
    if result.verdict == "unscored":
        return [f"{file}: field `solution`: the reference solution could not be scored ({_short(result.reason)}); "
                "the fixture must build and a replay of it end (check `setup`, `requirements` and `budget`)"]
    if result.verdict == "passed":
        return []
    return [f"{file}: field `pass_if`: check `{c.check}` fails even with the reference solution "
            f"({_short(c.detail)}); the scenario cannot be passed: fix the check, or the solution if it is wrong"
            for c in result.failed_checks] or [f"{file}: field `solution`: the reference solution failed "
                                               f"({_short(result.reason)})"]


def missing_warning(loaded: sc.LoadedScenario) -> list[str]:
    if loaded.scenario.solution is not None:
        return []
    return [f"{Path(loaded.folder) / 'scenario.yaml'}: no `solution`: nothing proves the scenario can be passed; "
            "add the commands (or a patch) that do the task right, e.g. `solution: [\"cd pkg && python -m pytest\"]`"]


def _short(text: str) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= OUTPUT_SHOWN else text[:OUTPUT_SHOWN] + " …"


__all__ = ["SOLUTION", "SolutionAgent", "missing_warning", "run_solution", "solution_problems"]
