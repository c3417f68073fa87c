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
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot import config as config_mod
from bot._util.text_safety import neutralise
from bot.errors import BadInput
from bot.gate import stats
from bot.gate.decision import Runner, _decide, _suite, incomplete_note, suite_test
from bot.gate.result import GateOptions, GateResult, scoped, watching
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
    """The cells replayed; :func:`document` turns them into the verdict."""

    rule_id: str
    rule_text: str
    members: list[str]
    agents: list[str]
    cells: dict[tuple[str, str], GateResult] = field(default_factory=dict)  # (agent, member) -> its result
    k: int = 0  # the member scenarios the suite test's correction is over
    simulated: bool = False
    model_label: str = ""  # a real local model's name and quantisation


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
        progress: Callable[[str], None] | None = None, only: set[str] | None = None) -> OrgGateResult:
    """Replay ``candidate`` for the org tier in every member (``only``: in those, a fanned-out job's share; the
    correction still counts every member's suite), on every agent. Changes nothing; ``document`` decides."""
    say = progress or (lambda _: None)
    agents = list(dict.fromkeys(agents)) or ["builtin"]
    k = sum(len(_suite_folders(m)) for m in members)
    unknown = sorted((only or set()) - {m.name for m in members})
    if unknown:
        raise BadInput(f"--only: {', '.join(unknown)} is not a member given with --member")
    result = OrgGateResult(candidate.id, candidate.rule, [m.name for m in members], agents, k=k,
                           simulated=opts.replay.simulated, model_label=opts.replay.model_label)
    for agent in agents:
        agent_opts = replace(opts, replay=replace(opts.replay, agent=agent))
        agent_opts = replace(agent_opts, replay=watching(agent_opts.replay, candidate, scoped(agent_opts)))
        runner = Runner(agent_opts)
        try:
            for member in (m for m in members if only is None or m.name in only):
                say(f"{agent} · member `{member.name}`")
                result.cells[(agent, member.name)] = _member(candidate, member, runner, agent_opts, k, say)
        finally:
            runner.close()
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
    cell = GateResult(candidate.id, candidate.rule, "error", "", simulated=opts.replay.simulated,
                      model_label=opts.replay.model_label)
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
        elif cell.undecided:  # the budget ended before these scenarios' tests decided: never an admit
            cell.decision = "error"
            cell.reason = "could not decide: " + "; ".join(e.note for e in cell.undecided)
        else:
            cell.decision, cell.reason = "admit", "its suite does not regress (no scenario of its own for this rule)"
    cell.cost_usd = round(runner.cost - before_cost[0], 6)
    cell.replays = runner.replays - before_cost[1]
    cell.model_calls = runner.model_calls - before_cost[2]
    cell.cache_hits = runner.hits - before_cost[3]
    return cell


def document(result: OrgGateResult, opts: GateOptions) -> dict:
    """The gate's verdict as data: every cell run, the tests, and the decision over them (``conclude``).

    It is what ``--json`` prints, what a fanned-out job hands on (``--only``) and what ``combine`` joins."""
    from bot.gate import report as gate_report

    doc = {"rule": result.rule_id, "rule_text": result.rule_text, "members": result.members,
           "agents": result.agents, "k": result.k, "simulated": result.simulated,
           **({"model_label": result.model_label} if result.model_label else {}),
           "tests": {"own": opts.test.describe(), "suite": suite_test(opts).describe(),
                     "suite_baseline_n": suite_test(opts).baseline_n},
           "cells": [{"agent": a, "member": m, **gate_report.as_json(c)} for (a, m), c in result.cells.items()]}
    return conclude(doc, opts)


def conclude(doc: dict, opts: GateOptions) -> dict:
    """``doc`` with its decision, reason, totals and operating characteristics, from its cells.

    ``partial`` when some (agent, member) cell is not in it yet: a fanned-out job's share."""
    cells = {(c["agent"], c["member"]): c for c in doc["cells"]}
    missing = [(a, m) for a in doc["agents"] for m in doc["members"] if (a, m) not in cells]
    where = (lambda a, m: m if len(doc["agents"]) == 1 else f"{m} ({a})")
    bad = [(k, c) for k, c in cells.items() if c["decision"] == "reject"]
    unsure = [(k, c) for k, c in cells.items() if c["decision"] == "error"]
    if bad:
        decision, reason = "reject", "; ".join(f"member {where(*k)}: {c['reason']}" for k, c in bad)
    elif missing:
        decision, reason = "partial", "not yet replayed: " + ", ".join(where(*k) for k in missing)
    elif unsure:
        decision, reason = "error", "; ".join(f"member {where(*k)}: {c['reason']}" for k, c in unsure)
    else:
        owns = sum(c["before"] is not None for c in cells.values())
        decision = "admit"
        reason = (f"discriminative in each of {owns} member scenario(s) on its own, and no regression in any of the "
                  f"{doc['k']} member suite scenario(s) (corrected over all of them)")
    doc = {**doc, "decision": decision, "reason": reason,
           "cost_usd": round(sum(c["cost_usd"] for c in cells.values()), 6),
           "replays": sum(c["replays"] for c in cells.values())}
    return {**doc, **_characteristics(list(cells.values()), opts)}


