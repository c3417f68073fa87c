"""Distill: unresolved incidents become proposed rules, each with a replay scenario.

How incidents are grouped, and why. Incidents of one ``failure_class`` whose belief deltas share words belong
together. The content words of ``believed`` + ``actual`` (lowercased, split at anything not a letter or digit, so
``packages/api/pytest.ini`` gives ``packages api pytest ini``; stop words and words under three letters dropped; a
plural or -ed/-ing ending cut) are compared pairwise by Jaccard overlap, and two incidents at or above
``GROUP_THRESHOLD`` (0.25: a quarter of their words shared) are linked; a group is a connected set of links
(single-link clustering). Groups are ordered by their oldest incident, and incidents inside a group by ``(created,
id)``, so the same store always gives the same groups. It is cheap (no model call), deterministic (a rerun asks the
same questions) and explainable.

Word overlap is not meaning, though: on the bundled incidents, pairs that describe one mistake in different words
score 0.02-0.32, no better than unrelated pairs. So groups are only the unit of *packing*: whole groups are packed,
in order, into batches of at most ``batch_size`` incidents, one prompt each, and the distiller — which reads meaning
— groups the incidents of a batch by the mistake they show and answers one proposal per mistake, as the article's
distiller reads all the unresolved incidents at once.

The distiller is a separate prompt (``prompts/distill.j2``), never the failing agent's context. Its answer is not
trusted: every constraint is checked here (two sentences with a condition, cites from the group, a scenario with
structured checks that loads, no twin of an admitted or pending rule, no incident cited twice) and every refusal is
reported with its reason.

Ids are allocated under the playbook's lock and files are created without clobbering, so two runs at once never
share an id; an id is never reused, even after a proposal file is deleted (``.replaybook/distill-ids.json`` keeps
the highest id handed out).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timezone
from pathlib import Path
from time import monotonic
from typing import Any

import yaml

from bot._util import records, yamlfile
from bot._util.similarity import similarity
from bot.change import Change, Journal, OverlayTree, apply_local, locked, relative
from bot.config import Settings
from bot.distill import refusals as refusals_mod
from bot.distill import scoping
from bot.distill import spec_change
from bot.distill import proof
from bot.distill.answers import AnswerSet, AsksJson, RuleAnswer, answer_schema, validate_rule
from bot.distill.grouping import Group, batch_size, batches, group_incidents
from bot.distill.spec_change import Refused as _Refused
from bot.distill.spec_change import SpecChange, SpecChangeAnswer, SpecPlan
from bot.distill.staging import stage_scenario
from bot.errors import BadInput, LLMError
from bot.gate.decision import TWIN_THRESHOLD
from bot.incident.store import IncidentSet, IncidentStore
from bot.model import meaning, served
from bot.playbook import rule_ids
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.scenario import spec as scenario_mod

IDS_FILE = rule_ids.MARKS_FILE
EVIDENCE_IN_PROMPT = 1200


# -- the report ----------------------------------------------------------------------------


@dataclass
class Proposal:
    id: str
    group: str
    rule: str
    cites: list[str]
    provisional: bool
    scenario: str
    new_scenario: bool
    path: str | None  # None in a dry run
    replaces: list[str] = field(default_factory=list)  # refused proposals it answers (their ids; see distill.refusals)
    files: Change = field(default_factory=Change, repr=False)  # its rule file and new scenario, as a change


@dataclass
class Refusal:
    group: str
    reason: str
    what: str = "refused"  # skipped | failed | refused | dropped (a cite, the proposal went on)
    incidents: list[str] = field(default_factory=list)


@dataclass
class DistillReport:
    dry_run: bool = False
    simulated: bool = False
    model_label: str = ""  # a real local model's name and quantisation ("" for a hosted model)
    groups: list[Group] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    spec_changes: list[SpecChange] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    asked: int = 0
    failed: int = 0
    unreadable: list[str] = field(default_factory=list)  # one message per incident file that did not load
    change: Change = field(default_factory=Change, repr=False)  # every file the run adds
    written: bool = False
    repeats: dict[str, list[str]] = field(default_factory=dict)  # incident -> the earlier ones of its group
    standing: list[str] = field(default_factory=list)  # refused proposals whose re-proposals are used up

    def as_dry_run(self) -> "DistillReport":
        """This plan, as a dry run reports it: nothing was written, so no proposal has a path."""
        self.dry_run = True
        for item in [*self.proposals, *self.spec_changes]:
            item.path = None
        return self

    def as_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "simulated": self.simulated, **({"model_label": self.model_label} if self.model_label else {}),
            "groups": [{"key": g.key, "failure_class": g.failure_class, "incidents": g.ids} for g in self.groups],
            "proposals": [{k: v for k, v in asdict(p).items() if k != "files"} for p in self.proposals],
            "spec_changes": [asdict(s) for s in self.spec_changes],
            "refusals": [asdict(r) for r in self.refusals],
            "asked": self.asked,
            "failed": self.failed,
            "unreadable": self.unreadable,
            "repeats": self.repeats,
            "standing": self.standing,
        }


@dataclass
class _RulePlan:
    group: Group
    rule: str
    cites: list[str]
    task_types: list[str]
    scenario_id: str
    staged: Path | None  # a validated new scenario folder, outside the repo until written
    paths: list[str] = field(default_factory=list)
    refused: list[refusals_mod.Refused] = field(default_factory=list)  # what the group's prompt showed as refused
    scope_reason: str = ""  # why it has its scope (bot.distill.scoping)


# -- the run ---------------------------------------------------------------------------------


def distill(settings: Settings, llm: AsksJson, *, dry_run: bool = False, **options: Any) -> DistillReport:
    """The local command: :func:`plan`, with the ids allocated and the change written in one journal commit
    under the playbook's lock (so two runs at once never share an id). ``dry_run``: the plan, written nowhere."""
    if dry_run:
        return plan(settings, llm, **options).as_dry_run()
    return _distill(settings, llm, sink=apply_local, **options)


