"""A rule proven per agent: ``gate --agent A --agent B``.

The gate runs once per agent, each with its own replays, cache keys and
budget share. The rule is admitted when at least one agent proves it; when
only some do, the rule records them in ``agents:`` before admission, so it is
rendered only into those agents' files (bot/playbook/render), and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from bot._util import markdown
from bot._util.text_safety import neutralise
from bot.gate import decision as gate_mod
from bot.gate import efficiency as efficiency_mod
from bot.gate import report as gate_report
from bot.gate import task_types as task_types_mod
from bot.gate.decision import GateOptions, GateResult
from bot.gate.stats import SequentialTest
from bot.playbook.render.hosts import HOSTS
from bot.playbook.store import Playbook


@dataclass
class PerAgent:
    rule_id: str
    rule_text: str
    results: dict[str, GateResult] = field(default_factory=dict)

    @property
    def proven_on(self) -> list[str]:
        return [a for a, r in self.results.items() if r.decision == "admit"]

    @property
    def decision(self) -> str:
        if self.proven_on:
            return "admit"
        decisions = {r.decision for r in self.results.values()}
        return "error" if "error" in decisions else "inconclusive" if "inconclusive" in decisions else "reject"

    @property
    def partial(self) -> bool:
        return bool(self.proven_on) and len(self.proven_on) < len(self.results)

    @property
    def reason(self) -> str:
        if not self.proven_on:
            return "proven on no agent: " + "; ".join(f"{a}: {r.reason}" for a, r in self.results.items())
        if self.partial:
            return f"proven on {', '.join(self.proven_on)} only; rendered only into their files"
        return f"proven on every agent listed ({', '.join(self.proven_on)})"


def run(book: Playbook, rule_path: Path, suite_dir: Path, opts: GateOptions, agents: list[str],
        progress: Callable[[str], None] | None = None) -> PerAgent:
    """The gate once per agent, in order; the budget is shared by all of them."""
    out: PerAgent | None = None
    spent = 0.0
    for agent in agents:
        budget = None if opts.max_cost_usd is None else max(0.0, opts.max_cost_usd - spent)
        one = replace(opts, replay=replace(opts.replay, agent=agent), max_cost_usd=budget)
        result = gate_mod.run_gate(book, rule_path, suite_dir, one,
                                   None if progress is None else (lambda m, a=agent: progress(f"[{a}] {m}")))
        spent += result.cost_usd
        out = out or PerAgent(result.rule_id, result.rule_text)
        out.results[agent] = result
    assert out is not None
    return out


def agents_to_record(result: PerAgent) -> list[str] | None:
    """The ``agents:`` an admission records: the agents proven on, when only some were (else None: every agent)."""
    return list(result.proven_on) if result.partial else None


def _hosts_of(agents: list[str]) -> str:
    return ", ".join(sorted({h.main for h in HOSTS.values() if set(h.agents) & set(agents)})) or "none"


def markdown_report(result: PerAgent, test: SequentialTest) -> str:
    agents = list(result.results)
    r = result.results

    def side(s) -> str:
        return "–" if s is None else f"{s.passes}/{s.n}" + (f" (+{s.unscored} unscored)" if s.unscored else "")

    rows = [
        ["decision", *[r[a].decision for a in agents]],
        ["without the rule (passed/scored)", *[side(r[a].before) for a in agents]],
        ["with the rule (passed/scored)", *[side(r[a].after) for a in agents]],
        ["suite regressions", *[", ".join(e.scenario for e in r[a].regressions) or "none" for a in agents]],
        ["task types dropping", *[", ".join(t.task_type for t in task_types_mod.dropping(task_types_mod.breakdown(r[a])))
                                  or "none" for a in agents]],
        ["efficiency (reported, not decided on)", *[efficiency_mod.of(r[a]).verdict or "–" for a in agents]],
        ["replays", *[str(r[a].replays) for a in agents]],
        ["cost (USD)" + (" — simulated estimate" if any(x.simulated for x in r.values()) else
                         f" — {next(x.model_label for x in r.values() if x.model_label)}, $0"
                         if any(x.model_label for x in r.values()) else ""),
         *[f"{r[a].cost_usd:.4f}" for a in agents]],
        ["reason", *[neutralise(r[a].reason) for a in agents]],
    ]
    lines = [f"## Replaybook gate: {result.rule_id}, per agent: **{result.decision}**", "",
             f"> {neutralise(result.rule_text)}", "",
             markdown.table(["", *agents], rows, width=200), "",
             f"**{neutralise(result.reason)}.**"]
    if result.proven_on:
        lines.append(f"Rendered into: {_hosts_of(result.proven_on)}.")
    if result.partial:
        missing = [a for a in agents if a not in result.proven_on]
        lines.append(f"Not proven on {', '.join(missing)}: the rule records `agents: [{', '.join(result.proven_on)}]` "
                     f"and is not rendered into their files ({_hosts_of(missing)} unless another proven agent reads it).")
    lines += ["", "<details><summary>Each agent's full report</summary>", ""]
    for agent in agents:
        lines += [f"### {agent}", "", gate_report.markdown(r[agent], test)]
    lines += ["</details>", ""]
    return "\n".join(lines)


def as_json(result: PerAgent) -> dict[str, Any]:
    return {"rule": result.rule_id, "decision": result.decision, "reason": result.reason,
            "proven_on": result.proven_on, "partial": result.partial,
            "agents": {a: gate_report.as_json(r) for a, r in result.results.items()}}
