"""Is a scenario sound? ``replaybook scenario validate``, ``playbook check`` and the gate ask here.

A scenario proves a rule only if it can fail for the right reason. Beyond
loading (the schema, every unknown key named), this checks:

* the fixture: no symlink out of it, no special file, a bounded size;
* the simulated model's policy: every step and key, and that its
  ``branch_on`` text occurs in the rule that replays the scenario (or the
  with-rule branch is never taken);
* **the do-nothing control**: a replay with an agent that changes nothing
  must fail, and at least one ``succeeds``/``fails`` check must fail in it (a
  scenario that fails only on ``ran: pytest`` passes for an agent that runs
  pytest and fixes nothing). The control is a real replay, cached by content
  like any other.
* **the reference solution** (``solution:``, ``bot.replay.solution``): run in
  the sandbox as an agent's tool calls, every check must hold after it, or the
  scenario can never be passed and the message names each check that fails.
  A scenario without one is warned about: nothing proves it passable.

Problems come in two kinds: ``problems`` (the files are wrong: bad input,
exit 2) and ``unsound`` (the files are fine but cannot prove a rule: exit 1).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Protocol

from bot.errors import BadInput, FixtureBuildFailed
from bot.replay.agents import AgentResult, AgentRun
from bot.replay.cache import ReplayCache
from bot.replay.engine import ReplayOptions, TrialResult
from bot.replay.gateway.policy import load_policy
from bot.replay.solution import SOLUTION, cached_trial, missing_warning, run_solution, solution_problems
from bot.scenario import spec as sc

MAX_FIXTURE_BYTES = 50 << 20
MAX_FIXTURE_FILES = 20_000


class Rule(Protocol):
    """What validation reads of a rule (:class:`bot.playbook.rule.Rule`): replay sits below the playbook."""

    id: str
    rule: str
    replay: str


class DoNothingAgent:
    """The control: an agent that ends at once, having run, said and changed nothing."""

    name = "do-nothing"
    version = "do-nothing-1"

    def run(self, job: AgentRun) -> AgentResult:
        return AgentResult(status="finished", raw="", version=self.version)


# The control never calls a model, so its gateway's upstream is never reached; a
# model id of its own keeps its cache entries apart from every real replay's.
CONTROL = ReplayOptions(agent=DoNothingAgent.name, model="none (do-nothing control)", api_key="unused",
                        upstream_url="http://127.0.0.1:9")


@dataclass
class Finding:
    """What validation found in one scenario folder."""

    folder: Path
    scenario: str
    problems: list[str] = field(default_factory=list)  # bad input: exit 2
    unsound: list[str] = field(default_factory=list)  # cannot prove a rule: exit 1
    warnings: list[str] = field(default_factory=list)  # flagged, not failed: leakage (bot.scenario.leakage)
    control: TrialResult | None = None
    solution: TrialResult | None = None  # the reference solution's trial, when it ran

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unsound

    @property
    def exit_code(self) -> int:
        return 2 if self.problems else 1 if self.unsound else 0

    def lines(self) -> list[str]:
        return self.problems + self.unsound


def exit_code(findings: Iterable[Finding]) -> int:
    return max((f.exit_code for f in findings), default=0)


# -- the checks ---------------------------------------------------------------


def validate(folder: Path, *, rules: Iterable[Rule] = (), empty_playbook: str = "", control: bool = True,
             policy: bool = True, cache: ReplayCache | None = None) -> Finding:
    """Every check on one scenario folder.

    ``rules`` are the rules that may replay it: one whose ``replay`` names this
    folder must say the policy's branch text. ``empty_playbook`` is the text
    agents read when the playbook holds no rule, which must not say it.
    ``policy=False`` skips the policy (a gate with a real model never reads it).
    """
    folder = Path(folder)
    finding = Finding(folder, folder.name)
    loaded = _load(folder, finding)
    if loaded is None:
        return finding
    finding.scenario = loaded.scenario.id
    finding.problems += fixture_problems(loaded.fixture)
    finding.problems += check_path_problems(loaded)
    branch_on = _policy(loaded, finding) if policy else None
    if branch_on is not None:
        _branch_text(loaded, branch_on, [r for r in rules if _replays(r, folder)], empty_playbook, finding,
                     others=[r for r in rules if not _replays(r, folder)])
    if control and not finding.problems:
        try:
            finding.control = run_control(loaded, cache)
            finding.unsound += control_problems(loaded, finding.control)
            finding.unsound += proven_passable(loaded, finding, cache)
        except FixtureBuildFailed as exc:  # a failing `setup`: no replay of it can be scored; other bad input is exit 2
            finding.unsound += [f"{loaded.folder / 'scenario.yaml'}: the fixture cannot be built, so no replay of "
                                f"it can pass: {exc.message}"]
    elif not finding.problems:
        finding.warnings += missing_warning(loaded)
    return finding


def passable_problems(loaded: sc.LoadedScenario, *, sandbox: str | None = None) -> list[str]:
    """Why the reference solution, replayed under ``sandbox``, does not pass every check (none without one)."""
    if loaded.scenario.solution is None:
        return []
    opts = dataclasses.replace(SOLUTION, sandbox=sandbox) if sandbox else SOLUTION
    return solution_problems(loaded, run_solution(loaded, None, opts))


def proven_passable(loaded: sc.LoadedScenario, finding: Finding, cache: ReplayCache | None = None) -> list[str]:
    """Run the reference solution (a warning when there is none); why it does not pass every check."""
    if loaded.scenario.solution is None:
        finding.warnings += missing_warning(loaded)
        return []
    finding.solution = run_solution(loaded, cache)
    return solution_problems(loaded, finding.solution)


def _load(folder: Path, finding: Finding) -> sc.LoadedScenario | None:
    try:
        loaded = sc.load(folder)
    except BadInput as exc:
        finding.problems += exc.problems or [exc.message]
        return None
    file = folder / "scenario.yaml"
    for key in loaded.scenario.unknown_keys():
        close = difflib.get_close_matches(key, sc.Scenario.model_fields, n=1)
        hint = f"did you mean `{close[0]}`?" if close else f"known: {', '.join(sc.Scenario.model_fields)}"
        finding.problems.append(f"{file}: field `{key}`: is not a known field; {hint}")
    return loaded


def check_path_problems(loaded: sc.LoadedScenario) -> list[str]:
    """``exists`` and ``unchanged`` paths must name something in the fixture: one that names nothing is a typo
    that an ``unchanged`` would pass on every replay (absent before and after) and an ``exists`` fails on each."""
    file = loaded.folder / "scenario.yaml"
    problems = []
    for check in loaded.scenario.pass_if:
        if isinstance(check, (sc.Exists, sc.Unchanged)):
            name = sc.check_name(check)
            for path in getattr(check, name):
                if not os.path.lexists(loaded.fixture / os.path.normpath(path)):
                    problems.append(f"{file}: `{name}` path {path} names nothing in the fixture {loaded.fixture}; "
                                    "fix the path, or add the file to the fixture")
    return problems


def fixture_problems(fixture: Path) -> list[str]:
    """Symlinks that leave the fixture, special files, and a fixture too large to copy per replay."""
    problems, size, count = [], 0, 0
    top = os.path.realpath(fixture)
    for dirpath, dirnames, filenames in os.walk(fixture):
        if os.path.relpath(dirpath, fixture) == "." and ".git" in dirnames:
            dirnames.remove(".git")  # the sandbox leaves a fixture's own .git out
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, fixture)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                real = os.path.realpath(full)
                if os.path.isabs(target) or not (real == top or real.startswith(top + os.sep)):
                    problems.append(f"{fixture}: symlink {rel} -> {target} points outside the fixture; make it a "
                                    "relative link to a path inside the fixture, or copy the file in")
            elif stat.S_ISREG(st.st_mode):
                size, count = size + st.st_size, count + 1
            elif not stat.S_ISDIR(st.st_mode):
                problems.append(f"{fixture}: {rel} is not a file, folder or symlink; remove it from the fixture")
    if size > MAX_FIXTURE_BYTES or count > MAX_FIXTURE_FILES:
        problems.append(f"{fixture}: {count} files, {size / 1e6:.1f} MB; a fixture is copied for every replay, so keep "
                        f"it under {MAX_FIXTURE_FILES} files and {MAX_FIXTURE_BYTES >> 20} MB")
    return problems


def _policy(loaded: sc.LoadedScenario, finding: Finding) -> str | None:
    """The policy's branch text, after checking every step and key."""
    file = loaded.folder / "policy.yaml"
    if not file.exists():
        finding.unsound.append(f"{file}: missing; without a policy the simulated model cannot replay the scenario, "
                               "so the offline gate and CI cannot prove its rule (see docs/replay.md)")
        return None
    try:
        policy = load_policy(file)
    except BadInput as exc:
        finding.problems += [f"{file}: {p}" for p in exc.problems] or [exc.message]
        return None
    finding.problems += [f"{file}: {w}" for w in policy.warnings]
    return policy.branch_on


