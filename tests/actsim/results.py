"""What a simulated run reports: step, job and workflow results, and what an action sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# ----------------------------------------------------------------- results


@dataclass
class StepResult:
    name: str
    kind: str  # run | uses | skipped
    rc: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: dict = field(default_factory=dict)
    id: str | None = None
    outcome: str = "success"  # before continue-on-error
    conclusion: str = "success"  # after it
    errors: list[str] = field(default_factory=list)  # ::error:: messages
    inputs: dict = field(default_factory=dict)  # the evaluated `with:` of a uses step
    steps: list[StepResult] = field(default_factory=list)  # a composite action's own steps


@dataclass
class JobResult:
    name: str
    result: str  # success | failure | skipped | cancelled
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    summary: str = ""
    matrix: dict | None = None
    refused: str = ""  # why GitHub never started it (an environment's deployment branch policy)

    def step(self, key: str) -> StepResult:
        """A step by id or name."""
        for s in self.steps:
            if key in (s.id, s.name):
                return s
        raise KeyError(f"no step {key!r} in job {self.name!r}: {[s.id or s.name for s in self.steps]}")

    @property
    def errors(self) -> list[str]:
        return [e for s in _walk(self.steps) for e in s.errors]


@dataclass
class WorkflowResult:
    triggered: bool
    why: str
    jobs: dict[str, JobResult] = field(default_factory=dict)  # by job id; matrix legs as "id (a, b)"
    artifacts: dict[str, dict[str, bytes]] = field(default_factory=dict)  # name -> relative path -> bytes

    def legs(self, job_id: str) -> list[JobResult]:
        return [j for k, j in self.jobs.items() if k == job_id or k.startswith(job_id + " (")]

    @property
    def conclusion(self) -> str:
        results = {j.result for j in self.jobs.values()}
        return "failure" if results & {"failure", "cancelled"} else "success" if "success" in results else "skipped"

    def log(self) -> str:
        """Every step's output, for assertion messages."""
        lines = [f"triggered={self.triggered} ({self.why})"]
        for key, job in self.jobs.items():
            lines.append(f"== job {key}: {job.result}")
            for s in _walk(job.steps):
                lines.append(f"-- step {s.name} [{s.kind}] rc={s.rc} {s.outcome}/{s.conclusion}")
                if not s.steps:  # a composite action's output is its steps'
                    lines += [f"   {x}" for x in (s.stdout + s.stderr).splitlines()]
        return "\n".join(lines)


def _walk(steps: list[StepResult]):
    for s in steps:
        yield s
        yield from _walk(s.steps)


class ActionFailed(Exception):
    """Raised by a simulated remote action to fail its step (not the test)."""


@dataclass
class ActionContext:
    """What a simulated remote action (a Python callable) sees."""

    workspace: Path
    env: dict[str, str]
    github: dict
    artifacts: Path
    runner_temp: Path
    out: list[str] = field(default_factory=list)

    def print(self, text: str) -> None:
        self.out.append(text)
