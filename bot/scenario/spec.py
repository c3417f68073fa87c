"""Scenarios: a fixture repo, a task, and structured checks that can fail.

``pass_if`` is a list of single-key mappings (``- ran: {command: pytest}``).
A sentence is refused: a rule you cannot replay is not a rule.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    AfterValidator,
    BeforeValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from bot._util import records
from bot._util.credentials import credential_error, is_credential_name
from bot.errors import BadInput

ENV_NAME = r"^[A-Z_][A-Z0-9_]*$"
# A package name, extras and version specifiers: no URL, path, option or marker (see bot.replay.sandbox.toolchain).
REQUIREMENT = r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*((===?|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a regular expression ({exc}); escape special characters") from None
    return pattern


Pattern = Annotated[str, Field(min_length=1), AfterValidator(_compiles)]


def _inside_repo(path: str) -> str:
    norm = posixpath.normpath(path)
    if posixpath.isabs(path) or norm == ".." or norm.startswith("../"):
        raise ValueError(f"{path!r} leaves the repo; paths in checks are relative to the repo root and stay inside it")
    return path


RepoPath = Annotated[str, Field(min_length=1), AfterValidator(_inside_repo)]


class CommandMatch(_Strict):
    """Matches a command in the trace; ``python -m X`` counts as ``X``."""

    command: str | None = Field(default=None, min_length=1, description="Program name, e.g. pytest.")
    match: Pattern | None = Field(
        default=None,
        description="A regular expression searched in the command line as a shell shows it (shlex.join of argv), "
                    "e.g. '^git .*push .*--force'.")
    cwd: str | None = Field(default=None, description="Working directory relative to the repo root; '.' is the root.")
    args: list[str] | None = Field(default=None, description="Arguments that must all appear.")
    by: Literal["tool", "any"] = Field(
        default="tool", description="'tool': count the commands the agent's tool calls ran (default); 'any': also "
                                    "those of the agent's own machinery (its shell setup, its git calls).")

    @model_validator(mode="after")
    def _names_a_command(self) -> "CommandMatch":
        if self.command is None and self.match is None:
            raise ValueError("give `command` (a program name), `match` (a regular expression over the command "
                             "line), or both")
        return self


class CountMatch(CommandMatch):
    max: int = Field(ge=0, description="Most times the command may run.")


class Succeeds(_Strict):
    run: str = Field(min_length=1, description="A command line (no shell), run after the agent finishes.")
    cwd: RepoPath | None = None
    exit: int = Field(default=0, ge=0, le=255, description="The exit code that proves the task (default 0).")
    stdout_matches: Pattern | None = Field(default=None, description="A regular expression its stdout must contain.")


class Fails(_Strict):
    run: str = Field(min_length=1, description="A command line (no shell), run after the agent finishes.")
    cwd: RepoPath | None = None
    stdout_matches: Pattern | None = Field(default=None, description="A regular expression its stdout must contain.")


class HttpLimit(_Strict):
    max_requests: int = Field(ge=0)
    service: str | None = Field(default=None, description="The service's env name; default: every service.")


class Ran(_Strict):
    ran: CommandMatch


class NotRan(_Strict):
    not_ran: CommandMatch


class MaxRuns(_Strict):
    max_runs: CountMatch


class Exists(_Strict):
    exists: list[RepoPath] = Field(min_length=1)


class Unchanged(_Strict):
    unchanged: list[RepoPath] = Field(min_length=1)


class DiffScope(_Strict):
    patterns: list[Pattern] = Field(min_length=1, description="Regular expressions no added line may match.")
    paths: list[str] = Field(min_length=1, description="Globs of the files to look in, from the repo root "
                                                       "(`*` stays inside a folder, `**` crosses folders).")


class DiffExcludes(_Strict):
    diff_excludes: list[Pattern] | DiffScope = Field(
        description="Regular expressions no added line may match, or {patterns, paths} to look only in some files.")

    @property
    def patterns(self) -> list[str]:
        return self.diff_excludes.patterns if isinstance(self.diff_excludes, DiffScope) else self.diff_excludes

    @property
    def paths(self) -> list[str] | None:
        return self.diff_excludes.paths if isinstance(self.diff_excludes, DiffScope) else None


class OutputExcludes(_Strict):
    output_excludes: list[Pattern] = Field(
        min_length=1, description="Regular expressions that must not appear in the agent's messages, its tool "
                                  "calls and their results (which hold the output of the commands it ran).")


class SucceedsCheck(_Strict):
    succeeds: Succeeds


class FailsCheck(_Strict):
    fails: Fails


class Http(_Strict):
    http: HttpLimit


CHECKS: dict[str, type[_Strict]] = {
    "ran": Ran, "not_ran": NotRan, "max_runs": MaxRuns, "exists": Exists, "unchanged": Unchanged,
    "diff_excludes": DiffExcludes, "output_excludes": OutputExcludes, "succeeds": SucceedsCheck,
    "fails": FailsCheck, "http": Http,
}
END_COMMANDS = (SucceedsCheck, FailsCheck)  # checks that run a command after the agent finishes


def _check_name(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        name = next(iter(value))
        return name if name in CHECKS else None
    if isinstance(value, BaseModel):
        return next(iter(type(value).model_fields))
    return None


Check = Annotated[
    Union[tuple(Annotated[model, Tag(name)] for name, model in CHECKS.items())],  # type: ignore[misc]
    Discriminator(
        _check_name,
        custom_error_type="check",
        custom_error_message="each check is a mapping with one key among " + ", ".join(CHECKS),
        custom_error_context={"discriminator": "check", "known": ", ".join(CHECKS)},
    ),
]


def check_name(check: BaseModel) -> str:
    return next(iter(type(check).model_fields))


class Budget(_Strict):
    max_turns: int = Field(default=30, ge=1, le=500)
    timeout_s: float = Field(default=600, gt=0, le=7200)
    max_cost_usd: float = Field(default=0.50, ge=0)
    max_processes: int = Field(default=256, ge=8, le=4096, description="Processes alive at once in the sandbox.")
    max_disk_mb: int = Field(default=1024, ge=1, le=16384, description="What the sandbox's folders may hold.")
    max_output_mb: int = Field(default=64, ge=1, le=1024, description="Output of one process the harness reads.")


class Service(_Strict):
    """A local HTTP service with programmable failures; its URL is in ``env``."""

    kind: Literal["http"] = "http"
    env: str = Field(pattern=ENV_NAME, description="Env var that carries the service URL to the agent.")
    fail_first: int = Field(default=0, ge=0, description="Answer the first N requests with `status`.")
    fail_always: bool = False
    status: int = Field(default=503, ge=400, le=599)
    body: Any = Field(default=None, description="JSON body of successful answers.")


SOLUTION_PATCH_MAX = 1 << 20


class Solution(_Strict):
    """The reference solution: what an agent that does the task right does. ``scenario validate`` runs it in the
    sandbox, as an agent's tool calls, and every check must hold after it (``bot.replay.solution``)."""

    patch: str | None = Field(default=None, min_length=1, description="A patch file beside scenario.yaml (git "
                              "diff format), applied in the sandbox with `git apply` before `run`.")
    run: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Shell command lines (bash -c), run in order from the repo root in the "
                                          "sandbox, each as one tool call of an agent (the trace checks see them).")

    @model_validator(mode="after")
    def _does_something(self) -> "Solution":
        if self.patch is None and not self.run:
            raise ValueError("give `run` (command lines), `patch` (a patch file beside scenario.yaml), or both")
        return self


