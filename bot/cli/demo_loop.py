"""The demo: the whole local loop, end to end, on bundled material.

Capture turns the bundled CI logs and PR exports of the six seed failures
into incidents; distill proposes rules from the unresolved incidents; the
admit gate replays each proposal and admits what it proves, under a cap;
the admitted playbook and a summary table close the run.

Offline, every model answer comes from the SIMULATED model: capture and
distill from scripted answers written from the bundled material, the agent
under replay from each scenario's policy.yaml. With ANTHROPIC_API_KEY set,
the same run uses Claude for all three.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from bot import config
from bot import config as config_mod
from bot._util import bundled, records
from bot._util.markdown import table
from bot.config import replay_options
from bot.distill import plan as distill
from bot.gate import decision as gate
from bot.gate import ledger as gate_log
from bot.incident import capture
from bot.incident.store import Incident, IncidentStore
from bot.model.served import LOCAL, SCRIPTED
from bot.playbook import rule as rules_mod
from bot.playbook.store import Playbook
from bot.replay import ReplayOptions
from bot.replay.gateway.answers import AnswerBook
from bot.replay.gateway.server import Gateway
from bot.scenario import suite as suite_mod
from bot.settings import Environment

if TYPE_CHECKING:
    from bot.model.llm import LLM

Say = Callable[[str], None]
DEMO_CAP = 3  # below the four seed rules, so the demo shows a retirement
CAP_NOTE = (f"The cap is {DEMO_CAP} here, not the default 60, so that this short run shows what happens past it: "
            "admitting a rule over the cap retires the coldest one (provisional first, then the lowest score: "
            "the cost of the incidents it stands for, cooling with the time since it was last cited) "
            "to `playbook/archive/`.")
TRIALS_NOTE = ("How to read the counts: without the rule its scenario is replayed until a sequential test is sure "
               "the agent makes the mistake (3 failing runs; one pass rejects at once), with the rule until 4 runs "
               "pass (of at most 5); every other scenario is replayed once with the rule (`--trials 1`, to keep the "
               "demo short) and compared with its baseline. \"from cache\" counts replays reused, not rerun: the "
               "baselines (every scenario with the current playbook) are replayed once up front and shared by all "
               "the gates, as the cache shares them between rule PRs.")
SIMULATED = "the SIMULATED model (scripted answers written from the bundled material; not a real LLM)"
_SOURCE = re.compile(r"^Source: (\S+) \(([^)]+)\)")


@dataclass
class Models:
    """Who answers: the simulated model offline, Claude with a key."""

    capture: LLM
    distill: LLM
    replay: ReplayOptions
    simulated: bool


def build_workspace(workspace: Path) -> Path:
    """Copy the bundled scenarios into an empty repository at ``workspace``."""
    shutil.copytree(bundled.scenarios_dir(), workspace / "scenarios", ignore=shutil.ignore_patterns("__pycache__"))
    (workspace / ".replaybook.yml").write_text(f"# demo workspace\ncap: {DEMO_CAP}\n", encoding="utf-8")
    return workspace


def run(workspace: Path, say: Say, today: date, env: Environment | None = None,
        progress: Say = lambda _: None, model: str | None = None) -> Path:
    """The loop on ``workspace`` (an empty folder); return the playbook folder."""
    build_workspace(workspace)
    settings = config.load(workspace)
    store = IncidentStore(settings.path("incidents"))
    book = Playbook(settings.path("playbook"), root=workspace, cap=DEMO_CAP, incidents=store)
    logs = sorted((workspace / "scenarios").glob("*/logs/*.log"))
    with ExitStack() as stack:
        models = _models(stack, workspace, settings, logs, env or Environment(), model)
        say(f"Models: {describe(models)}.\n")
        captured = capture_logs(logs, store, models, say)
        report = distill_incidents(settings, models, say)
        rows = gate_proposals(book, workspace, report, models, today, say, progress)
    summary(book, store, captured, rows, say)
    return Outcome(book.folder, [r[0] for r in rows if r[1] == "admit"],
                   {r[0]: r[-1] for r in rows if r[1] != "admit"})


@dataclass
class Outcome:
    playbook: Path
    admitted: list[str]
    refused: dict[str, str]  # rule id -> why the gate did not admit it


def describe(models: Models) -> str:
    if models.simulated:
        return SIMULATED
    if models.replay.model_label:
        return f"{models.replay.model_label}, offline (cost: tokens and CPU time, $0)"
    return "Claude (ANTHROPIC_API_KEY is set)"


def _models(stack: ExitStack, workspace: Path, settings, logs: list[Path], env: Environment,
            model: str | None = None) -> Models:
    """``model`` ``local``: the local model answers everything; else Claude with a key, else the simulated model."""
    from bot.model.llm import (
        LLM,  # the anthropic SDK takes over a second to import: only when the demo runs
    )

    runs = workspace / ".replaybook" / "traces"
    if model == LOCAL:
        return Models(config_mod.llm(env, LOCAL), config_mod.llm(env, LOCAL, max_tokens=8192, timeout_s=600),
                      replay_options(settings, env, model=LOCAL, runs_dir=runs), simulated=False)
    if env.api_key and model != SCRIPTED:
        cfg = settings.config.models
        return Models(config_mod.llm(env, cfg.capture), config_mod.llm(env, cfg.distill, max_tokens=8192),
                      replay_options(settings, env, model=cfg.agent, runs_dir=runs), simulated=False)
    book = simulated_answers(logs)
    gateway = stack.enter_context(Gateway(book))
    llm = LLM.connect(SCRIPTED, api_key=gateway.token, base_url=gateway.url, simulated=True, max_retries=0)
    return Models(llm, llm, ReplayOptions(model=SCRIPTED, runs_dir=runs), simulated=True)


def simulated_answers(logs: list[Path]) -> AnswerBook:
    """The scripted answers: capture's from the bundled incidents, distill's from the bundled rules."""
    book = AnswerBook()
    for log in logs:  # capture asks once per log, in this order
        incident = _bundled_incident(log)
        answer = {k: getattr(incident, k) for k in ("task", "believed", "actual", "failure_class", "cost_minutes")}
        answer["repeat_of"] = incident.repeat_of if isinstance(incident.repeat_of, str) else None
        book.add("One failed run", json.dumps(answer), times=1)
    proposals = []
    for rule_file in sorted({log.parent.parent / "rule.yaml" for log in logs}):
        rule = rules_mod.load(rule_file, named_by_id=False)
        proposal = {"kind": "rule", "rule": rule.rule, "cites": rule.cites, "task_types": rule.task_types,
                    "scenario": {"existing": rule_file.parent.name}}
        proposals.append(proposal)
        _reproposal_answers(book, rule, proposal, rule_file.parent / "incidents")
    book.add("Distill rules", json.dumps({"proposals": proposals}))
    return book


def _reproposal_answers(book: AnswerBook, rule, proposal: dict, incidents: Path) -> None:
    """The SIMULATED distiller's answer to the gate refusing ``rule`` for a regression: the same rule, scoped to
    its incidents' task types, where they allow a narrower scope (as the loop benchmark's simulated distiller).
    Other verdicts get the first answer again, which distill refuses as a repeat: a script has no better rule."""
    from bot.distill import refusals

    cited = [incidents / f"{c}.yaml" for c in rule.cites]
    types = sorted({i.task_type for i in (records.load(Incident, p, what="incident") for p in cited if p.is_file())
                    if i.task_type})
    if not types or set(types) == set(rule.task_types):
        return
    match = refusals.key(rule.rule, rule.task_types, rule.paths, rule.cites, "regression")
    book.add(match, json.dumps({"proposals": [{**proposal, "task_types": types}]}))


def _bundled_incident(log: Path) -> Incident:
    return records.load(Incident, log.parent.parent / "incidents" / f"{log.stem}.yaml", what="incident")


def capture_logs(logs: list[Path], store: IncidentStore, models: Models, say: Say) -> list[capture.Captured]:
    say("## 1. Capture: CI logs and rejected PRs become incidents\n")
    out = []
    for log in logs:
        url, key = _source(log)
        evidence = capture.evidence_from_log(log, name=log.name)
        when = _bundled_incident(log).created  # the run's own time, so ids are the incidents' own
        out.append(capture.capture(evidence, store, models.capture, source_url=url, key=key, now=when))
    say(table(["incident", "class", "believed", "actual"],
              [[c.incident.id, c.incident.failure_class, c.incident.believed, c.incident.actual] for c in out]))
    triage = sum(c.incident.triage for c in out)
    say(f"\n{len(out)} incidents from {len(logs)} logs, {triage} left for triage; "
        f"{models.capture.usage.calls} model calls.\n")
    return out


def _source(log: Path) -> tuple[str | None, str | None]:
    with log.open(encoding="utf-8", errors="replace") as handle:
        match = _SOURCE.match(handle.readline())
    return (match.group(1), match.group(2)) if match else (None, None)


def distill_incidents(settings, models: Models, say: Say) -> distill.DistillReport:
    say("## 2. Distill: rules from the unresolved incidents\n")
    report = distill.distill(settings, models.distill, batch_max=64)  # one prompt: the demo's incidents are few
    for p in report.proposals:
        provisional = ", provisional" if p.provisional else ""
        say(f"- **{p.id}** (replay `{p.scenario}`; cites {', '.join(p.cites)}{provisional}):\n  {p.rule}")
    for refusal in report.refusals:
        say(f"- refused ({refusal.group}): {refusal.reason}")
    say(f"\n{len(report.proposals)} proposals in `playbook/proposed/`, {len(report.refusals)} refused.\n")
    return report


def gate_proposals(book: Playbook, workspace: Path, report: distill.DistillReport, models: Models, today: date,
                   say: Say, progress: Say) -> list[list]:
    say(f"## 3. Admit: each proposal must prove itself by replay (cap {DEMO_CAP})\n")
    say(CAP_NOTE + "\n")
    say("The proposals are gated side by side against the same playbook, as rule PRs against one base "
        "branch are, then admitted one at a time (the cap is enforced on the merged result).\n")
    opts = gate.GateOptions(replay=models.replay, jobs=2, suite_trials=1,
                            cache_dir=workspace / ".replaybook" / "cache")
    proposals = sorted(report.proposals, key=lambda p: p.id)
    progress("… replaying every scenario once with the current playbook (the shared baselines)")
    _warm_baselines(book, workspace, opts)

    def one(p):
        return gate.run_gate(book, Path(p.path), workspace / "scenarios", opts,
                             lambda msg: progress(f"… {p.id}: {msg}"))

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, proposals))
    rows = []
    for proposal, result in zip(proposals, results):
        gate_log.append(workspace, gate_log.record_of(result))
        retired = ""
        if result.decision == "admit":
            retired = ", ".join(r.id for r in book.admit(Path(proposal.path), today).retired)
        before = f"{result.before.passes}/{result.before.n}" if result.before else "–"
        after = f"{result.after.passes}/{result.after.n}" if result.after else "–"
        why = explain(result)
        rows.append([proposal.id, result.decision, before, after, len(result.regressions), retired,
                     result.replays, result.cache_hits, f"${result.cost_usd:.2f}", why])
        say(f"- {proposal.id}: **{result.decision}**: {why}" + (f" (over the cap: retired {retired})" if retired else ""))
    say("")
    say(table(["rule", "decision", "passed without", "passed with", "regressions", "retired", "replays",
               "from cache", "cost"], [r[:-1] for r in rows]))
    estimate = (" Costs are simulated estimates." if models.simulated else
                " The local model costs $0: its cost is tokens and CPU time." if models.replay.model_label else "")
    say(f"\n{TRIALS_NOTE}{estimate}\n")
    return rows


def explain(result: gate.GateResult) -> str:
    """The gate's reason, with the numbers behind a regression."""
    if not result.regressions:
        return result.reason
    parts = [f"`{e.scenario}` passed {e.baseline.passes}/{e.baseline.n} without it and "
             f"{e.candidate.passes if e.candidate else 0}/{e.candidate.n if e.candidate else 0} with it"
             for e in result.regressions]
    return (f"its own scenario is fixed ({result.before.passes}/{result.before.n} without, "
            f"{result.after.passes}/{result.after.n} with), but it breaks another scenario, a regression: "
            + "; ".join(parts))


