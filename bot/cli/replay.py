"""``replaybook replay``: run an agent on a scenario and judge it from its trace.

``replaybook replay SCENARIO`` replays one scenario (the ``run`` subcommand,
implied); ``list`` and ``report`` serve a workflow that fans the suite out
as a matrix and merges the results (see :mod:`bot.replay.matrix`).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from bot import replay as replay_api  # the replay's front door (its public entry points), never its engine
from bot._util import bundled
from bot.cli.output import emit_json, table
from bot.cli.playbook import open_playbook
from bot.config import replay_options
from bot.errors import BadInput, CheckFailed, Interrupted
from bot.model import served
from bot.playbook import rule as rules_mod
from bot.playbook.render.system_prompt import system_prompt
from bot.playbook.store import Playbook
from bot.replay import matrix as replay_suite
from bot.replay.agents import AGENTS
from bot.replay.sandbox import process as process_mod
from bot.replay.sandbox.interrupt import stop_on_sigint
from bot.replay.sandbox.isolation import BACKENDS
from bot.scenario import spec as sc

SIMULATED_NOTE = "SIMULATED model (scripted, offline): it shows the harness works, not how a real model behaves"


def resolve_scenario(root: Path, scenarios_dir: Path, name: str) -> sc.LoadedScenario:
    """A scenario by path, by id in this repository, or by id among the bundled ones."""
    if bundled.named(name) is not None:
        return sc.load(bundled.scenario_folder(bundled.named(name)))
    given = Path(name)
    for candidate in (given, root / given, scenarios_dir / name, bundled.scenarios_dir() / name):
        if (candidate / "scenario.yaml").is_file() or (candidate.suffix in (".yaml", ".yml") and candidate.is_file()):
            return sc.load(candidate)
    raise BadInput(f"scenario {name!r} not found as a path, in {scenarios_dir}/ or among the bundled scenarios")


def candidate_rule(rule_file: Path | None):
    """The candidate rule of ``--rule`` (a file, or bundled:ID), or None."""
    if rule_file is None:
        return None
    if bundled.named(rule_file) is not None:
        rule_file = bundled.rule_file(bundled.named(rule_file))
    return rules_mod.load(rule_file, named_by_id=False)


def playbook_text(book: Playbook, playbook: Path | None, rule_file: Path | None) -> str:
    """The system prompt: the admitted rules plus a candidate, as the gate builds it; or a given file's text."""
    candidate = candidate_rule(rule_file)
    if playbook is None:
        return system_prompt(book, candidate)
    if not playbook.is_file():
        raise BadInput(f"{playbook}: no such playbook file")
    text = playbook.read_text(encoding="utf-8")  # a hand-written playbook: the candidate is appended as a line
    if candidate is not None:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + f"- [{candidate.id}] {candidate.rule}\n"
    return text