def _solution_shape(value: Any) -> Any:
    """``solution: [cmd, …]`` is short for ``solution: {run: [cmd, …]}``."""
    return {"run": value} if isinstance(value, list) else value


class Scenario(records.Record):
    """A replay that can fail (see docs/formats.md)."""

    kind: ClassVar[str] = "scenario"

    id: str = Field(pattern=records.SLUG)
    task: str = Field(min_length=1, description="The task the agent gets.")
    repo: str = Field(default="repo", description="Fixture folder, relative to scenario.yaml.")
    task_type: str | None = Field(default=None, pattern=records.SLUG)
    pass_if: list[Check] = Field(min_length=1, description="Every check must hold.")
    budget: Budget = Field(default_factory=Budget)
    services: list[Service] = Field(default_factory=list)
    env_allow: list[Annotated[str, Field(pattern=ENV_NAME)]] = Field(
        default_factory=list, description="Env vars passed through to the agent's commands."
    )
    env: dict[Annotated[str, Field(pattern=ENV_NAME)], str] = Field(
        default_factory=dict, description="Fixed env vars the agent's commands get (never secrets)."
    )
    requirements: list[Annotated[str, Field(pattern=REQUIREMENT)]] = Field(
        default_factory=list,
        description="Python packages (wheels) the commands and checks need, e.g. pytest==8.3.4: installed once "
                    "into a cached environment that leads the PATH of the agent and of the checks.",
    )
    requirements_file: str | None = Field(
        default=None, description="A requirements file in the fixture, relative to its root, instead of `requirements`."
    )
    # Not part of a dump (exclude): replays never see it, so it stays out of every trial's cache key; the
    # reference solution's own trial is keyed by its content (bot.replay.solution).
    solution: Annotated[Solution | None, BeforeValidator(_solution_shape)] = Field(
        default=None, exclude=True,
        description="The reference solution, proving the scenario passable: shell command lines run in the sandbox "
                    "as an agent's tool calls, or {patch: FILE, run: [...]}. `scenario validate` and the gate refuse "
                    "a scenario whose checks do not all hold after it.")
    setup: list[str] = Field(
        default_factory=list,
        description="Command lines (no shell) run in the sandbox, in the fixture's root, before the baseline "
                    "commit: git history, a bare remote, a built artefact.",
    )

    @field_validator("env_allow")
    @classmethod
    def _no_credentials(cls, names: list[str]) -> list[str]:
        for name in names:
            if is_credential_name(name):
                raise ValueError(credential_error(name, "env_allow"))
        return names

    @field_validator("pass_if", mode="before")
    @classmethod
    def _not_prose(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                "is a sentence; write structured checks instead, e.g. "
                "`- ran: {command: pytest, cwd: packages/api}` and `- succeeds: {run: python -m pytest -q}` "
                "(a rule you cannot replay is not a rule)"
            )
        return value

    @model_validator(mode="after")
    def _proves_the_task(self) -> "Scenario":
        if not any(isinstance(c, END_COMMANDS) for c in self.pass_if):
            raise ValueError(
                "pass_if has no `succeeds` check (nor a `fails` check), so it could pass with an agent that does nothing; "
                "add `- succeeds: {run: <command that proves the task is done>}`"
            )
        if self.requirements and self.requirements_file:
            raise ValueError("give either `requirements` or `requirements_file`, not both")
        envs = [s.env for s in self.services]
        if len(set(envs)) != len(envs):
            raise ValueError("two services share one `env` name; give each its own")
        return self

    def checks_of(self, kind: type[_Strict]) -> list[Any]:
        return [c for c in self.pass_if if isinstance(c, kind)]