def combine(docs: list[dict], opts: GateOptions) -> dict:
    """One verdict from the shares of a fanned-out gate (each ``--only`` job's document); ``BadInput`` when
    they are not shares of the same gate, or a cell comes twice."""
    if not docs:
        raise BadInput("--combine: give the documents the member jobs wrote")
    first = docs[0]
    same = ("rule", "rule_text", "members", "agents", "k", "tests")
    cells: dict[tuple[str, str], dict] = {}
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or any(doc.get(key) != first.get(key) for key in same):
            raise BadInput(f"--combine: document {i + 1} is not a share of the same org gate (its rule, members, "
                           f"agents or k differ from the first's); combine the jobs of one run")
        raws = doc.get("cells")
        for raw in raws if isinstance(raws, list) else []:
            cell = _checked_cell(raw, i)
            key = (cell["agent"], cell["member"])
            if key[0] not in first["agents"] or key[1] not in first["members"]:
                raise BadInput(f"--combine: document {i + 1} holds a cell of member {key[1]!r} on {key[0]!r}, "
                               "which this gate does not have")
            if key in cells:
                raise BadInput(f"--combine: member {key[1]} on {key[0]} is in two documents; each job replays its own")
            cells[key] = cell
    baseline_n = first["tests"].get("suite_baseline_n") if isinstance(first["tests"], dict) else None
    opts = replace(opts, suite_trials=baseline_n if isinstance(baseline_n, int) and baseline_n > 0 else None)
    return conclude({**{key: first[key] for key in same},
                     "simulated": any(d.get("simulated") for d in docs),
                     **next(({"model_label": str(d["model_label"])} for d in docs if d.get("model_label")), {}),
                     "cells": list(cells.values())}, opts)


class _SideDoc(BaseModel):
    model_config = ConfigDict(extra="allow")
    scenario: str
    passed: int = Field(ge=0)
    scored: int = Field(ge=0)


class _EntryDoc(BaseModel):
    model_config = ConfigDict(extra="allow")
    scenario: str
    judged: bool
    regressed: bool
    baseline: _SideDoc | None = None


class _CellDoc(BaseModel):
    """What ``combine`` reads of a share's cell: checked, so a damaged share is bad input, never a crash."""

    model_config = ConfigDict(extra="allow")
    agent: str
    member: str
    decision: Literal["admit", "reject", "error"]
    reason: str
    cost_usd: float = Field(ge=0)
    replays: int = Field(ge=0)
    before: _SideDoc | None = None
    after: _SideDoc | None = None
    suite: list[_EntryDoc] = Field(default_factory=list)
    own_test: str = Field(default="", max_length=2000)  # how its own scenario was judged ("" in an older share)


def _checked_cell(cell: object, i: int) -> dict:
    try:
        return _CellDoc.model_validate(cell).model_dump()
    except ValidationError as exc:
        first = exc.errors()[0]
        field_name = ".".join(str(p) for p in first["loc"]) or "cell"
        raise BadInput(f"--combine: document {i + 1}: a cell's field `{field_name}`: {first['msg']}; give what "
                       "`org gate --only … --json` printed") from None


def _characteristics(cells: list[dict], opts: GateOptions) -> dict:
    """Exact operating characteristics at the rates observed: how likely a rule with no effect is to be
    admitted (every own scenario at its without-rule rate), and to be judged a regression somewhere."""
    out: dict = {"no_effect_admit": None, "no_effect_regression": None}
    test = opts.test.sequential if isinstance(opts.test, stats.AutoTest) else opts.test
    owns = [c["before"] for c in cells if c["before"] and c["before"]["scored"]]
    # Each cell says which test judged it (``gate.own_test: auto`` picks per scenario): the figure is the
    # sequential test's, so only where every cell was judged by it (a share from before says nothing: as asked).
    judged_by = {c.get("own_test") or test.describe() for c in cells if c["before"]}
    if owns and isinstance(test, stats.SequentialTest) and judged_by == {test.describe()}:
        p_admit = 1.0
        for side in owns:
            rate = side["passed"] / side["scored"]
            p_admit *= stats.operating_characteristics(test, rate, rate).p_admit
        out["no_effect_admit"] = p_admit
    rates = [(e["baseline"]["passed"] / e["baseline"]["scored"],) * 2 for c in cells for e in c["suite"]
             if e["judged"] and e["baseline"] and e["baseline"]["scored"]]
    if rates:
        out["no_effect_regression"], _ = stats.suite_characteristics(suite_test(opts), rates)
    return out