def _replays(rule: Rule, folder: Path) -> bool:
    return Path(rule.replay).name == folder.name


def _branch_text(loaded: sc.LoadedScenario, branch_on: str, rules: list[Rule], empty_playbook: str,
                 finding: Finding, others: list[Rule] = ()) -> None:
    """The branch text must occur in a rule: its own (it proves that one), or another's.

    A suite scenario whose branch another rule says is sound: it is how a
    rule that breaks another scenario is caught (its own rule is then simply
    not discriminative, which the gate decides).
    """
    where = f"{loaded.folder / 'policy.yaml'}: field `branch_on`"
    if _says(empty_playbook, branch_on):
        finding.unsound.append(f"{where}: {branch_on!r} occurs in the playbook's text even without the rule, so the "
                               "simulated model always takes the with-rule branch; quote words only the rule says")
    if rules and not any(_says(r.rule, branch_on) for r in [*rules, *others]):
        finding.unsound.append(
            f"{where}: {branch_on!r} occurs in no rule that replays this scenario "
            f"({', '.join(r.id for r in rules)}), so the simulated model never takes the with-rule branch; quote "
            "words the rule really says")


def _says(text: str, phrase: str) -> bool:
    return phrase.casefold() in " ".join(text.split()).casefold()


# -- the do-nothing control ------------------------------------------------------


