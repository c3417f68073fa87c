"""``replaybook report``: the playbook's health as one typed record, rendered as markdown or JSON.

Built from the files (incidents, playbook folders), the gate ledger
(``bot.gate.ledger``; on GitHub, the records the caller collected from the gate
comments, ``bot.github.ledger``) and, on GitHub, the open rule PRs the caller passes in.
Every text that came from outside (incident tasks and triggers, PR titles)
is neutralised before it reaches the markdown, which the dashboard posts.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from pydantic import BaseModel, Field

from bot._util.markdown import table
from bot._util.text_safety import neutralise
from bot.gate import ledger as gate_log
from bot.incident.store import Incident
from bot.playbook import worth as health
from bot.playbook.store import Playbook

CHART_WEEKS = 12


class WeekRow(BaseModel):
    week: str
    incidents: int
    repeats: int
    share: float


class RuleRow(BaseModel):
    id: str
    state: str
    provisional: bool
    hits: int
    last_hit: date | None
    repeats: list[str]
    compliance: health.Compliance
    score: float
    cited_minutes: int
    prevented_minutes: int


class TriageRow(BaseModel):
    id: str
    task: str
    trigger: str


class PrRow(BaseModel):
    number: int
    rule_id: str
    title: str
    gate: str  # the gate's commit status on its head: success | failure | pending | error | none
    url: str | None = None


class Gates(BaseModel):
    gates: int = 0
    admitted: int = 0
    rejected: dict[str, int] = Field(default_factory=dict)  # reason kind -> count (errors included)
    cost_usd: float = 0.0
    cost_per_admission_usd: float | None = None
    simulated: bool = False  # some of the cost is the simulated model's estimate
    unreadable: int = 0


class OrgRow(BaseModel):
    """One rule of the organisation's tier as this repository takes it."""

    id: str
    state: str  # rendered | declined | left out (past the org budget)
    reason: str = ""


class Report(BaseModel):
    generated: date
    incidents: int
    repeats: int
    repeat_share: float
    weeks: list[WeekRow]
    proposed: int  # rule files waiting in playbook/proposed/
    admitted: int
    retired: int
    cap: int
    gates: Gates
    rules: list[RuleRow]
    triage: list[TriageRow]
    open_prs: list[PrRow] | None = None  # None: not on GitHub
    org: str | None = None  # the org tier this repository takes, if any
    org_rules: list[OrgRow] = Field(default_factory=list)
    unreadable: list[str] = Field(default_factory=list)


def gates_summary(records: list[gate_log.GateRecord], unreadable: int = 0) -> Gates:
    """Every gate's cost, rejected candidates included, over the number of rules the gate admitted: a rule
    gated and then gated with ``--admit`` (two admit decisions) is one admission (ids are never reused)."""
    out = Gates(gates=len(records), unreadable=unreadable)
    admitted: set[str] = set()
    for record in records:
        out.cost_usd += record.cost_usd
        out.simulated |= record.simulated
        if record.decision == "admit":
            admitted.add(record.rule_id)
        else:
            out.rejected[record.reason_kind] = out.rejected.get(record.reason_kind, 0) + 1
    out.admitted = len(admitted)
    out.cost_usd = round(out.cost_usd, 4)
    out.cost_per_admission_usd = round(out.cost_usd / out.admitted, 4) if out.admitted else None
    return out


def build(book: Playbook, today: date, *, incidents: list[Incident] | None = None, ignored_after: int = 2,
          ledger_root: Path | None = None, open_prs: list[PrRow] | None = None,
          gate_records: tuple[list[gate_log.GateRecord], int] | None = None) -> Report:
    """The report of ``book`` on ``today``; ``incidents`` default to the book's store.

    ``gate_records`` (records, unreadable) replace the local ledger: on GitHub they come from the gate
    comments (``bot.github.ledger``)."""
    problems: list[str] = []
    if incidents is None:
        reading = book.incidents.read() if book.incidents else None
        incidents = reading.incidents if reading else []
        problems = reading.problems if reading else []
    entries = book.entries(skip_bad_candidates=True)  # a broken candidate is left out (``book.skipped``)
    every = [e.rule for e in entries]
    admitted = [e for e in entries if e.state == "rules"]
    rows = health.rule_health([e.rule for e in admitted], incidents, today, ignored_after=ignored_after,
                              half_life_days=book.half_life_days, every=every)
    weeks = health.weekly_repeat_share(incidents, every)
    repeats = sum(w.repeats for w in weeks)
    records, skipped = gate_records if gate_records is not None else gate_log.read(ledger_root or book.root)
    return Report(
        generated=today, incidents=len(incidents), repeats=repeats,
        repeat_share=round(repeats / len(incidents), 4) if incidents else 0.0,
        weeks=[WeekRow(week=w.week, incidents=w.incidents, repeats=w.repeats, share=round(w.share, 4)) for w in weeks],
        proposed=sum(e.state == "proposed" for e in entries), admitted=len(admitted),
        retired=sum(e.state == "archive" for e in entries), cap=book.cap,
        gates=gates_summary(records, skipped),
        rules=[RuleRow(id=h.id, state="rules", provisional=h.provisional, hits=h.hits, last_hit=h.last_hit,
                       repeats=h.repeats, compliance=h.compliance, score=h.worth.score,
                       cited_minutes=h.worth.cited_minutes, prevented_minutes=h.worth.prevented_minutes)
               for h in rows],
        triage=[TriageRow(id=i.id, task=i.task, trigger=i.trigger) for i in incidents if i.triage],
        open_prs=open_prs, unreadable=problems,
        org=book.org.source if book.org is not None else None, org_rules=_org_rows(book),
    )