class LoadedScenario(BaseModel):
    """A scenario with the paths it was loaded from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scenario: Scenario
    folder: Path
    fixture: Path


def inside(top: Path, path: Path, *, file: Path, field: str, fix: str) -> Path:
    """``path`` resolved (every link followed) if it stays inside ``top``; else bad input naming ``field``.

    The message never quotes what the path resolves to, nor anything it holds: a
    scenario is written by whoever pushes a branch, and the error may be posted.
    """
    try:
        real = Path(os.path.realpath(path, strict=os.path.lexists(path)))
    except OSError as exc:  # ELOOP and friends
        raise BadInput(f"{file}: field `{field}` cannot be resolved ({exc.strerror}); {fix}") from None
    if not real.is_relative_to(os.path.realpath(top)):
        raise BadInput(f"{file}: field `{field}` points outside {top}/; {fix}")
    return real


def load(path: Path) -> LoadedScenario:
    """Load ``scenarios/<id>/`` (or its ``scenario.yaml``) and check its fixture."""
    path = Path(path)
    file = path / "scenario.yaml" if path.is_dir() or not path.suffix else path
    if not file.exists():
        raise BadInput(f"{file}: no such scenario; a scenario is a folder holding scenario.yaml and its fixture")
    scenario = records.load(Scenario, file, what="scenario")
    folder = file.parent
    if scenario.id != folder.name:
        raise BadInput(
            f"{file}: field `id` is {scenario.id!r} but the folder is {folder.name!r}; they must match"
        )
    home = Path(os.path.realpath(folder.parent))
    fixture = inside(home, folder / scenario.repo, file=file, field="repo",
                     fix=f"keep fixtures inside {folder.parent}/ (the scenario's folder or a shared one beside it)")
    if not fixture.is_dir():
        raise BadInput(f"{file}: field `repo`: fixture folder {fixture} does not exist")
    if scenario.solution is not None and scenario.solution.patch is not None:
        patch = inside(folder, folder / scenario.solution.patch, file=file, field="solution.patch",
                       fix="keep the patch file in the scenario's folder, e.g. `patch: solution.patch`")
        if not patch.is_file() or patch.stat().st_size > SOLUTION_PATCH_MAX:
            raise BadInput(f"{file}: field `solution.patch`: {scenario.solution.patch} is not a file of at most "
                           f"{SOLUTION_PATCH_MAX >> 20} MiB beside scenario.yaml; write the patch there "
                           "(`git diff > solution.patch` in the fixed fixture)")
    return LoadedScenario(scenario=scenario, folder=folder, fixture=fixture)