def markdown(doc: dict) -> str:
    """The org gate's report: one column per member and agent, and the cost."""
    icon = {"admit": "✅", "reject": "❌", "error": "⚠️", "partial": "⏳"}[doc["decision"]]
    cells = {(c["agent"], c["member"]): c for c in doc["cells"]}
    cols = [(a, m) for a in doc["agents"] for m in doc["members"] if (a, m) in cells]
    head = [m if len(doc["agents"]) == 1 else f"{m} · {a}" for a, m in cols]
    lines = [f"## {icon} Replaybook org gate: {doc['decision']} `{doc['rule']}`", "",
             f"> {_cell(neutralise(doc['rule_text']))}", "",
             f"**Decision:** {doc['decision']}: {neutralise(doc['reason'])}", ""]
    if doc["simulated"]:
        lines += ["_Replays ran against the SIMULATED model (scripted, offline): they prove the harness, not a real "
                  "model's behaviour._", ""]
    elif doc.get("model_label"):
        lines += [f"_Replays ran against {_cell(neutralise(str(doc['model_label'])))}, offline: its cost is tokens "
                  "and CPU time, $0._", ""]
    rows = {
        "own scenario": [f"`{cells[x]['before']['scenario']}`" if cells[x]["before"] else "–" for x in cols],
        "without the rule": [_side(cells[x]["before"]) for x in cols],
        "with the rule": [_side(cells[x]["after"]) for x in cols],
        "suite": [_suite_cell(cells[x]) for x in cols],
        "efficiency" + (" (SIMULATED)" if doc["simulated"] else ""): [_efficiency(cells[x]) for x in cols],
        "task types": [_task_types(cells[x]) for x in cols],
        "decision": [f"**{cells[x]['decision']}**" for x in cols],
        "cost": [f"${cells[x]['cost_usd']:.4f} ({cells[x]['replays']} replays)" for x in cols],
    }
    lines += ["| | " + " | ".join(head) + " |", "|---|" + "---|" * len(cols)]
    lines += [f"| {name} | " + " | ".join(_cell(v) for v in values) + " |" for name, values in rows.items()]
    lines += ["", f"Own-scenario test, in each member on its own: {doc['tests']['own']}.",
              f"Suite test: {doc['tests']['suite']}, its correction over all {doc['k']} member suite scenario(s)."]
    if doc.get("no_effect_admit") is not None:
        lines.append(f"A rule with no effect, at the pass rates seen here, is admitted with probability "
                     f"{doc['no_effect_admit']:.3g} (exact, every member's own test).")
    if doc.get("no_effect_regression") is not None:
        lines.append(f"It is judged a regression somewhere with probability {doc['no_effect_regression']:.1%} "
                     "(exact, over every judged member scenario).")
    lines += ["", f"Cost: ${doc['cost_usd']:.4f}{' (simulated estimate)' if doc['simulated'] else ''}; "
              f"{doc['replays']} replays."]
    return "\n".join(lines) + "\n"


def _side(side: dict | None) -> str:
    return f"{side['passed']}/{side['scored']}" if side else "–"


def _suite_cell(cell: dict) -> str:
    judged = sum(bool(e["judged"]) for e in cell["suite"])
    regressed = [e["scenario"] for e in cell["suite"] if e["regressed"]]
    text = f"{judged} judged, {len(regressed)} regressed"
    return text + (": " + ", ".join(f"`{s}`" for s in regressed) if regressed else "")


def _efficiency(cell: dict) -> str:
    """The cell's efficiency verdict and the pooled ratios behind it (``bot.gate.efficiency``); – without one."""
    eff = cell.get("efficiency") or {}
    if not eff.get("verdict"):
        low, high = (eff.get("pass_rate_change") or {}).get("interval95") or (None, None)
        if low is None:
            return "–"
        return "no change beyond noise" if low <= 0 <= high else "– (the suite's pass rate changed)"
    shown = []
    for name, figure in (eff.get("pooled") or {}).items():
        low, high = (figure or {}).get("interval95") or (None, None)
        if low is not None and (high < 1 or low > 1):
            shown.append(f"{name.removesuffix('_usd')} ×{figure['ratio']:.2f} (95% {low:.2f}–{high:.2f})")
    return f"**{eff['verdict']}**: " + ", ".join(shown)


def _task_types(cell: dict) -> str:
    """Each task type's pass rate without → with the rule, a dropping one marked (``bot.gate.task_types``)."""
    rows = cell.get("by_task_type") or []
    rate = (lambda side: "–" if side.get("rate") is None else f"{side['rate']:.0%}")
    mark = {"drops": " ▼ drops", "rises": " ▲"}
    return "; ".join(f"`{r['task_type']}` {rate(r['without'])} → {rate(r['with_rule'])}{mark.get(r['trend'], '')}"
                     for r in rows) or "–"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")[:300]