def _org_rows(book: Playbook) -> list[OrgRow]:
    if book.org is None:
        return []
    kept, left = book.org.fitted()
    rows = [OrgRow(id=r.id, state="rendered") for r in kept]
    rows += [OrgRow(id=r.id, state="left out", reason=f"past the org budget of {book.org.budget_bytes} bytes")
             for r in left]
    rows += [OrgRow(id=rule_id, state="declined", reason=why) for rule_id, why in sorted(book.org.declined.items())]
    return sorted(rows, key=lambda r: r.id)


def mermaid_share(weeks: list[WeekRow]) -> str:
    """The repeat share per week (the last ``CHART_WEEKS``) as a mermaid bar chart, in percent."""
    shown = weeks[-CHART_WEEKS:]
    labels = ", ".join(f'"{w.week}"' for w in shown)
    values = ", ".join(f"{round(100 * w.share)}" for w in shown)
    return ("```mermaid\nxychart-beta\n    title \"Repeat failures, % of the week's incidents\"\n"
            f"    x-axis [{labels}]\n    y-axis \"repeats %\" 0 --> 100\n    bar [{values}]\n```")


def markdown(report: Report, *, heading: str = "# Playbook health") -> str:
    g = report.gates
    cost = f"${g.cost_usd:.2f}" + (" (includes simulated estimates)" if g.simulated else "")
    per = f"${g.cost_per_admission_usd:.2f}" if g.cost_per_admission_usd is not None else "– (no admission yet)"
    out = [heading, "", f"_{report.generated.isoformat()}_", "",
           f"**{report.repeats} of {report.incidents} incidents are repeats** "
           f"({report.repeat_share:.0%}): the same mistake as an earlier incident or an admitted rule.", ""]
    if report.weeks:
        out += ["## Repeat share per week", "", mermaid_share(report.weeks), "",
                table(["week", "incidents", "repeats", "share"],
                      [(w.week, w.incidents, w.repeats, f"{w.share:.0%}") for w in report.weeks[-CHART_WEEKS:]]), ""]
    rejected = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in sorted(g.rejected.items())) or "none"
    out += ["## Rules", "",
            table(["incidents", "proposed (waiting)", "gated", "admitted by the gate", "rejected", "admitted now",
                   "retired", "cap"],
                  [(report.incidents, report.proposed, g.gates, g.admitted, sum(g.rejected.values()),
                    report.admitted, report.retired, report.cap)]), "",
            f"Rejected by reason: {rejected}.", "",
            f"Cost per admission: **{per}** (every gate's measured cost, rejected candidates included: {cost}, "
            f"over {g.admitted} admission(s)).", ""]
    if g.unreadable:
        out += [f"{g.unreadable} line(s) or block(s) of the gate ledger could not be read and were left out.", ""]
    if report.rules:
        out += ["## Admitted rules", "",
                table(["rule", "hits", "last hit", "repeats", "compliance", "score", "cost prevented (min)"],
                      [(r.id + (" (provisional)" if r.provisional else ""), r.hits, r.last_hit or "never",
                        len(r.repeats), r.compliance + (f": {', '.join(r.repeats)}" if r.repeats else ""),
                        f"{r.score:g}", r.prevented_minutes) for r in report.rules]), ""]
    if report.org is not None:
        out += [f"## Organisation tier ({neutralise(report.org)})", ""]
        out += ([table(["org rule", "here", "reason"], [(r.id, r.state, neutralise(r.reason)) for r in report.org_rules])]
                if report.org_rules else ["It holds no rule yet."]) + [""]
    out += ["## Triage queue", ""]
    out += ([table(["incident", "task", "trigger"],
                   [(t.id, neutralise(t.task), neutralise(t.trigger)) for t in report.triage], width=70)]
            if report.triage else ["Nothing waits for a person."]) + [""]
    if report.open_prs is not None:
        out += ["## Open rule PRs", ""]
        out += ([table(["PR", "rule", "gate", "title"],
                       [(f"#{p.number}", p.rule_id, p.gate, neutralise(p.title)) for p in report.open_prs])]
                if report.open_prs else ["None."]) + [""]
    if report.unreadable:
        out += [f"{len(report.unreadable)} incident file(s) could not be read and were left out.", ""]
    return "\n".join(out)
