"""What a gate is asked to run, built in one place for ``replaybook gate`` and the GitHub gate, and checked first.

:func:`options` makes the :class:`~bot.gate.result.GateOptions` of either front door from the settings: the
replay (model, agent, sandbox, where runs go), the own-scenario test ``gate.own_test`` picks (a re-gate's
``--trials`` caps it: :func:`gate_test`) and the rest of ``gate:``. The two differ only in what they pass: the
default agent (GitHub replays :data:`DEFAULT_AGENT` unless a re-gate names one; the CLI the first of
``--agent``, else of ``replay.agents``), the cache, and the command line's own options.
:func:`gateable` refuses a candidate no replay can judge before anything is replayed or recorded.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot._util.text_safety import code
from bot.errors import BadInput
from bot.gate.result import GateOptions
from bot.gate.stats import AutoTest, BaselineTest, PairedTest, SequentialTest

if TYPE_CHECKING:
    from bot.playbook.store import Playbook
    from bot.replay.engine import ReplayOptions
    from bot.settings import Environment

DEFAULT_AGENT = "builtin"  # the agent the GitHub gate replays with unless a re-gate names one
AGENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")  # the admit workflow checks the same pattern


def agents(settings: Any, given: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The agents a gate may replay: those ``given``, else ``replay.agents``, else :data:`DEFAULT_AGENT`."""
    return list(dict.fromkeys(given)) or list(settings.config.replay.agents) or [DEFAULT_AGENT]


def options(settings: Any, env: "Environment", *, default_agent: str, agent: str | None = None,
            model: str | None = None, own_trials: int | None = None, replay: "ReplayOptions | None" = None,
            suite_trials: int | None = None, jobs: int | None = None, max_cost_usd: float | None = None,
            screen_model: str | None = None, cache_dir: Path | None = None, **replay_given: Any) -> GateOptions:
    """The gate's options under ``settings``: replay ``agent`` (else ``default_agent``) on ``model`` (else
    ``models.agent``), with ``replay_given`` (``runs_dir``, ``sandbox``, ``api_key``, ``command``…), unless
    ``replay`` is given (tests; ``agent`` still replaces its agent); the own test ``gate.own_test`` names, at
    most ``own_trials`` trials with the rule; ``jobs`` trials at once (default: the cores this process may use)."""
    from bot.config import replay_options

    if replay is None:
        replay = replay_options(settings, env, model=model or settings.config.models.agent,
                                agent=agent or default_agent, **replay_given)
    elif agent is not None:
        replay = dataclasses.replace(replay, agent=agent)
    extra = {"jobs": jobs} if jobs else {}
    return GateOptions(replay=replay, test=gate_test(own_trials, settings.config.gate.own_test),
                       suite_trials=suite_trials, max_cost_usd=max_cost_usd, **settings.config.gate.options(),
                       screen_model=screen_model, cache_dir=cache_dir, **extra)


def gate_test(trials: int | None = None, kind: str = "auto") -> SequentialTest | PairedTest | BaselineTest | AutoTest:
    """The own-scenario test, with at most ``trials`` trials with the rule (``/replaybook replay --trials N``).

    Never above the gate's own budget, and never at a lower pass rate than its own test asks: 4 of 5
    becomes 2 of 2, or 3 of 3. The side without the rule is unchanged. ``kind`` is ``gate.own_test``: the
    paired test takes no trial count (it stops when its test decides, at most ``max_pairs`` pairs); ``auto``
    (the default) picks one per scenario, the paired test for a real model (``stats.AutoTest``).
    """
    if kind == "paired":
        return PairedTest()
    if kind == "baseline":
        return BaselineTest()
    test = SequentialTest()
    if trials is not None:
        n = max(1, min(int(trials), test.after_n))
        test = dataclasses.replace(test, after_n=n, after_min_pass=-(-n * test.after_min_pass // test.after_n))
    return AutoTest(sequential=test) if kind == "auto" else test


def what_runs(agent: str | None, trials: int | None, kind: str = "auto", *, simulated: bool = False) -> str:
    """What a (re-)gate replays, in words, for its report and the command's reply (``simulated``: on the
    simulated model, where ``auto`` gives the sequential test to a scenario whose policy has no chance in it)."""
    test = gate_test(trials, kind)
    if isinstance(test, AutoTest):
        test = test.sequential if simulated else test.paired
    if isinstance(test, PairedTest):
        why = "`gate.own_test: auto`, for a real model" if kind == "auto" else "`gate.own_test: paired`"
        return (f"agent {code(agent or DEFAULT_AGENT, 40)}, the paired test ({why}): at most "
                f"{test.max_pairs} pairs of trials without and with the rule"
                + (f", so `--trials {trials}` does not apply" if trials is not None else ""))
    if isinstance(test, BaselineTest):
        return (f"agent {code(agent or DEFAULT_AGENT, 40)}, the baseline test (`gate.own_test: baseline`): at most "
                f"{test.max_n} trials with the rule against the scenario's cached baseline"
                + (f", so `--trials {trials}` does not apply" if trials is not None else ""))
    return (f"agent {code(agent or DEFAULT_AGENT, 40)}, at most {test.after_n} trial(s) with the rule "
            f"(it admits when at least {test.after_min_pass} pass)")


def check_options(agent: str | None, trials: int | None) -> None:
    """BadInput unless ``agent`` is a plain agent name and ``trials`` a whole number within the gate's budget."""
    if agent is not None and not AGENT_NAME.match(agent):
        raise BadInput(f"--gate-agent {agent[:60]!r}: an agent's name is lowercase letters, digits, `-` and `_` "
                       "(e.g. `claude-code`)")
    budget = SequentialTest().after_n
    if trials is not None and (isinstance(trials, bool) or not 1 <= int(trials) <= budget):
        raise BadInput(f"--gate-trials {trials!r}: give a whole number from 1 to {budget} (the gate's budget)")


def gateable(book: "Playbook", rule_file: Path, *, policy: bool) -> None:
    """Bad input before any replay, as `rule validate` and `scenario validate` say it (exit 2, nothing replayed,
    nothing in the ledger): a rule that does not load, an id in use, a scenario with a problem (a misspelt key;
    ``policy``: the simulated agent's policy too), or a rule already admitted. The ledger counts decisions only."""
    from bot.playbook import rule as rules_mod
    from bot.replay import validate as sv

    try:
        rule_id = rules_mod.load(rule_file, named_by_id=False).id
    except BadInput:
        rule_id = None
    admitted = {e.rule.id: e.path for e in book.entries(("rules",))}
    in_rules = rule_file.resolve().parent == book.dir("rules").resolve()
    if in_rules or (rule_id in admitted and admitted[rule_id].resolve() == rule_file.resolve()):
        raise BadInput(f"{rule_file}: {rule_id or 'this rule'} is already admitted (it is in {book.dir('rules')}/); "
                       "the gate decides candidates. To replay an admitted rule again, run `replaybook playbook "
                       f"retest {rule_id or 'RULE_ID'}`; to change it, propose the new text under a new id")
    try:
        rule = book.vet(rule_file)
        problems = sv.validate(book.root / rule.replay, empty_playbook=book.render_text([]), control=False,
                               policy=policy).problems if rule.replay else []
    except BadInput as exc:
        problems = exc.problems or [exc.message]
    if problems:
        raise BadInput(f"{rule_file}: not a candidate the gate can replay; nothing was replayed or recorded in "
                       "the gate ledger (`replaybook rule validate` and `replaybook scenario validate` check it)",
                       problems=problems)
