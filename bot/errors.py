"""Named domain errors. The CLI's one error boundary maps them to exit codes.

- ``BadInput``: the user's input (a file, a flag, a payload) is wrong. Exit 2.
- ``CheckFailed``: a check ran and found problems, or a gate rejected. Exit 1.

Messages name the file, the field (and the line where known) and how to fix it.
"""

from __future__ import annotations


class ReplaybookError(Exception):
    """Base of every error Replaybook raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, problems: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.problems = list(problems or [])

    def render(self) -> str:
        lines = [self.message]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class BadInput(ReplaybookError):
    """Input that cannot be used as given; nothing stored was changed."""

    exit_code = 2


class FixtureBuildFailed(BadInput):
    """A scenario's `setup` failed: its fixture cannot be built, so no replay of it can pass (for ``scenario
    validate``, an unsound scenario)."""


class Interrupted(ReplaybookError):
    """Ctrl-C: the work was stopped part way; what finished is kept. Exit 130."""

    exit_code = 130


class CheckFailed(ReplaybookError):
    """A check or a gate ran to the end and said no."""

    exit_code = 1


class LLMError(ReplaybookError):
    """The model could not be reached, or did not answer in the expected shape.

    Callers turn it into a degraded result (a triage incident, a failed
    group), never a lost event.
    """

    exit_code = 1


class InfrastructureError(Exception):
    """The harness could not do its own part (a sandbox, a toolchain, a tool, git): the trial is unscored.

    Never a ReplaybookError: it never ends a command; the engine turns it into an
    "unscored: infrastructure" trial, and the gate into "could not decide".
    """
