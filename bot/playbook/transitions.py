"""Planners: every transition of the playbook, computed as a :class:`~bot.change.Change` that writes nothing.

Each planner reads a :class:`~bot.playbook.store.Playbook` (a checkout, or a commit
through its tree) and returns what the transition would write:

- :func:`admission`: the rule into ``rules/``, the coldest past the cap into
  ``archive/``, PLAYBOOK.md re-rendered, the cited local incidents resolved;
- :func:`retirement` and :func:`over_cap`: rules into ``archive/``, stamped;
- :func:`hits`: ``last_hit`` moved forward, never back;
- :func:`rendering` and :func:`sections`: PLAYBOOK.md and the marked sections
  of CLAUDE.md and the like, every byte outside the markers kept;
- :func:`maintenance`: what the push check can fix mechanically.

The local commands apply the value through the journal
(:meth:`~bot.playbook.store.Playbook.apply`); on GitHub the same value is one commit
of a PR. That is why a local ``gate --admit`` and a merged rule PR agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from bot._util import yamlfile
from bot.change import Change, OverlayTree
from bot.errors import BadInput
from bot.playbook import store as pb
from bot.playbook.rule import Rule

if TYPE_CHECKING:
    from bot.playbook.store import Admission, Entry, Playbook


@dataclass
class Retirement:
    change: Change
    retired: list[Rule]


@dataclass
class HitPlan:
    change: Change
    hit: list[str] = field(default_factory=list)
    not_admitted: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)  # rule, last hit before, last hit now, where


def admission(book: "Playbook", path: Path, text: str, *, on: date, source: str | None = None,
              rule_id: str | None = None, scenario_checked: bool = False,
              recheck: Callable[["Playbook", Rule], list[str]] | None = None,
              agents: list[str] | None = None) -> "Admission":
    """Admitting the rule file ``text`` (named ``path`` in messages), as ``rule_id`` when given.

    ``source`` is the change path of a proposal the admission moves out of
    ``proposed/``. ``recheck`` adds problems found against this playbook (the
    gate's twin check). ``agents`` records the agents a per-agent gate proved the rule on (rendered
    only into their files). Raises ``BadInput`` when the rule is not valid here.
    """
    if rule_id is not None:
        text = yamlfile.set_top_level(text, "id", rule_id)
    if agents:
        text = yamlfile.set_top_level(text, "agents", "[" + ", ".join(agents) + "]")
    candidate = book.vet(path, text, scenario_checked=scenario_checked)
    problems = recheck(book, candidate) if recheck else []
    if problems:
        raise BadInput(f"{path}: not admitted: the playbook changed while the gate ran", problems=problems)
    entries = book.entries(("rules",))
    target = pb.Entry(book.folder / "rules" / f"{candidate.id}.yaml", "rules", candidate)
    everyone = [*entries, target]
    cold = {r.id for r in book.coldest_over_cap([e.rule for e in everyone], on)}
    keep = [e for e in everyone if e.rule.id not in cold]
    retire = [e for e in everyone if e.rule.id in cold]
    writes = {book.change_path(target.path): text}
    resolved = _resolved_incidents(book, candidate)
    change = Change.of(writes, [source] if source else []) | _retired(book, retire, "cap", on, writes)
    change = change | rendering(book, [e.rule for e in keep]) | resolved
    return pb.Admission(candidate, [e.rule for e in retire], sorted(_ids_of(book, resolved)), candidate.id in cold,
                        change)


def retirement(book: "Playbook", rule_ids: list[str], *, reason: str, on: date) -> Retirement:
    """Moving the admitted rules ``rule_ids`` to the archive, PLAYBOOK.md re-rendered."""
    by_id = {e.rule.id: e for e in book.entries(("rules",))}
    missing = [r for r in rule_ids if r not in by_id]
    if missing:
        raise BadInput(f"{missing[0]} is not an admitted rule in {book.dir('rules')}/; see `replaybook playbook list`")
    retire = [by_id[r] for r in rule_ids]
    keep = [e for e in by_id.values() if e.rule.id not in rule_ids]
    change = _retired(book, retire, reason, on) | rendering(book, [e.rule for e in keep])
    return Retirement(change, [e.rule for e in retire])


def over_cap(book: "Playbook", on: date) -> Retirement:
    """Retiring the coldest rules until the cap holds; an empty change within it."""
    cold = [r.id for r in book.coldest_over_cap(on=on)]
    return retirement(book, cold, reason="cap", on=on) if cold else Retirement(Change(), [])


def hits(book: "Playbook", seen: Mapping[str, date], where: Mapping[str, str] | None = None) -> HitPlan:
    """``last_hit`` of each admitted rule in ``seen`` moved to its day, when that is later, and ``hits`` counted."""
    by_id = {e.rule.id: e for e in book.entries(("rules",))}
    plan = HitPlan(Change())
    files: dict[str, str] = {}
    for rule_id, day in sorted(seen.items()):
        entry = by_id.get(rule_id)
        if entry is None:
            plan.not_admitted.append(rule_id)
            continue
        plan.hit.append(rule_id)
        if entry.rule.last_hit is not None and entry.rule.last_hit >= day:
            continue
        text = yamlfile.set_top_level(book.text_of(entry), "hits", str((entry.rule.hits or 0) + 1))  # one a day
        text = yamlfile.set_top_level(text, "last_hit", day.isoformat())
        Rule.model_validate(yamlfile.parse(entry.path, text, what="rule").data)
        files[book.change_path(entry.path)] = text
        plan.rows.append([rule_id, str(entry.rule.last_hit or "never"), str(day), (where or {}).get(rule_id, "")])
    plan.change = Change(files)
    return plan


def rendering(book: "Playbook", rules: list[Rule] | None = None) -> Change:
    """PLAYBOOK.md rendered from ``rules`` (default: the admitted ones), when that differs."""
    text = book.render_text(rules)
    return Change() if book.tree.read(book.rendered_rel) == text else Change({book.rendered_rel: text})


def sections(book: "Playbook", files: list[Path], rules: list[Rule] | None = None) -> Change:
    """The marked playbook section of each file brought in sync; every byte outside the markers kept."""
    block = pb.section_block(book.render_text(rules, heading="## Replaybook playbook"))
    out: dict[str, str] = {}
    for file in files:
        old = book.read_bytes(file)
        new = pb.splice_section(old, block, Path(file))
        if new != old:
            try:
                out[book.change_path(Path(file))] = new.decode("utf-8")
            except UnicodeDecodeError:
                raise BadInput(f"{file}: is not UTF-8 text; the playbook section can only be kept in a UTF-8 file") from None
    return Change(out)


@dataclass
class Maintenance:
    change: Change
    fixed: list[str]
    left: list[str]  # problems still there once the change is merged


def maintenance(book: "Playbook", files: list[Path], on: date, render: list[str] = ()) -> Maintenance:
    """What the push check fixes mechanically: retire past the cap, re-render, sync sections and render targets.

    ``render`` is the config's ``render:`` list (:mod:`bot.playbook.render`); a target
    that would pass its host's limit is left for a person, with the reason.

    A broken rule file or a twin id makes nothing safe to rewrite: the change
    is empty and every problem is left for a person.
    """
    fixed: list[str] = []
    inside = [f for f in files if not book.change_path(Path(f)).startswith("..")]
    try:
        retired = over_cap(book, on)
        kept = [r for r in book.admitted() if r.id not in {x.id for x in retired.retired}]
        change = retired.change | rendering(book, kept) | sections(book, inside, kept)
    except BadInput:
        change = Change()
    else:
        if retired.retired:
            fixed.append("retires the coldest past the cap: " + ", ".join(r.id for r in retired.retired))
        if book.rendered_rel in change.files:
            fixed.append(f"re-renders {book.rendered_rel}")
        synced = [p for p in change if p not in (book.rendered_rel,) and not p.startswith(f"{book.rel}/")]
        if synced:
            fixed.append("syncs the playbook section of " + ", ".join(synced))
    after = pb.Playbook(book.rel, root=book.root, cap=book.cap, incidents=book.incidents,
                        tree=OverlayTree(book.tree, change), half_life_days=book.half_life_days, org=book.org)
    left: list[str] = []
    if render and change is not None:
        from bot.playbook.render.maintenance import rendered_fixes

        rendered, left = rendered_fixes(after, book.root, list(render), fixed)
        change = change | Change(rendered)
    return Maintenance(change, fixed, after.check(inside) + left)


def _retired(book: "Playbook", retire: list["Entry"], reason: str, on: date,
             pending: Mapping[str, str] | None = None) -> Change:
    """Each entry moved to ``archive/``, stamped ``retired`` and ``retired_reason``."""
    files: dict[str, str | None] = {}
    for entry in retire:
        rel = book.change_path(entry.path)
        target = book.path_of("archive", Path(rel).name)
        if book.tree.read(target) is not None:
            raise BadInput(f"{book.root / target} already exists; an archived rule is never overwritten")
        text = (pending or {}).get(rel) or book.text_of(entry)
        text = yamlfile.set_top_level(yamlfile.set_top_level(text, "retired", on.isoformat()), "retired_reason", reason)
        Rule.model_validate(yamlfile.parse(book.root / target, text, what="rule").data)
        files[target] = text
        files[rel] = None
    return Change(files)


def _resolved_incidents(book: "Playbook", rule: Rule) -> Change:
    """The cited incidents of the local store marked ``resolved_by: rule`` (the store plans it)."""
    if book.incidents is None:
        return Change()
    return book.incidents.resolution(rule.cites, "rule", root=book.root)


def _ids_of(book: "Playbook", resolved: Change) -> list[str]:
    if book.incidents is None:
        return []
    return [i for i in (book.incidents.id_at(book.root / p) for p in resolved) if i]