def plan(settings: Settings, llm: AsksJson, **options: Any) -> DistillReport:
    """Propose rules (or spec changes) from the unresolved incidents, as ``report.change``; writes nothing.

    ``incidents`` replaces the configured store (on GitHub: the open incident
    issues); ``reserved_ids`` are rule ids in use elsewhere (on GitHub: those
    of the bot's rule PRs, open or closed), never handed out again. On
    GitHub each proposal's part of the change becomes a PR.
    """
    return _distill(settings, llm, sink=None, **options)


def _distill(settings: Settings, llm: AsksJson, *, sink: Callable[[Change, Path], None] | None,
             min_incidents: int = 1, since: datetime | date | None = None, today: date | None = None,
             batch_max: int | None = None, incidents: IncidentStore | IncidentSet | None = None,
             reserved_ids: Iterable[str] = (), refused: Iterable[refusals_mod.Refused] | None = None,
             progress: Callable[[str], None] = lambda _: None) -> DistillReport:
    today = today or datetime.now(timezone.utc).date()
    batch_max = batch_size(batch_max, local=served.is_local(getattr(llm, "model", None)))
    store = incidents if incidents is not None else IncidentStore(settings.path("incidents"))
    book = Playbook(settings.path("playbook"), root=settings.root, cap=settings.cap, incidents=store)
    scenarios_dir = settings.path("scenarios")
    report = DistillReport(simulated=bool(getattr(llm, "simulated", False)),
                           model_label=str(getattr(llm, "label", "") or ""))
    retry = refusals_mod.local(book, settings.root) if refused is None else refusals_mod.Refusals.of(list(refused))
    reopened = {r.rule_id for r in retry.open}
    covered = {c: by for c, by in _covered(book).items() if by.split(" ", 1)[0] not in reopened}
    stands = {c: r for r in retry.stand for c in r.cites}
    report.standing = [r.label() for r in retry.stand]
    candidates = []
    reading = store.read()  # a bad file is reported and the rest distilled
    report.unreadable = reading.problems
    for incident in reading.incidents:
        if not incident.unresolved or (since is not None and incident.created < _as_utc(since)):
            continue
        if incident.triage:
            report.refusals.append(Refusal(incident.id, "needs triage: its belief delta was not filled in; "
                                           "edit believed/actual and set triage: false", "skipped", [incident.id]))
        elif incident.id in stands:
            report.refusals.append(Refusal(incident.id, stands[incident.id].stands(), "skipped", [incident.id]))
        elif incident.id in covered:
            report.refusals.append(Refusal(incident.id, f"already cited by {covered[incident.id]}", "skipped",
                                           [incident.id]))
        else:
            candidates.append(incident)
    report.groups = group_incidents(candidates)
    plans: list[_RulePlan | SpecPlan] = []
    report.repeats, repeats = _record_repeats(report.groups, store, settings.root)
    if not candidates:  # said, so a quiet run is never mistaken for a hang
        progress(f"no incidents to distill: of {len(reading.incidents)} incident file(s), none is unresolved and "
                 f"untriaged{' since the date given' if since else ''}; {len(report.refusals)} skipped")
    todo = list(batches(report.groups, batch_max))
    with tempfile.TemporaryDirectory(prefix="replaybook-distill-") as staging:
        for number, group in enumerate(todo, start=1):
            if len(group.incidents) < min_incidents:
                report.refusals.append(Refusal(group.key, f"{len(group.incidents)} incident(s); --min-incidents is "
                                               f"{min_incidents}", "skipped", group.ids))
                continue
            progress(f"batch {number}/{len(todo)}: {len(group.incidents)} incident(s) ({group.key}), asking the model")
            began, before = monotonic(), len(report.refusals)
            plans += (got := _ask(group, llm, book, scenarios_dir, Path(staging), report, retry.for_group(group.ids)))
            progress(f"batch {number}/{len(todo)}: {len(got)} proposal(s), {len(report.refusals) - before} "
                     f"refusal(s), {monotonic() - began:.0f} s")
        if sink is None:
            report.change = repeats | _apply(plans, book, settings, report, today, reserved=reserved_ids)
        elif plans or repeats:
            with locked(settings.root):
                Journal(settings.root).recover()  # finish a change a crash interrupted before reading state
                report.change = repeats | _apply(plans, book, settings, report, today, reserved=reserved_ids)
                sink(report.change, settings.root)
            report.written = bool(report.change)
    return report


