"""Scope: a rule's scope as each host delivers it, and how the gate must price it.

A rule's scope is its ``paths`` (globs) and ``task_types``. No host knows a task's type, so a task-typed rule
reaches an agent through a host's file whole (under its task-type heading); ``paths`` are rendered into each
host's own scoped form (``bot.playbook.render``) and reach the agent only when that host's trigger fires. The
per-host facts (form, ``scoped_by`` trigger, which host each agent stands for) are one typed table in
``bot.replay.host_scope``, re-exported here: ``DELIVERY``, ``HostDelivery``, ``STANDS_FOR``, ``for_agent``,
``folder_of``, ``folders``, ``effective``, ``matches``.

The gate's hooks: :func:`priced` (the rule as it must be replayed and priced on one agent: its own paths where the
host honours them, widened to a folder on Codex and Gemini, global where the host reads it whole) and
:func:`global_cost` (what the chosen scope costs beside the same rule global). docs/playbook.md ("Scope").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bot.playbook.rule import Rule
from bot.replay.host_scope import (  # noqa: F401  (re-exported: the table is read from here too)
    DELIVERY,
    HARNESS_AGENTS,
    STANDS_FOR,
    UNSCOPED_AGENTS,
    HostDelivery,
    ScopedBy,
    effective,
    folder_of,
    folders,
    for_agent,
    matches,
)


def effective_globs(rule: Rule, host: str) -> list[str] | None:
    """The globs ``host`` really scopes ``rule`` to; None: everywhere (no paths, no dependable form, or a glob a
    folder-file host cannot map to a folder)."""
    return effective(list(rule.paths), host)


@dataclass(frozen=True)
class Priced:
    """The rule as the gate must price it for one agent, and why."""

    rule: Rule
    scoped: bool
    reason: str


def as_global(rule: Rule) -> Rule:
    """The same rule with no scope: what it would cost, and reach, global."""
    return rule.model_copy(update={"paths": [], "task_types": []})


def priced(rule: Rule, agent: str) -> Priced:
    """``rule`` as its host really delivers it to ``agent``: its own paths on a host that honours them (a
    folder-file host's folders, ``packages/api/**``), global where the host reads it whole. No host knows a task's
    type, so ``task_types`` never narrow it here: a host's file gives it to every task, under its heading. The gate
    prices (and replays the suite) with ``priced(...).rule``."""
    typed = " (task types: no host knows a task's type)" if rule.task_types else ""
    if not rule.paths:
        return Priced(as_global(rule), False, "no paths: global" + typed)
    delivery = None if agent in UNSCOPED_AGENTS else for_agent(agent)
    if delivery is None or delivery.scoped_by is None:
        name = delivery.host if delivery else agent
        return Priced(as_global(rule), False, f"{name} has no dependable scoped form: priced as global{typed}")
    globs = effective_globs(rule, delivery.host)
    if globs is None:
        return Priced(as_global(rule), False, f"{delivery.host} scopes by folder and a glob of {rule.paths} names "
                      f"no folder: rendered whole-file, priced as global{typed}")
    return Priced(rule.model_copy(update={"paths": globs, "task_types": []}), True,
                  f"{delivery.host} delivers it by `{delivery.scoped_by}` for {', '.join(globs)}{typed}")


@dataclass(frozen=True)
class ScopeCost:
    """What a rule's chosen scope costs beside the same rule global (the gate report's "scope" line)."""

    scoped: float
    global_: float
    reason: str

    def line(self) -> str:
        saved = f", {1 - self.scoped / self.global_:.0%} less" if self.global_ > 0 else ""
        return (f"scope: about {self.scoped:.1f} replays as scoped, {self.global_:.1f} if it were global{saved} "
                f"({self.reason})")


def global_cost(rule: Rule, agent: str, cost: Callable[[Rule], float]) -> ScopeCost:
    """The gate's hook: ``cost`` (e.g. ``bot.gate.estimate``'s expected replays for a candidate) of the rule as
    priced for ``agent`` and of the same rule global."""
    chosen = priced(rule, agent)
    return ScopeCost(cost(chosen.rule), cost(as_global(rule)), chosen.reason)


def fixture_reach(fixture_files: list[str]) -> Callable[[Rule], float]:
    """A ``cost`` for :func:`global_cost` with no replay: 1 when the rule can reach a fixture holding
    ``fixture_files`` (relative paths), as the gate's ``suite_check.reaches`` reads it; summed over the suite's
    scenarios, it is the number of suite scenarios the rule is replayed in."""
    return lambda rule: float(not rule.paths or any(matches(f, list(rule.paths)) for f in fixture_files))


def suite_cost(rule: Rule, agent: str, fixtures: dict[str, list[str]]) -> ScopeCost:
    """How many suite scenarios (id -> its fixture's files) ``rule`` reaches as its host delivers it to ``agent``,
    beside the same rule global: the gate report's "scope" line before any replay."""
    reach = {sid: fixture_reach(files) for sid, files in fixtures.items()}
    return global_cost(rule, agent, lambda r: sum(f(r) for f in reach.values()))
