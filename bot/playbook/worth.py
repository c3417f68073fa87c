"""Playbook health: repeats, ignored rules, and what a rule is worth.

Pure functions of incidents and rules (no files, no clock): the report, the
dashboard and the retirement order all read them, so each definition lives
here once (docs/playbook.md states them for people).

- An incident is a *repeat* when it is the same mistake as an earlier one:
  its ``repeat_of`` names the rule that covers it or the earlier incidents
  (set by capture, distill or a person; ``[]`` is a person's "no repeat"),
  or, with nothing recorded, a rule admitted before the incident cites it.
- A rule is *ignored* when it has ``ignored_after`` (default 2) or more
  repeats on or after the day it was admitted.
- Its *score* joins the cost of the mistakes it stands for with how recently
  the agent cited it (see ``worth``); past the cap the lowest score retires,
  provisional rules first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Iterable, Literal

from bot.incident.store import Incident
from bot.playbook.rule import Rule

Compliance = Literal["obeyed", "repeated", "ignored"]
DEFAULT_IGNORED_AFTER = 2
DEFAULT_HALF_LIFE_DAYS = 30


def repeat_link(incident: Incident, rules: Iterable[Rule] = ()) -> str | list[str] | None:
    """What ``incident`` repeats: a rule id, earlier incident ids, or None (no repeat).

    A recorded ``repeat_of`` wins (``[]`` means a person said no); otherwise
    the oldest rule created before the incident's day that cites it.
    """
    if incident.repeat_of is not None:
        return incident.repeat_of or None
    day = incident.created.date()
    for rule in sorted(rules, key=lambda r: (r.created, r.id)):
        if incident.id in rule.cites and rule.created < day:
            return rule.id
    return None


def is_repeat(incident: Incident, rules: Iterable[Rule] = ()) -> bool:
    return repeat_link(incident, rules) is not None


def repeats_of(rule: Rule, incidents: Iterable[Incident], rules: Iterable[Rule] = ()) -> list[Incident]:
    """The incidents that repeat ``rule``'s mistake on or after the day it was admitted."""
    rules = list(rules)
    return [i for i in incidents if i.created.date() >= rule.created and repeat_link(i, rules) == rule.id]


def compliance(repeats: int, ignored_after: int = DEFAULT_IGNORED_AFTER) -> Compliance:
    if repeats >= ignored_after:
        return "ignored"
    return "repeated" if repeats else "obeyed"


@dataclass(frozen=True)
class Worth:
    """What a rule is worth today; ``score`` orders retirement (lowest first)."""

    cited_minutes: int  # cost of the incidents it cites (the mistake it stands for)
    prevented_minutes: int  # hits times the mean cost of a cited incident
    recency: float  # 1.0 when cited today, halving every half-life
    score: float


def worth(rule: Rule, incidents: dict[str, Incident], today: date,
          half_life_days: int = DEFAULT_HALF_LIFE_DAYS) -> Worth:
    """``score = (1 + cited + prevented) * 0.5 ** (days since last cited / half-life)``.

    ``cited`` is the sum of ``cost_minutes`` of the incidents the rule cites
    that are known; ``prevented`` is its hits times their mean cost (each hit
    is a run that applied the rule instead of repeating the mistake). A rule
    never cited counts from the day it was created.
    """
    known = [incidents[c] for c in rule.cites if c in incidents]
    cited = sum(i.cost_minutes for i in known)
    prevented = round((rule.hits or 0) * cited / len(known)) if known else 0
    age = max(0, (today - (rule.last_hit or rule.created)).days)
    recency = 0.5 ** (age / half_life_days)
    return Worth(cited, prevented, round(recency, 4), round((1 + cited + prevented) * recency, 2))


def retirement_key(rule: Rule, value: Worth) -> tuple:
    """Sort key, first to retire first: provisional, then lowest score, then the coldest (``Rule.heat``)."""
    return (not rule.provisional, value.score, *rule.heat()[1:])


def retirement_order(rules: Iterable[Rule], incidents: Iterable[Incident], today: date,
                     half_life_days: int = DEFAULT_HALF_LIFE_DAYS) -> list[Rule]:
    by_id = {i.id: i for i in incidents}
    return sorted(rules, key=lambda r: retirement_key(r, worth(r, by_id, today, half_life_days)))


@dataclass
class RuleHealth:
    id: str
    provisional: bool
    hits: int
    last_hit: date | None
    repeats: list[str]
    compliance: Compliance
    worth: Worth


def rule_health(rules: list[Rule], incidents: list[Incident], today: date, *,
                ignored_after: int = DEFAULT_IGNORED_AFTER,
                half_life_days: int = DEFAULT_HALF_LIFE_DAYS, every: Iterable[Rule] | None = None) -> list[RuleHealth]:
    """Each rule's hits, repeats, compliance and worth. ``every`` (default ``rules``) are all the rules
    known, archived ones too, which derive repeat links."""
    known = list(every) if every is not None else rules
    by_id = {i.id: i for i in incidents}
    out = []
    for rule in rules:
        repeats = [i.id for i in repeats_of(rule, incidents, known)]
        out.append(RuleHealth(rule.id, bool(rule.provisional), rule.hits or 0, rule.last_hit, repeats,
                              compliance(len(repeats), ignored_after), worth(rule, by_id, today, half_life_days)))
    return out


@dataclass
class Week:
    week: str  # ISO week, e.g. 2026-W29
    incidents: int = 0
    repeats: int = 0
    ids: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.repeats / self.incidents if self.incidents else 0.0


def weekly_repeat_share(incidents: Iterable[Incident], rules: Iterable[Rule] = ()) -> list[Week]:
    """Incidents and repeats per ISO week, oldest first (weeks with no incident are left out)."""
    rules = list(rules)
    weeks: dict[str, Week] = {}
    for incident in incidents:
        year, number, _ = incident.created.isocalendar()
        week = weeks.setdefault(f"{year}-W{number:02d}", Week(f"{year}-W{number:02d}"))
        week.incidents += 1
        if is_repeat(incident, rules):
            week.repeats += 1
            week.ids.append(incident.id)
    return [weeks[k] for k in sorted(weeks)]


def group_links(group: list[Incident]) -> dict[str, list[str]]:
    """For incidents distill grouped as one mistake: each later one repeats the earlier ones.

    Only incidents with nothing recorded get a link; a person's ``[]`` and an
    earlier link stay as they are.
    """
    ordered = sorted(group, key=lambda i: (i.created, i.id))
    return {i.id: [e.id for e in ordered[:n]] for n, i in enumerate(ordered) if n and i.repeat_of is None}