def _record_repeats(groups: list[Group], store: IncidentStore | IncidentSet,
                    root: Path) -> tuple[dict[str, list[str]], Change]:
    """Each later incident of a group repeats the earlier ones: the links, and ``repeat_of`` where nothing is,
    as a change of the store's files (none for incidents held in memory, such as GitHub's issues)."""
    from bot.playbook import worth as health

    links: dict[str, list[str]] = {}
    for group in groups:
        links.update(health.group_links(group.incidents))
    if not isinstance(store, IncidentStore):
        return links, Change()
    files: dict[str, str] = {}
    for incident_id, earlier in links.items():
        path = store.path_of(incident_id)
        text = yamlfile.set_top_level(path.read_text(encoding="utf-8"), "repeat_of", json.dumps(earlier))
        try:
            store.load_text(path, text)  # validated before it is written
        except BadInput:  # a layout the one-line edit cannot extend (a document end, say): reported, not written
            continue
        files[relative(path, root)] = text
    return links, Change(files)


def _as_utc(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return datetime.combine(value, time(0), tzinfo=timezone.utc)


def _ask(group: Group, llm: AsksJson, book: Playbook, scenarios_dir: Path, staging: Path,
         report: DistillReport, refused: list[refusals_mod.Refused] = ()) -> list[_RulePlan | SpecPlan]:
    """One model call for ``group`` (with the gate's refusals of its earlier proposals), each proposal checked."""
    report.asked += 1
    variables = _prompt_vars(group, book, scenarios_dir, refused)
    narrowed = answer_schema(group.ids, variables.pop("scenario_ids"), scenario_mod.CHECKS)

    def attempt(**retry: str) -> list[_RulePlan | SpecPlan]:
        answers = llm.ask_json("distill", AnswerSet, answer_schema=narrowed, **variables, **retry).proposals
        return [p for p in (_plan(group, a.root, scenarios_dir, staging, report) for a in answers) if p is not None]

    def refuse(reason: str, what: str) -> None:  # a model failure is this group's, never the run's
        report.failed += what == "failed"
        report.refusals.append(Refusal(group.key, reason, what, group.ids))
    try:
        plans = attempt()
    except LLMError as exc:
        return refuse(f"the model failed: {exc}", "failed") or []
    plans = proof.sound(plans, lambda why: attempt(unsound=why), refuse, report)  # generated scenarios proven
    for p in plans:
        if isinstance(p, _RulePlan):
            p.refused = list(refused)
    return plans


def _plan(group: Group, answer: RuleAnswer | SpecChangeAnswer, scenarios_dir: Path, staging: Path,
          report: DistillReport) -> _RulePlan | SpecPlan | None:
    try:
        try:
            json.dumps(answer.model_dump(), ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused("the answer holds text that is not valid UTF-8 (a lone surrogate)") from None
        if isinstance(answer, SpecChangeAnswer):
            return spec_change.plan(group, answer)
        return _rule_plan(group, answer, scenarios_dir, staging)
    except _Refused as exc:
        report.refusals.append(Refusal(group.key, str(exc), "refused", group.ids))
        return None


def _rule_plan(group: Group, answer: RuleAnswer, scenarios_dir: Path, staging: Path) -> _RulePlan:
    text = " ".join(answer.rule.split())
    validate_rule(text, answer.task_types, answer.paths)
    answer, why = scoping.narrowest(group.incidents, answer)  # the narrowest scope the evidence supports
    validate_rule(text, answer.task_types, answer.paths)
    choice = answer.scenario
    if choice.existing is not None:
        scenario_id = choice.existing.strip()
        if not re.match(records.SLUG, scenario_id):
            raise _Refused(f"scenario {scenario_id!r} is not a scenario id (a slug such as monorepo-test-cwd)")
        try:
            scenario_mod.load(scenarios_dir / scenario_id)
        except BadInput as exc:
            raise _Refused(f"existing scenario {scenario_id!r} does not load: {exc.render()}") from None
        return _RulePlan(group, text, answer.cites, answer.task_types, scenario_id, None, answer.paths, scope_reason=why)
    new = choice.new
    assert new is not None
    return _RulePlan(group, text, answer.cites, answer.task_types, new.id, stage_scenario(new, text, staging),
                     answer.paths, scope_reason=why)


# -- the plans as one change, under the lock ----------------------------------------------------


def _apply(plans: list[_RulePlan | SpecPlan], book: Playbook, settings: Settings, report: DistillReport,
           today: date, *, reserved: Iterable[str] = ()) -> Change:
    """Check plans against the playbook as it is now, allocate ids, and return every file they add, as one change."""
    entries = book.entries(("proposed", "rules"))
    existing = [(e.rule.id, e.state, e.rule.rule) for e in entries]
    reopened = {r.rule_id for p in plans if isinstance(p, _RulePlan) for r in p.refused}
    covered = {c: by for c, by in _covered(book, entries).items() if by.split(" ", 1)[0] not in reopened}
    archived: set[str] = set()  # refused proposals this run already replaced
    ids = _allocator(book, settings.root, reserved)
    claimed: set[str] = set()  # new scenario ids taken by this run
    change = Change()
    for plan in plans:
        try:
            cites = _checked_cites(plan.group, plan.cites, covered, report)
            if isinstance(plan, SpecPlan):
                spec, files = spec_change.planned(plan, cites, ids, book, today, change)
                report.spec_changes.append(spec)
                change = change | files
                covered.update({c: spec.id for c in cites})
                continue
            replaced = [r for r in plan.refused if set(r.cites) & set(cites)]
            _check_against_refused(plan, replaced)
            for other_id, state, text in existing:
                if other_id in {r.rule_id for r in replaced}:
                    continue
                found = meaning.relate(plan.rule, text)
                if found.kind == "twin":
                    what = "admitted" if state == "rules" else "pending"
                    raise _Refused(f"near-duplicate of {what} {other_id} ({found.reason}): \"{text}\"")
            if plan.staged is not None and plan.scenario_id in claimed:
                raise _Refused(f"scenario {plan.scenario_id!r} is proposed by another group of this run; "
                               "give each new scenario its own id")
            proposal = _rule_files(plan, cites, ids, book, settings, today, change)
            for old in replaced:
                proposal.replaces.append(old.rule_id)
                if old.path is not None and old.rule_id not in archived:
                    proposal.files = proposal.files | refusals_mod.archived(book, old, proposal.id, today)
                    archived.add(old.rule_id)
        except _Refused as exc:
            report.refusals.append(Refusal(plan.group.key, str(exc), "refused", plan.group.ids))
            continue
        report.proposals.append(proposal)
        change = change | proposal.files
        if plan.staged is not None:
            claimed.add(plan.scenario_id)
        existing.append((proposal.id, "proposed", proposal.rule))
        covered.update({c: proposal.id for c in cites})
    if ids.changed:
        change = change | Change({rule_ids.MARKS_FILE: ids.marks()})
    return change


def _check_against_refused(plan: _RulePlan, replaced: list[refusals_mod.Refused]) -> None:
    """A re-proposal must differ from what the gate refused: another rule, or (after a regression) the same
    advice with a narrower scope."""
    for old in replaced:
        score = similarity(plan.rule, old.rule)
        if score < TWIN_THRESHOLD:
            continue
        if old.reason_kind == "regression" and refusals_mod.narrower(plan.task_types, plan.paths, old):
            continue
        need = ("narrow its task_types or paths" if old.reason_kind == "regression" else "propose a different rule")
        if old.reason_kind == "regression" and not old.scope_known:
            need = ("the gate did not record that rule's scope, so no scope is known to be narrower; "
                    "propose a different rule")
        raise _Refused(f"repeats {old.label()}, which the gate refused ({old.reason_kind}), "
                       f"with {score:.0%} of its content words and no narrower scope; {need}")


def _checked_cites(group: Group, cites: list[str], covered: dict[str, str], report: DistillReport) -> list[str]:
    kept: list[str] = []
    for cite in dict.fromkeys(c.strip() for c in cites):
        if cite in covered:
            reason = f"dropped cite {cite!r}: already cited by {covered[cite]}"
        elif cite not in group.ids:
            reason = f"dropped cite {cite!r}: not an incident of this group ({', '.join(group.ids)})"
        else:
            kept.append(cite)
            continue
        report.refusals.append(Refusal(group.key, reason, "dropped", [cite]))
    if not kept:
        raise _Refused("cites no incident of this group that is not already covered by a rule or spec change")
    return kept


def _rule_files(plan: _RulePlan, cites: list[str], ids: rule_ids.Allocator, book: Playbook, settings: Settings,
                today: date, pending: Change) -> Proposal:
    """The proposal, with its rule file and (for a new scenario) the scenario's files as its change."""
    scenarios_dir = settings.path("scenarios")
    target = scenarios_dir / plan.scenario_id
    replay = relative(target, settings.root)
    if plan.staged is not None and (target.exists() or book.tree.list(replay)):
        raise _Refused(f"scenario {plan.scenario_id!r} already exists in {scenarios_dir}/; "
                       'reuse it with {"existing": ...} or choose another id')
    tree = OverlayTree(book.tree, pending)
    while True:  # an id whose file exists (made outside the lock) is skipped, never clobbered
        rule_id = ids.next_rule()
        path = book.path_of("proposed", f"{rule_id}.yaml")
        if tree.read(path) is None:
            break
    data = {"id": rule_id, "rule": plan.rule, "cites": cites, "task_types": plan.task_types, "replay": replay,
            "created": today}
    if plan.paths:
        data["paths"] = plan.paths
    if plan.scope_reason:
        data["scope_reason"] = plan.scope_reason
    rule = Rule.model_validate(data)
    header = (f"# Proposed by `replaybook distill` from {len(plan.group.incidents)} incident(s) "
              f"({plan.group.key}); the gate decides.\n")
    answered = [r for r in plan.refused if set(r.cites) & set(cites)]
    if answered:
        header += "".join(f"# Re-proposed after the gate refused {r.label()} ({r.reason_kind}).\n" for r in answered)
    first, rest = yamlfile.dump(rule.to_yaml_data(), kind="rule").split("\n", 1)
    files = {path: f"{first}\n{header}{rest}"}
    if plan.staged is not None:
        for file in sorted(p for p in plan.staged.rglob("*") if p.is_file()):
            files[f"{replay}/{file.relative_to(plan.staged).as_posix()}"] = file.read_bytes().decode("utf-8")
    return Proposal(rule_id, plan.group.key, rule.rule, cites, bool(rule.provisional), plan.scenario_id,
                    plan.staged is not None, str(settings.root / path), files=Change(files))


def _allocator(book: Playbook, root: Path, reserved: Iterable[str] = ()) -> rule_ids.Allocator:
    """Rule and spec ids above every one in any state, every reserved one and every one handed out before."""
    specs = [spec_change.highest_number(book.folder)]
    return rule_ids.Allocator([e.rule.id for e in book.entries()], specs, reserved=reserved,
                              marks=rule_ids.read_marks(root))


def _covered(book: Playbook, entries=None) -> dict[str, str]:
    """Incident id -> the admitted/pending rule or spec change that already cites it."""
    out: dict[str, str] = {}
    for entry in entries if entries is not None else book.entries(("proposed", "rules")):
        for cite in entry.rule.cites:
            out.setdefault(cite, f"{entry.rule.id} ({'admitted' if entry.state == 'rules' else 'pending'})")
    for cite, label in spec_change.cited(book.folder).items():
        out.setdefault(cite, label)
    return out


# -- the prompt -----------------------------------------------------------------------------------


def _prompt_vars(group: Group, book: Playbook, scenarios_dir: Path,
                 refused: Iterable[refusals_mod.Refused] = ()) -> dict[str, Any]:
    incidents = []
    for i in group.incidents:
        data = {k: v for k, v in i.model_dump(mode="json", exclude_none=True).items()
                if k in ("id", "task", "task_type", "failure_class", "trigger", "believed", "actual", "cost_minutes")}
        if i.evidence:
            data["evidence"] = i.evidence[:EVIDENCE_IN_PROMPT]
        incidents.append(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100).strip())
    scenarios, scenario_ids = [], []
    for folder in sorted(p for p in scenarios_dir.iterdir() if p.is_dir()) if scenarios_dir.is_dir() else []:
        try:
            s = scenario_mod.load(folder).scenario
        except BadInput:
            continue  # a broken scenario cannot be reused
        scenarios.append(f"- {s.id}: {s.task}" + (f" (task_type: {s.task_type})" if s.task_type else ""))
        scenario_ids.append(s.id)
    refused = list(refused)
    shown = {r.rule_id for r in refused}
    rules = [f"- {e.rule.id} ({'admitted' if e.state == 'rules' else 'pending'}): {e.rule.rule}"
             for e in book.entries(("proposed", "rules")) if e.rule.id not in shown]
    task_types = sorted({i.task_type for i in group.incidents if getattr(i, "task_type", None)})
    return {
        "group_key": group.key,
        "failure_class": group.failure_class,
        "incident_ids": group.ids,
        "incidents": incidents,
        "scenarios": "\n".join(scenarios) or "(none)",
        "rules": "\n".join(rules) or "(none)",
        "checks": ", ".join(scenario_mod.CHECKS),
        "refused": [refusals_mod.prompt_text(r) for r in refused],
        "refused_hints": list(dict.fromkeys(refusals_mod.hint(r.reason_kind) for r in refused)),
        "incident_task_types": task_types,
        "scenario_ids": scenario_ids,  # for the answer's grammar (answers.answer_schema), not the prompt
    }
