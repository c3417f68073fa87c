"""The org gate: a stricter gate for the organisation's tier, over every member repository.

An org rule is read by every member, so it must be proven in each, not on average:

- its scenarios come from at least ``min_members`` members (3 by default, never fewer than 2), each
  scenario a folder inside that member's own checkout (never the org repository's, so none is written
  for this rule's PR; on GitHub each member is checked out read-only at a pinned commit);
- in each of those members on its own, the sequential test says it fails without the rule and passes
  with it, with the member's own rules and the org tier in the prompt;
- no member's suite regresses, every member's scenario judged by the suite test with its correction
  extended to all of them (``k`` = every suite scenario of every member);
- where several agents are listed, all of this holds on each.

Nothing is written. The decision is ``admit`` only when every (agent, member) cell admits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from bot import config as config_mod
from bot._util.text_safety import neutralise
from bot.errors import BadInput
from bot.gate import stats
from bot.gate.decision import Runner, _decide, _suite, incomplete_note, suite_test
from bot.gate.result import GateOptions, GateResult
from bot.playbook import org as org_mod
from bot.playbook import rule as rules_mod
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.scenario import spec as sc
from bot.scenario import suite as suite_mod

MIN_MEMBERS_FLOOR = 2


@dataclass
class Member:
    """One member repository as the org gate reads it."""

    name: str
    root: Path
    book: Playbook  # its rules, with the org tier (without the candidate) in front
    suite: Path
    scenario: Path | None  # the folder that proves the candidate here; None: only its suite is judged
    declined: dict[str, str] = field(default_factory=dict)


@dataclass
class OrgGateResult:
    rule_id: str
    rule_text: str
    decision: str  # admit | reject | error
    reason: str
    members: list[str]
    agents: list[str]
    cells: dict[tuple[str, str], GateResult] = field(default_factory=dict)  # (agent, member) -> its result
    k: int = 0  # the member scenarios the suite test's correction is over
    simulated: bool = False
    no_effect_admit: float | None = None  # exact P(admit) of a rule with no effect, at the observed rates
    no_effect_regression: float | None = None  # exact P(a false regression anywhere) of such a rule

    @property
    def cost_usd(self) -> float:
        return round(sum(r.cost_usd for r in self.cells.values()), 6)

    @property
    def replays(self) -> int:
        return sum(r.replays for r in self.cells.values())


def load_candidate(path: Path) -> Rule:
    rule = rules_mod.load(Path(path), named_by_id=False)
    if not rule.replays:
        raise BadInput(f"{path}: field `replays`: an org rule names, per member, the scenario that proves it "
                       "(e.g. replays: {api: scenarios/monorepo-test-cwd, web: …, cli: …})")
    return rule


def members_of(candidate: Rule, roots: list[Path], tier: list[Rule], *, min_members: int,
               source: str = "org") -> list[Member]:
    """The members as the gate reads them; ``BadInput`` (nothing replayed) when the evidence is not enough."""
    min_members = max(min_members, MIN_MEMBERS_FLOOR)
    names = [Path(r).resolve().name for r in roots]
    if len(set(names)) != len(names):
        raise BadInput("--member: two members have the same folder name; a member is named by its folder")
    unknown = sorted(set(candidate.replays) - set(names))
    if unknown:
        raise BadInput(f"field `replays`: names member(s) {', '.join(unknown)}, not given with --member "
                       f"(given: {', '.join(names)})")
    if len(candidate.replays) < min_members:
        raise BadInput(f"field `replays`: its scenarios come from {len(candidate.replays)} member(s); an org rule "
                       f"needs scenarios from at least {min_members} members, each proving it on its own")
    members = []
    for root, name in zip(roots, names):
        root = Path(root).resolve()
        settings = config_mod.load(root)
        link = settings.config.org
        declined = dict(link.decline) if link is not None else {}
        budget = (link.budget_bytes if link is not None and link.budget_bytes else
                  org_mod.budget_for(settings.config.render))
        orgs = org_mod.OrgTier(source, [r for r in tier if r.id != candidate.id], declined, budget)
        book = Playbook(settings.path("playbook"), root=root, cap=settings.cap, org=orgs,
                        half_life_days=settings.config.health.half_life_days)
        rel = candidate.replays.get(name)
        members.append(Member(name, root, book, settings.path("scenarios"),
                              _inside(root, rel, name) if rel else None, declined))
    return members


def _inside(root: Path, rel: str, member: str) -> Path:
    """The scenario folder ``rel`` of ``member``, refused unless it is a real folder within the member."""
    folder = root / rel
    real = Path(os.path.realpath(folder))
    if folder.is_symlink() or not real.is_relative_to(root) or not (real / "scenario.yaml").is_file():
        raise BadInput(f"field `replays.{member}`: {rel} is not a scenario folder of member {member} (a folder "
                       "with scenario.yaml inside the member's checkout, not a link out of it)")
    return real


def run(candidate: Rule, members: list[Member], opts: GateOptions, agents: list[str],
        progress: Callable[[str], None] | None = None) -> OrgGateResult:
    """Gate ``candidate`` for the org tier in every member, on every agent. Changes nothing."""
    say = progress or (lambda _: None)
    agents = list(dict.fromkeys(agents)) or ["builtin"]
    k = sum(len(_suite_folders(m)) for m in members)
    result = OrgGateResult(candidate.id, candidate.rule, "error", "", [m.name for m in members], agents, k=k,
                           simulated=opts.replay.simulated)
    for agent in agents:
        agent_opts = replace(opts, replay=replace(opts.replay, agent=agent))
        runner = Runner(agent_opts)
        try:
            for member in members:
                say(f"{agent} · member `{member.name}`")
                result.cells[(agent, member.name)] = _member(candidate, member, runner, agent_opts, k, say)
        finally:
            runner.close()
    _conclude(result, opts)
    return result


def _suite_folders(member: Member) -> list[Path]:
    own = member.scenario.resolve() if member.scenario else None
    return [f for f in suite_mod.folders(member.suite) if f.resolve() != own]


def _member(candidate: Rule, member: Member, runner: Runner, opts: GateOptions, k: int, say) -> GateResult:
    book = member.book
    tier = book.org
    with_it = tier.with_candidate(candidate)
    kept, left = with_it.fitted()
    before_text = book.render_text(book.admitted())
    after_text = book.render_text(book.admitted(), org=with_it)
    cell = GateResult(candidate.id, candidate.rule, "error", "", simulated=opts.replay.simulated)
    before_cost = (runner.cost, runner.replays, runner.model_calls, runner.hits)
    if any(r.id == candidate.id for r in left):
        cell.decision = "reject"
        cell.reason = (f"does not fit member {member.name}'s org budget of {tier.budget_bytes} bytes: its agents "
                       "would never read it")
    elif member.scenario is not None:
        _decide(cell, runner, opts, sc.load(member.scenario), before_text, after_text, member.suite,
                lambda msg: say(f"  {msg}"), k)
    else:
        cell.suite = _suite(runner, opts, None, before_text, after_text, member.suite, lambda msg: say(f"  {msg}"), k)
        incomplete = incomplete_note(cell)
        if cell.regressions:
            cell.decision = "reject"
            cell.reason = "regressed " + ", ".join(e.scenario for e in cell.regressions)
        elif incomplete:
            cell.decision, cell.reason = "error", f"could not decide: {incomplete}"
        else:
            cell.decision, cell.reason = "admit", "its suite does not regress (no scenario of its own for this rule)"
    cell.cost_usd = round(runner.cost - before_cost[0], 6)
    cell.replays = runner.replays - before_cost[1]
    cell.model_calls = runner.model_calls - before_cost[2]
    cell.cache_hits = runner.hits - before_cost[3]
    return cell


def _conclude(result: OrgGateResult, opts: GateOptions) -> None:
    bad = [(a, m, c) for (a, m), c in result.cells.items() if c.decision == "reject"]
    unsure = [(a, m, c) for (a, m), c in result.cells.items() if c.decision == "error"]
    where = (lambda a, m: f"{m}" if len(result.agents) == 1 else f"{m} ({a})")
    if bad:
        result.decision = "reject"
        result.reason = "; ".join(f"member {where(a, m)}: {c.reason}" for a, m, c in bad)
    elif unsure:
        result.decision = "error"
        result.reason = "; ".join(f"member {where(a, m)}: {c.reason}" for a, m, c in unsure)
    else:
        result.decision = "admit"
        owns = [c for c in result.cells.values() if c.before is not None]
        result.reason = (f"discriminative in each of {len(owns)} member scenario(s) on its own, and no regression in "
                         f"any of the {result.k} member suite scenario(s) (corrected over all of them)")
    _characteristics(result, opts)


def _characteristics(result: OrgGateResult, opts: GateOptions) -> None:
    """Exact operating characteristics at the rates observed: how likely a rule with no effect is to be
    admitted (all own scenarios at their without-rule rate), and to be judged a regression somewhere."""
    test = opts.test
    owns = [c.before for c in result.cells.values() if c.before is not None and c.before.n]
    if owns and isinstance(test, stats.SequentialTest):
        p_admit = 1.0
        for side in owns:
            rate = side.passes / side.n
            p_admit *= stats.operating_characteristics(test, rate, rate).p_admit
        result.no_effect_admit = p_admit
    rates = [(e.baseline.passes / e.baseline.n,) * 2 for c in result.cells.values() for e in c.suite
             if e.judged and e.baseline.n]
    if rates:
        result.no_effect_regression, _ = stats.suite_characteristics(suite_test(opts), rates)


def markdown(result: OrgGateResult, opts: GateOptions) -> str:
    """The org gate's report: one column per member and agent, and the cost."""
    icon = {"admit": "✅", "reject": "❌", "error": "⚠️"}[result.decision]
    cols = [(a, m) for a in result.agents for m in result.members]
    head = [m if len(result.agents) == 1 else f"{m} · {a}" for a, m in cols]
    lines = [f"## {icon} Replaybook org gate: {result.decision} `{result.rule_id}`", "",
             f"> {_cell(neutralise(result.rule_text))}", "",
             f"**Decision:** {result.decision}: {neutralise(result.reason)}", ""]
    if result.simulated:
        lines += ["_Replays ran against the SIMULATED model (scripted, offline): they prove the harness, not a real "
                  "model's behaviour._", ""]
    rows = {
        "own scenario": [f"`{c.before.scenario}`" if c.before else "–" for c in (result.cells[x] for x in cols)],
        "without the rule": [_side(result.cells[x].before) for x in cols],
        "with the rule": [_side(result.cells[x].after) for x in cols],
        "suite": [_suite_cell(result.cells[x]) for x in cols],
        "decision": [f"**{result.cells[x].decision}**" for x in cols],
        "cost": [f"${result.cells[x].cost_usd:.4f} ({result.cells[x].replays} replays)" for x in cols],
    }
    lines += ["| | " + " | ".join(head) + " |", "|---|" + "---|" * len(cols)]
    lines += [f"| {name} | " + " | ".join(_cell(v) for v in values) + " |" for name, values in rows.items()]
    lines += ["", f"Own-scenario test, in each member on its own: {opts.test.describe()}.",
              f"Suite test: {suite_test(opts).describe()}, its correction over all {result.k} member suite "
              "scenario(s)."]
    if result.no_effect_admit is not None:
        lines.append(f"A rule with no effect, at the pass rates seen here, is admitted with probability "
                     f"{result.no_effect_admit:.2e} (exact, every member's own test).")
    if result.no_effect_regression is not None:
        lines.append(f"It is judged a regression somewhere with probability {result.no_effect_regression:.1%} "
                     "(exact, over every judged member scenario).")
    lines += ["", f"Cost: ${result.cost_usd:.4f}{' (simulated estimate)' if result.simulated else ''}; "
              f"{result.replays} replays."]
    return "\n".join(lines) + "\n"


def as_json(result: OrgGateResult) -> dict:
    from bot.gate import report as gate_report

    return {"rule": result.rule_id, "decision": result.decision, "reason": result.reason,
            "members": result.members, "agents": result.agents, "k": result.k, "simulated": result.simulated,
            "no_effect_admit": result.no_effect_admit, "no_effect_regression": result.no_effect_regression,
            "cost_usd": result.cost_usd, "replays": result.replays,
            "cells": [{"agent": a, "member": m, **gate_report.as_json(c)} for (a, m), c in result.cells.items()]}


def _side(side) -> str:
    return f"{side.passes}/{side.n}" if side is not None else "–"


def _suite_cell(cell: GateResult) -> str:
    judged = sum(e.judged for e in cell.suite)
    regressed = [e.scenario for e in cell.regressions]
    text = f"{judged} judged, {len(regressed)} regressed"
    return text + (": " + ", ".join(f"`{s}`" for s in regressed) if regressed else "")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")[:300]
