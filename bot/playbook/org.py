"""The organisation's tier: rules proven across member repositories, rendered before each member's own.

An org repository holds its tier in the same formats as any playbook (``playbook/rules/*.yaml``);
an org rule also names, per member, the scenario that proves it there (``replays``). A member points
at the tier in its ``.replaybook.yml`` (``org: {path: …}`` or ``org: {repo: OWNER/NAME, ref: SHA}``)
and may decline an org rule by id, with a reason.

In a member, the tier is rendered into the same text agents read (PLAYBOOK.md, every host section and
the gate's system prompt), in its own marked block before the repository's rules, and never past its
byte budget: by default a quarter of the smallest limit among the member's render targets, so a
bloated org tier can never push a repository's own rules out of a host's window (Codex cuts its
AGENTS.md chain at 32 KiB, root first). Rules that do not fit are left out, oldest kept, and named by
``playbook check``. Org rules are cited as ``[org/rule-NNNN]``, so they never collide with a member's
``[rule-NNNN]`` hits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import BadInput
from bot.playbook.rule import Rule

ORG_START = "<!-- replaybook:org:start (the organisation's tier; edit it in the org repository) -->"
ORG_END = "<!-- replaybook:org:end -->"
CITE_PREFIX = "org/"
DEFAULT_CAP = 15
#: with no render target, the tier's budget is a quarter of Codex's AGENTS.md budget (limits.CODEX_MAX_BYTES)
FALLBACK_LIMIT = 32 * 1024


@dataclass
class OrgTier:
    """The org rules a member reads: the tier's admitted rules, its declines, and the byte budget."""

    source: str  # where it comes from, e.g. acme/playbook@1a2b3c4 or ../org
    rules: list[Rule] = field(default_factory=list)
    declined: dict[str, str] = field(default_factory=dict)  # rule id -> the member's reason
    budget_bytes: int = FALLBACK_LIMIT // 4

    def applied(self, candidate: Rule | None = None) -> list[Rule]:
        """The rules the member takes (declines removed), with ``candidate`` in place of its id when given."""
        rules = [r for r in self.rules if r.id not in self.declined and (candidate is None or r.id != candidate.id)]
        return sorted(rules + ([candidate] if candidate is not None else []), key=lambda r: r.id)

    def with_candidate(self, candidate: Rule) -> "OrgTier":
        """The same tier with ``candidate`` admitted (what the org gate's with-rule arm reads)."""
        others = [r for r in self.rules if r.id != candidate.id]
        return OrgTier(self.source, others + [candidate], dict(self.declined), self.budget_bytes)

    def fitted(self, candidate: Rule | None = None) -> tuple[list[Rule], list[Rule]]:
        """(the rules that fit the budget, in id order; those left out past it)."""
        kept: list[Rule] = []
        left: list[Rule] = []
        for rule in self.applied(candidate):
            if left or len(block([*kept, rule], self.source).encode("utf-8")) > self.budget_bytes:
                left.append(rule)
            else:
                kept.append(rule)
        return kept, left

    def text(self) -> str:
        """The marked org block, empty when the member takes no org rule."""
        kept, _ = self.fitted()
        return block(kept, self.source) if kept else ""

    def problems(self) -> list[str]:
        """What ``playbook check`` fails on: a decline of an id the tier does not hold."""
        known = {r.id for r in self.rules}
        return [f".replaybook.yml: field `org.decline.{rule_id}`: the org tier {self.source} has no {rule_id}; "
                "remove the decline" for rule_id in sorted(set(self.declined) - known)]

    def warnings(self) -> list[str]:
        """What ``playbook check`` warns of: org rules left out past the budget (agents here never read them)."""
        _, left = self.fitted()
        if not left:
            return []
        return [f"org tier {self.source}: {', '.join(r.id for r in left)} left out, past the org budget of "
                f"{self.budget_bytes} bytes; the org retires rules, or this repository raises `org.budget_bytes`"]


def block(rules: list[Rule], source: str) -> str:
    """The org rules as agents read them, between their markers."""
    lines = [ORG_START, f"## Organisation rules ({source})", "",
             f"{len(rules)} rule{'' if len(rules) == 1 else 's'} every repository of the organisation follows, proven "
             f"in each member. Cite one you apply as [{CITE_PREFIX}{rules[0].id if rules else 'rule-0001'}].", ""]
    for r in sorted(rules, key=lambda r: r.id):
        scope = f" _(task types: {', '.join(r.task_types)})_" if r.task_types else ""
        lines.append(f"- [{CITE_PREFIX}{r.id}] {r.rule}{scope}")
    return "\n".join(lines + [ORG_END])


def splice(text: str, org: str) -> str:
    """``text`` (a rendered playbook: its heading line first) with the org block right after its heading."""
    if not org:
        return text
    head, sep, rest = text.partition("\n\n")
    return head + "\n\n" + org + "\n\n" + rest if sep else text + "\n\n" + org + "\n"


def budget_for(targets: list[str]) -> int:
    """A quarter of the smallest limit among the hosts of ``targets`` (render specs such as ``claude``)."""
    from bot.playbook.render import limits  # the render package reads the store, which reads this module

    hosts = {spec.split(":", 1)[0] for spec in targets}
    sizes = [n for lim in limits.LIMITS if lim.host in hosts or lim.host.split("-")[0] in hosts
             for n in (lim.chars, lim.bytes) if n]
    if "agents" in hosts or not sizes:
        sizes.append(FALLBACK_LIMIT)
    return min(sizes) // 4


def load_rules(folder: Path, source: str) -> list[Rule]:
    """The admitted rules of the org tier checked out at ``folder`` (its ``playbook/rules/``)."""
    from bot.playbook.store import Playbook  # the store reads the folder; this module only shapes the tier

    folder = Path(folder)
    if not (folder / "playbook").is_dir():
        raise BadInput(f"{folder}: the org tier {source} is not there (no playbook/ folder); check out the org "
                       "repository at the pinned ref (docs/org.md), or fix `org.path` in .replaybook.yml")
    return Playbook(folder / "playbook", root=folder).admitted()
