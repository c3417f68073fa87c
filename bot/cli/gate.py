"""``replaybook gate``: admit or reject one candidate rule, by replay."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import click

from bot import config as config_mod
from bot.cli.output import emit_json
from bot.cli.playbook import open_playbook
from bot.errors import BadInput, CheckFailed
from bot.gate import decision as gate_mod
from bot.gate import ledger as gate_log
from bot.gate import options as gate_options
from bot.gate import report as gate_report
from bot.gate import reuse
from bot.model.served import LOCAL, SCRIPTED
from bot.playbook.store import Playbook
from bot.replay.agents import AGENTS
from bot.replay.sandbox.isolation import BACKENDS


@click.command("gate")
@click.argument("rule_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--playbook", "playbook_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The playbook folder (default: config paths.playbook).")
@click.option("--suite", "suite_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The replay suite: a folder of scenarios (default: config paths.scenarios).")
@click.option("--agent", "agents", type=click.Choice(AGENTS), multiple=True,
              help="The agent to replay (repeatable: the rule is proven on each, and rendered only into the files "
              "of those it is proven on). Default: config replay.agents, else builtin.")
@click.option("--sandbox", type=click.Choice(BACKENDS), default=None,
              help="Isolation of the agent: bwrap (default on Linux), docker, or none (unisolated, loudly warned; "
                   "the GitHub gate refuses it). Default: config replay.sandbox.")
@click.option("--command", "command_template", help="For --agent command: its command line.")
@click.option("--model", default=SCRIPTED, show_default=True,
              help="`scripted` (the offline simulated model), `local` (the real model `replaybook model install "
                   "local` installs, offline), or a hosted model id (needs ANTHROPIC_API_KEY).")
@click.option("--screen-model", help="Screen with this cheaper model first; run the full gate only if the rule can matter.")
@click.option("--trials", type=click.IntRange(1, 500), default=None,
              help="Baseline trials per suite scenario, shared and cached (default 40; see docs/gate.md).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Trials run at once, across every scenario (default: the cores this process may use). "
                   "The decision is the same whatever it is.")
@click.option("--max-cost-usd", type=click.FloatRange(min=0), help="Stop the gate once it has spent this much.")
@click.option("--max-turns", type=click.IntRange(1, 500),
              help="At most this many model turns a replay, below each scenario's budget.max_turns.")
@click.option("--budget", "budget_replays", type=click.IntRange(1, 10_000),
              help="At most this many replays; the gate answers inconclusive when they run out "
                   "(default: config gate.budget.replays).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Replay cache (default: config paths.cache).")
@click.option("--no-cache", is_flag=True, help="Replay everything; read and write no cache.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where run folders are kept (default: config paths.traces).")
@click.option("--noise", type=click.FloatRange(0, 1), default=0.0, help="Simulated model: chance a trial takes the other branch.")
@click.option("--seed", type=int, default=0, help="Simulated model: seed for the noise.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the markdown report to this file.")
@click.option("--page-url", help="The gate's page (`replaybook view`) at this URL: each line of the markdown links "
              "to its place there.")
@click.option("--admit", "do_admit", is_flag=True,
              help="On admit: move the rule into playbook/rules/, retire past the cap, re-render, resolve its incidents.")
@click.option("--estimate", "only_estimate", is_flag=True,
              help="Print the expected replays (the cache's subtracted), model calls, cost and wall time; replay nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of markdown.")
@click.pass_context
def command(ctx: click.Context, rule_file: Path, playbook_dir: Path | None, suite_dir: Path | None,
            agents: tuple[str, ...],
            command_template: str | None, model: str, screen_model: str | None, trials: int | None, jobs: int | None,
            max_cost_usd: float | None, max_turns: int | None, budget_replays: int | None, cache_dir: Path | None, no_cache: bool, runs_dir: Path | None,
            noise: float, seed: int, report_file: Path | None, do_admit: bool, only_estimate: bool, as_json: bool,
            sandbox: str | None, page_url: str | None) -> None:
    """Decide admit or reject for RULE_FILE by replay.

    Cheap checks first (form, citations, scenario, no twin), then the rule's
    own scenario must fail without it and pass with it (the test `gate.own_test` picks:
    in pairs for a real model, docs/gate.md),
    then the whole suite must not regress. Exit 0 on admit, 1 on reject, when
    no decision could be made, or when `gate.budget` ended first (inconclusive), 2 on bad input.
    """
    settings = ctx.obj.settings
    if not rule_file.is_file():
        raise BadInput(f"{rule_file}: no such rule file")
    if page_url is not None and urlsplit(page_url).scheme not in ("https", "http", "file"):
        raise BadInput(f"--page-url {page_url!r}: not an https, http or file URL; give the page's address")
    book = open_playbook(ctx)
    if playbook_dir is not None:
        book = Playbook(playbook_dir, root=settings.root, cap=settings.cap, incidents=book.incidents, org=book.org,
                        half_life_days=book.half_life_days)
    chosen = gate_options.agents(settings, agents)
    agent = chosen[0]
    config_mod.require_key(ctx.obj.env, agent, model, screen_model)
    if screen_model and LOCAL in (model, screen_model) and screen_model not in (model, SCRIPTED):
        raise BadInput(f"--model {model} with --screen-model {screen_model}: the local model screens only a gate "
                       "on the local model; give --screen-model local or scripted with --model local")
    _, key, _ = config_mod.for_agent(ctx.obj.env, agent)  # the screen model may be hosted when the agent's is not
    opts = gate_options.options(settings, ctx.obj.env, default_agent=agent, model=model, suite_trials=trials,
                                jobs=jobs, max_cost_usd=max_cost_usd, screen_model=screen_model,
                                cache_dir=None if no_cache else (cache_dir or settings.path("cache")),
                                runs_dir=runs_dir, sandbox=sandbox, api_key=key, command=command_template,
                                noise=noise, seed=seed)
    if max_turns is not None:
        opts = replace(opts, replay=replace(opts.replay, max_turns=max_turns))
    if budget_replays is not None:
        opts = replace(opts, budget_replays=budget_replays)
    gate_options.gateable(book, rule_file, policy=opts.replay.simulated)
    if only_estimate:
        _estimate(book, rule_file, suite_dir or settings.path("scenarios"), opts, chosen, as_json)
        return
    progress = None if as_json else (lambda msg: click.echo(f"… {msg}", err=True))
    if len(chosen) > 1:
        _per_agent(book, rule_file, suite_dir or settings.path("scenarios"), opts, chosen, progress,
                   do_admit=do_admit, report_file=report_file, as_json=as_json)
        return
    result = gate_mod.run_gate(book, rule_file, suite_dir or settings.path("scenarios"), opts, progress)
    gate_log.append(settings.root, gate_log.record_of(result))  # what `replaybook report` sums
    if do_admit and result.decision == "admit":
        admission = book.admit(rule_file, datetime.now(timezone.utc).date(), recheck=gate_mod.twins)
        retired = [r.id for r in admission.retired if r.id != admission.rule.id]
        result.admitted = {"retired": retired, "resolved": admission.resolved_incidents,
                           "retired_itself": admission.retired_itself}
        reuse.carry_over(book, result, suite_dir or settings.path("scenarios"), opts)  # the next baseline, free
    _report(result, gate_report.markdown(result, opts.test, page_url), gate_report.as_json, report_file, as_json)


def _estimate(book: Playbook, rule_file: Path, suite_dir: Path, opts: gate_mod.GateOptions, agents: list[str],
              as_json: bool) -> None:
    from bot.gate.estimate import planned_scope

    each = {a: replace(opts, replay=replace(opts.replay, agent=a)) for a in agents}
    plans = {a: gate_mod.estimate(book, rule_file, suite_dir, o) for a, o in each.items()}
    if any(p is None for p in plans.values()):
        raise CheckFailed(f"{rule_file}: the cheap checks reject it; nothing would be replayed "
                          f"(`replaybook rule validate {rule_file}` says why)")
    for agent, plan in plans.items():  # the chosen scope beside the same rule global
        plan.scope = planned_scope(book, rule_file, suite_dir, each[agent])
    if as_json:
        emit_json(plans[agents[0]].as_dict() if len(agents) == 1 else {a: p.as_dict() for a, p in plans.items()})
        return
    for agent, plan in plans.items():
        click.echo(f"gate of {rule_file.name} with agent {agent}, planned:")
        for line in plan.lines():
            click.echo(f"  {line}")


def _per_agent(book: Playbook, rule_file: Path, suite_dir: Path, opts: gate_mod.GateOptions, agents: list[str],
               progress, *, do_admit: bool, report_file: Path | None, as_json: bool) -> None:
    from bot.gate import agents as gate_agents

    result = gate_agents.run(book, rule_file, suite_dir, opts, agents, progress)
    if do_admit and result.decision == "admit":
        admission = book.admit(rule_file, datetime.now(timezone.utc).date(), recheck=gate_mod.twins,
                               agents=gate_agents.agents_to_record(result))
        first = result.results[result.proven_on[0]]
        first.admitted = {"retired": [r.id for r in admission.retired if r.id != admission.rule.id],
                          "resolved": admission.resolved_incidents, "retired_itself": admission.retired_itself}
        for agent in result.proven_on:  # each proven agent's trials become its next baseline, free
            reuse.carry_over(book, result.results[agent], suite_dir, replace(opts, replay=replace(opts.replay, agent=agent)))
    _report(result, gate_agents.markdown_report(result, opts.test), gate_agents.as_json, report_file, as_json)


def _report(result, text: str, as_data, report_file: Path | None, as_json: bool) -> None:
    """The report to ``--report-file`` and stdout (markdown, or JSON); exit 1 unless the gate admitted."""
    if report_file:
        report_file.parent.mkdir(parents=True, exist_ok=True)
        report_file.write_text(text, encoding="utf-8")
    if as_json:
        emit_json(as_data(result))
    else:
        click.echo(text, nl=False)
    if result.decision != "admit":
        raise CheckFailed(f"{result.rule_id}: {result.decision}: {result.reason}")