def _warm_baselines(book: Playbook, workspace: Path, opts: gate.GateOptions) -> None:
    """Replay every scenario once with the current playbook: the first before-run of its own
    gate and its suite baseline in every other gate are that same replay, so the cache serves them."""
    text = book.render_text()
    jobs = [(loaded, text, 0, opts.replay) for loaded in suite_mod.load(workspace / "scenarios").scenarios]
    gate.Runner(opts).batch(jobs)


def summary(book: Playbook, store: IncidentStore, captured: list, rows: list[list], say: Say) -> None:
    say("## 4. The playbook agents now read\n")
    say("```markdown\n" + book.rendered_path.read_text(encoding="utf-8").rstrip() + "\n```\n")
    incidents = store.all()
    admitted = sum(r[1] == "admit" for r in rows)
    say(table(["incidents", "resolved by a rule", "proposals", "admitted", "admitted rules now", "archived"],
              [[len(incidents), sum(i.resolved_by == "rule" for i in incidents), len(rows), admitted,
                len(book.admitted()), len(list(book.dir("archive").glob("*.yaml")))]]))
    problems = book.check()
    say(f"\n`replaybook playbook check`: {'ok' if not problems else 'FAILED: ' + '; '.join(problems)}.\n")
    refused = [r for r in rows if r[1] != "admit"]
    if refused:
        say(f"{len(refused)} of {len(rows)} proposals were not admitted; the gate earns its keep there: "
            "a rule the agent already follows costs context and teaches nothing, and a rule that breaks "
            "another scenario would make agents worse.\n")


