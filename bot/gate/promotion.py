"""Promotion: a rule admitted in at least two member repositories is proposed for the org tier.

Twins across members (the same rule worded a little differently, by the gate's twin measure) are one
proposal; a rule already in the org tier, in any state, or a twin of one, is not proposed again. The
proposal is an org rule file (``replays``: each member's own scenario for it; ``cites``: each member's
incidents, named ``member/incident-id``) with its evidence, the members' own gate results from their
ledgers. Nothing is written here: the plan is a :class:`~bot.change.Change` for either sink, the org
repository's ``playbook/proposed/`` locally, or one PR on the org repository on GitHub.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from bot import config as config_mod
from bot._util import yamlfile
from bot._util.text_safety import neutralise
from bot.change import Change
from bot.gate import ledger
from bot.model import meaning
from bot.playbook import rule_ids
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook


@dataclass
class Held:
    """One member's admitted rule, and what its gate said."""

    member: str
    rule: Rule
    evidence: str  # e.g. "admit, 14 replays, $0.0000 (2026-08-03)"; "no gate record" when its ledger has none


@dataclass
class Proposal:
    rule: Rule
    held: list[Held]

    @property
    def members(self) -> list[str]:
        return [h.member for h in self.held]


@dataclass
class Promotion:
    proposals: list[Proposal] = field(default_factory=list)
    change: Change = field(default_factory=Change)

    def markdown(self) -> str:
        if not self.proposals:
            return "No rule is admitted in enough members to propose for the org tier.\n"
        lines = [f"## Proposed for the org tier: {len(self.proposals)} rule(s)", ""]
        for p in self.proposals:
            lines += [f"### `{p.rule.id}`: admitted in {', '.join(p.members)}", "", f"> {neutralise(p.rule.rule)}", "",
                      "| member | its rule | scenario | its gate |", "|---|---|---|---|"]
            lines += [f"| {h.member} | `{h.rule.id}` | `{h.rule.replay}` | {h.evidence} |" for h in p.held]
            lines += ["", f"Next: `replaybook org gate playbook/proposed/{p.rule.id}.yaml` proves it in every member.",
                      ""]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"proposals": [{"rule": p.rule.to_yaml_data(), "members": [
            {"member": h.member, "rule": h.rule.id, "scenario": h.rule.replay, "evidence": h.evidence}
            for h in p.held]} for p in self.proposals], "paths": sorted(self.change.files)}


def _twin(a: str, b: str) -> bool:
    return meaning.relate(a, b).kind == "twin"


def plan(org: Playbook, members: dict[str, Path], min_members: int, today: date) -> Promotion:
    """The proposals for the org tier from each member's admitted rules (``members``: name -> checkout)."""
    held: list[Held] = []
    for name, root in sorted(members.items()):
        settings = config_mod.load(root)
        book = Playbook(settings.path("playbook"), root=root, cap=settings.cap)
        last = {r.rule_id: r for r in ledger.read(root)[0]}
        for rule in book.admitted():
            record = last.get(rule.id)
            evidence = (f"{record.decision}, {record.replays} replays, ${record.cost_usd:.4f} ({record.at.date()})"
                        if record else "no gate record")
            held.append(Held(name, rule, evidence))
    known = [e.rule for e in org.entries()]
    groups: list[list[Held]] = []
    for h in held:
        if any(_twin(h.rule.rule, k.rule) for k in known):
            continue  # already in the org tier, in some state
        group = next((g for g in groups if _twin(h.rule.rule, g[0].rule.rule)
                      and h.member not in {x.member for x in g}), None)
        if group is None:
            groups.append([h])
        else:
            group.append(h)
    result = Promotion()
    used = [e.rule.id for e in org.entries()]
    files: dict[str, str | None] = {}
    for group in groups:
        if len({h.member for h in group}) < min_members:
            continue
        first = min(group, key=lambda h: (h.rule.created, h.member))
        rule_id = rule_ids.next_free(used)
        used.append(rule_id)
        rule = Rule(id=rule_id, rule=first.rule.rule, task_types=first.rule.task_types, paths=first.rule.paths,
                    cites=[f"{h.member}/{c}" for h in group for c in h.rule.cites],
                    replays={h.member: h.rule.replay for h in group if h.rule.replay}, created=today)
        result.proposals.append(Proposal(rule, group))
        files[org.path_of("proposed", f"{rule_id}.yaml")] = yamlfile.dump(rule.to_yaml_data(), kind="rule")
    result.change = Change(files)
    return result