def run_control(loaded: sc.LoadedScenario, cache: ReplayCache | None = None) -> TrialResult:
    """A real replay in which the agent does nothing; cached by content like any replay."""
    return cached_trial(loaded, CONTROL, DoNothingAgent(), cache)


def control_problems(loaded: sc.LoadedScenario, result: TrialResult) -> list[str]:
    file = loaded.folder / "scenario.yaml"
    if result.verdict == "unscored":
        return [f"{file}: the do-nothing control could not be scored ({result.reason}); fix the scenario's "
                "services or budget so a replay of it can end"]
    if result.verdict == "passed":
        return [f"{file}: field `pass_if`: every check holds when the agent does nothing, so the scenario proves no "
                "rule; add a `succeeds` check that fails on the untouched fixture"]
    ended = [c for c in result.checks if c.check.startswith(("succeeds ", "fails "))]
    if ended and all(c.passed for c in ended):
        names = "; ".join(c.check for c in ended)
        return [f"{file}: field `pass_if`: every `succeeds`/`fails` check already holds on the untouched fixture "
                f"({names}); at least one must prove the task was done, or an agent that only runs the right "
                "command passes"]
    return []


__all__ = ["CONTROL", "DoNothingAgent", "Finding", "control_problems", "exit_code", "fixture_problems",
           "passable_problems", "run_control", "validate"]