class _RunByDefault(click.Group):
    """A group whose first argument, when it names no subcommand, is a scenario for ``run``.

    So ``replaybook replay ID`` keeps working beside ``replaybook replay list``.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("replay", cls=_RunByDefault)
def command() -> None:
    """Run an agent on SCENARIO (a path or an id) in a sandbox and judge it from its trace.

    `replaybook replay SCENARIO [OPTIONS]` is short for `replaybook replay run
    SCENARIO [OPTIONS]`. `list` and `report` fan a whole suite out (one job per
    scenario in a workflow matrix) and merge the results back.
    """


@command.command("run")
@click.argument("scenario")
@click.option("--agent", type=click.Choice(AGENTS), default="builtin", show_default=True, help="The agent to run.")
@click.option("--sandbox", type=click.Choice(BACKENDS), default=None,
              help="Isolation of the agent: bwrap (default on Linux), docker, or none (unisolated, loudly warned; "
                   "the GitHub gate refuses it). Default: config replay.sandbox.")
@click.option("--command", "command_template", help="For --agent command: its command line, with {task} and {playbook_file}.")
@click.option("--model", default="scripted", show_default=True,
              help="`scripted` (the offline simulated model), `local` (the real model `replaybook model install "
                   "local` installs, offline), or a hosted model id (needs ANTHROPIC_API_KEY).")
@click.option("--playbook", type=click.Path(dir_okay=False, path_type=Path),
              help="A playbook file whose text is the system prompt (default: the admitted rules, as the gate renders them).")
@click.option("--rule", "rule_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A candidate rule file whose rule is added to the playbook, or bundled:ID for a bundled scenario's rule.")
@click.option("--deliver", type=click.Choice(["prompt", "files"]),
              help="How the playbook reaches the agent: its prompt channel, or the files its host reads in a "
                   "repository (AGENTS.md, CLAUDE.md; default: config replay.deliver). With --rule, whether "
                   "the rule reached the agent is recorded per trial.")
@click.option("--trials", type=click.IntRange(1, 1000), default=1, show_default=True, help="Independent trials.")
@click.option("--max-turns", type=click.IntRange(1, 500),
              help="At most this many model turns, below the scenario's budget.max_turns "
                   "(e.g. for a small local model).")
@click.option("--budget", "budget_s", type=click.FloatRange(min=1),
              help="At most this many seconds a trial, below the scenario's budget.timeout_s "
                   "(a trial past it ends unscored as a timeout).")
@click.option("--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Trials run at once (with --model local, decoded together as sequences of one context).")
@click.option("--noise", type=click.FloatRange(0, 1), default=0.0, help="Simulated model: chance a trial takes the other branch.")
@click.option("--seed", type=int, default=0, help="Simulated model: seed for the noise.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where run folders (trace, raw output, diff) are kept (default: config paths.traces).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def run(ctx: click.Context, scenario: str, agent: str, command_template: str | None, model: str,
            playbook: Path | None, rule_file: Path | None, deliver: str | None, trials: int, max_turns: int | None,
            budget_s: float | None, jobs: int, noise: float, seed: int, runs_dir: Path | None, as_json: bool, sandbox: str | None) -> None:
    """Run an agent on SCENARIO (a path or an id) in a sandbox and judge it from its trace.

    Prints each trial's verdict (pass, fail or unscored), the check that failed
    and its evidence, and the tokens and cost counted by the gateway. Exit 0
    when every trial passed, 1 otherwise, 2 on bad input.
    """
    settings = ctx.obj.settings
    loaded = resolve_scenario(settings.root, settings.path("scenarios"), scenario)
    text = playbook_text(open_playbook(ctx), playbook, rule_file)
    rule = candidate_rule(rule_file)
    watch = {"rule": rule.rule, "rule_paths": tuple(rule.paths)} if rule is not None else {}
    opts = replay_options(settings, ctx.obj.env, model=model, runs_dir=runs_dir, sandbox=sandbox,
                          agent=agent, command=command_template, noise=noise, seed=seed, max_turns=max_turns,
                          max_seconds=budget_s,
                          **({"deliver": deliver} if deliver else {}), **watch)
    if not as_json:
        click.echo(f"# Replay `{loaded.scenario.id}`: {agent} agent, model `{model}`"
                   + (f"\n\n> {SIMULATED_NOTE}." if opts.simulated else "")
                   + (f"\n\n> {opts.model_label}, offline: cost is tokens and CPU time, $0."
                      if opts.model_label else "")
                   + "\n")

    def progress(result: replay_api.TrialResult) -> None:
        if trials > 1:
            done = progress.count = getattr(progress, "count", 0) + 1
            click.echo(f"[{done}/{trials}] trial {result.trial}: {result.verdict}", err=True)

    finished: list[replay_api.TrialResult] = []

    def keep(result: replay_api.TrialResult) -> None:
        finished.append(result)
        progress(result)

    try:
        with stop_on_sigint():
            results = replay_api.run_trials(loaded, text, opts, trials=trials, jobs=jobs, progress=keep)
    except (KeyboardInterrupt, process_mod.Interrupted):
        _interrupted(sorted(finished, key=lambda r: r.trial), trials, as_json)
    finally:
        process_mod.STOP.clear()  # run_trials returns only once every trial thread has ended
    if as_json:
        emit_json({"scenario": loaded.scenario.id, "agent": agent, "model": model,
                   "simulated": opts.simulated, **({"model_label": opts.model_label} if opts.model_label else {}),
                   "summary": replay_api.summary(results),
                   "trials": [r.to_dict() for r in results]})
    else:
        _report(results)
    if not all(r.verdict == "passed" for r in results):
        raise CheckFailed(_closing(results))


def _interrupted(finished: list[replay_api.TrialResult], trials: int, as_json: bool) -> None:
    """Ctrl-C: the trials that finished, reported as usual, and exit 130."""
    if as_json:
        emit_json({"interrupted": True, "summary": replay_api.summary(finished), "trials": [r.to_dict() for r in finished]})
    elif finished:
        _report(finished)
    raise Interrupted(f"interrupted: {len(finished)} of {trials} trial(s) finished"
                      + (" (reported above)" if finished and not as_json else "") + "; the rest were stopped")


def _report(results: list[replay_api.TrialResult]) -> None:
    rows = []
    for r in results:
        failed = r.failed_checks if r.delivered is not False else []  # the rule never arrived: no check is news
        rows.append([r.trial, r.verdict, failed[0].check if failed else ("" if r.verdict == "passed" else r.reason),
                     failed[0].detail if failed else "", r.input_tokens + r.output_tokens, f"${r.cost_usd:.4f}"])
    click.echo(table(["trial", "verdict", "failed check", "detail", "tokens", "cost"], rows))
    for r in results:
        for check in r.failed_checks if r.delivered is not False else []:
            for item in check.evidence[:3]:
                click.echo(f"- trial {r.trial}, `{check.check}`: {evidence_line(item)}")
    for warning in dict.fromkeys(w for r in results for w in r.warnings):
        click.echo(f"\n> **{warning}**")
    s = replay_api.summary(results)
    cpu = served.cpu_seconds()  # the local model's engine, when it answered: its cost is CPU, not money
    kind = " (simulated estimate)" if s["simulated"] else f" ({cpu:.0f} CPU seconds of the local model)" if cpu else ""
    missed = f" ({s['not_delivered']} with the rule not delivered)" if s["not_delivered"] else ""
    click.echo(f"\n{s['passed']} passed, {s['failed']} failed, {s['unscored']} unscored{missed}; "
               f"{s['input_tokens'] + s['output_tokens']} tokens, ${s['cost_usd']:.4f}{kind}")
    dirs = [r.run_dir for r in results if r.run_dir]
    if dirs:
        click.echo(f"Run folders: {Path(dirs[0]).parent}/")


def evidence_line(item: dict) -> str:
    """One line of evidence from the trace or the end state."""
    if "argv" in item:
        argv = " ".join(item["argv"])
        return f"ran `{argv}` in `{item['cwd']}`, exit {item['exit_code']} (trace event {item['seq']})"
    if "added_line" in item:
        return f"{item['path']} adds `{item['added_line'].strip()}` (matches `{item['pattern']}`)"
    if "service" in item:
        return f"service ${item['service']} got {item['requests']} request(s)"
    if "output_tail" in item:
        tail = " / ".join(line for line in item["output_tail"].strip().splitlines()[-2:])
        return f"output ends: {tail}"
    return str(item)


def _closing(results: list[replay_api.TrialResult]) -> str:
    s = replay_api.summary(results)
    return f"not every trial passed ({s['failed']} failed, {s['unscored']} unscored)"


@command.command("list")
@click.argument("scenarios", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {id, path, task_type, task}.")
@click.option("--ids", is_flag=True, help="Print only a JSON list of the ids, compact: a workflow matrix.")
@click.pass_context
def list_(ctx: click.Context, scenarios: tuple[str, ...], as_json: bool, ids: bool) -> None:
    """List the scenarios a suite replays: every one under the scenarios folder, or the SCENARIOS named.

    Each named scenario must load (a path, or an id here or among the bundled
    ones), so a workflow fails before fanning out on a typo. `--ids` prints
    the compact JSON a workflow matrix reads, e.g. `["lint-disable","retry-loop"]`.
    """
    settings = ctx.obj.settings
    if scenarios:
        found = [resolve_scenario(settings.root, settings.path("scenarios"), name) for name in scenarios]
        found = list({s.scenario.id: s for s in found}.values())
    else:
        found = replay_suite.discover(settings.path("scenarios"))
    items = replay_suite.listing(found, settings.root)
    if ids:
        click.echo(json.dumps([item["id"] for item in items], separators=(",", ":")))
    elif as_json:
        emit_json(items)
    else:
        _print_listing(items, settings, with_bundled=not scenarios)


def _print_listing(items: list[dict], settings, *, with_bundled: bool) -> None:
    """The suite as a table, then the bundled scenarios it can also run (never in --json/--ids: not the suite)."""
    rows = [[i["id"], i["task_type"] or "", i["path"], i["task"]] for i in items]
    if not rows:
        click.echo(f"No scenarios under {settings.path('scenarios')}/ (the suite is empty).")
    local = {i["id"] for i in items}
    extra = [s for s in replay_suite.discover(bundled.scenarios_dir()) if s.scenario.id not in local] if with_bundled else []
    rows += [[s.scenario.id + " (bundled)", s.scenario.task_type or "", f"bundled:{s.folder.name}", s.scenario.task]
             for s in extra]
    if rows:
        click.echo(table(["id", "task type", "path", "task"], rows))
    if extra:
        click.echo("\nBundled scenarios ship with Replaybook and are not part of this suite; run one with "
                   "`replaybook replay bundled:ID`, and try its rule with `--rule bundled:ID`.")


@command.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--expect", "expected", help="JSON list of the scenario ids the suite ran (the matrix); "
                                           "one without a result counts as missing.")
@click.option("--summary", "summary_file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="GITHUB_STEP_SUMMARY", help="Append the report to this file (default: $GITHUB_STEP_SUMMARY).")
@click.option("--json", "as_json", is_flag=True, help="Print the merged rows as JSON.")
@click.pass_context
def report(ctx: click.Context, results: tuple[Path, ...], expected: str | None, summary_file: Path | None,
           as_json: bool) -> None:
    """Merge per-scenario results (files or folders of `replaybook replay ID --json` output) into one report.

    Prints one markdown table (and appends it to the step summary in a
    workflow). Exit 0 when every scenario passed every trial, 1 when one
    failed, was unscored or has no result, 2 on unreadable input.
    """
    wanted = _expected(expected)
    merged = replay_suite.merge(list(results), wanted)
    text = replay_suite.markdown(merged)
    if summary_file is not None:
        with open(summary_file, "a", encoding="utf-8") as f:
            f.write(text)
    if as_json:
        emit_json({"ok": merged.ok, "rows": [vars(r) for r in merged.rows]})
    else:
        click.echo(text, nl=False)
    if not merged.rows:
        raise CheckFailed("no replay results to merge; did the suite run any scenario?")
    if not merged.ok:
        bad = [r.scenario for r in merged.rows if r.verdict != "passed"]
        raise CheckFailed(f"{len(bad)} of {len(merged.rows)} scenario(s) did not pass: {', '.join(bad)}")


def _expected(raw: str | None) -> list[str] | None:
    if raw is None or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInput(f"--expect {raw!r:.80} is not a JSON list of scenario ids, e.g. [\"lint-disable\"]")
    return value
