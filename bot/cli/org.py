"""``replaybook org``: the organisation's tier (docs/org.md): its gate and its proposals."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import click

from bot import config as config_mod
from bot.cli.output import emit_json
from bot.config import replay_options
from bot.errors import BadInput, CheckFailed
from bot.gate import org as org_gate
from bot.gate import promotion, stats
from bot.gate.decision import GateOptions
from bot.gate.pool import cores
from bot.playbook.store import Playbook
from bot.replay.agents import AGENTS
from bot.model.served import SCRIPTED


@click.group("org")
def group() -> None:
    """The organisation's tier: rules proven across member repositories (run in the org repository)."""


def _members(settings: config_mod.Settings, given: tuple[Path, ...]) -> list[Path]:
    if given:
        missing = [str(p) for p in given if not Path(p).is_dir()]
        if missing:
            raise BadInput(f"--member: {', '.join(missing)} is not a folder; give each member's checkout")
        return [Path(p) for p in given]
    tier = settings.config.org_tier
    if tier is None or not tier.members:
        raise BadInput("no members: give --member DIR for each member checkout, or list them under "
                       "`org_tier.members` in the org repository's .replaybook.yml")
    return [source.folder(settings.root) for source in tier.members.values()]


def _org_book(settings: config_mod.Settings) -> Playbook:
    return Playbook(settings.path("playbook"), root=settings.root, cap=settings.cap)


@group.command("gate")
@click.argument("rule_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--member", "members", type=click.Path(file_okay=False, path_type=Path), multiple=True,
              help="A member repository's checkout (repeatable; named by its folder). Default: config "
                   "org_tier.members.")
@click.option("--agent", "agents", type=click.Choice(AGENTS), multiple=True,
              help="Prove it on this agent (repeatable; each must admit). Default: config org_tier.agents, else builtin.")
@click.option("--model", default=SCRIPTED, show_default=True,
              help="`scripted` (the offline simulated model), `local` (the real model `replaybook model install "
                   "local` installs, offline), or a hosted model id (needs the agent's API key).")
@click.option("--min-members", type=click.IntRange(org_gate.MIN_MEMBERS_FLOOR, 100), default=None,
              help="Members the rule's scenarios must come from (never fewer than 2). Default: config "
                   "org_tier.min_members, else 3.")
@click.option("--trials", type=click.IntRange(1, 500), default=None,
              help="Baseline trials per member suite scenario (default 40; see docs/gate.md).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None, help="Trials run at once (default: the cores).")
@click.option("--max-cost-usd", type=click.FloatRange(min=0), help="Stop each agent's gate once it has spent this much.")
@click.option("--no-cache", is_flag=True, help="Replay everything; read and write no cache.")
@click.option("--only", "only", multiple=True,
              help="Replay only this member's cells (repeatable): one job's share of a fanned-out gate; print its "
                   "document with --json, and exit 0 once it is written.")
@click.option("--combine", "shares", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
              help="Decide from the documents the --only jobs wrote (repeatable) instead of replaying.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the markdown report to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of markdown.")
@click.pass_context
def gate(ctx: click.Context, rule_file: Path, members: tuple[Path, ...], agents: tuple[str, ...], model: str,
         min_members: int | None, trials: int | None, jobs: int | None, max_cost_usd: float | None, no_cache: bool,
         only: tuple[str, ...], shares: tuple[Path, ...], report_file: Path | None, as_json: bool) -> None:
    """Admit or reject RULE_FILE for the org tier, by replay in every member.

    Its scenarios must come from at least 3 members (`replays:`, one per member); in each it must fail
    without the rule and pass with it, on its own; no member's suite may regress, corrected over every
    member scenario; on every agent listed. Exit 0 on admit, 1 on reject or when no decision could be
    made, 2 on bad input.
    """
    settings = ctx.obj.settings
    if not rule_file.is_file():
        raise BadInput(f"{rule_file}: no such rule file")
    tier_cfg = settings.config.org_tier
    candidate = org_gate.load_candidate(rule_file)
    if shares:
        if only:
            raise BadInput("--combine decides from the shares; it replays nothing, so --only has no place beside it")
        doc = org_gate.combine([_share(p) for p in shares], GateOptions())
        if (doc["rule"], doc["rule_text"]) != (candidate.id, candidate.rule):
            raise BadInput(f"--combine: the shares are of {doc['rule']}'s gate, not of {rule_file} as it is now")
        _verdict(doc, report_file, as_json)
        return
    roots = _members(settings, members)
    need = min_members or (tier_cfg.min_members if tier_cfg else 3)
    chosen = list(agents) or (tier_cfg.agents if tier_cfg else []) or ["builtin"]
    config_mod.require_key(ctx.obj.env, chosen[0], model)
    readers = org_gate.members_of(candidate, roots, _org_book(settings).admitted(), min_members=need,
                                  source=_source(settings))
    replay = replay_options(settings, ctx.obj.env, model=model, agent=chosen[0])
    opts = GateOptions(replay=replay, test=stats.own_test(settings.config.gate.own_test), suite_trials=trials,
                       jobs=jobs or cores(), max_cost_usd=max_cost_usd,
                       cache_dir=None if no_cache else settings.path("cache"))
    progress = None if as_json else (lambda msg: click.echo(f"… {msg}", err=True))
    result = org_gate.run(candidate, readers, opts, chosen, progress, only=set(only) or None)
    _verdict(org_gate.document(result, opts), report_file, as_json, share=bool(only))


def _share(path: Path) -> dict:
    import json

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        raise BadInput(f"--combine {path}: not a readable JSON document; give what `org gate --only … --json` "
                       "printed") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise BadInput(f"--combine {path}: has no `cells`; give what `org gate --only … --json` printed")
    return doc


def _verdict(doc: dict, report_file: Path | None, as_json: bool, *, share: bool = False) -> None:
    """The report to ``--report`` and stdout; exit 1 unless admitted (a share exits 0 once written)."""
    text = org_gate.markdown(doc)
    if report_file:
        report_file.parent.mkdir(parents=True, exist_ok=True)
        report_file.write_text(text, encoding="utf-8")
    if as_json:
        emit_json(doc)
    else:
        click.echo(text, nl=False)
    if doc["decision"] != "admit" and not share:
        raise CheckFailed(f"{doc['rule']}: {doc['decision']}: {doc['reason']}")


@group.command("propose")
@click.option("--member", "members", type=click.Path(file_okay=False, path_type=Path), multiple=True,
              help="A member repository's checkout (repeatable). Default: config org_tier.members.")
@click.option("--min-members", type=click.IntRange(2, 100), default=2, show_default=True,
              help="Members a rule must be admitted in before it is proposed for the org tier.")
@click.option("--write", is_flag=True, help="Write the proposals into the org repository's playbook/proposed/.")
@click.option("--pr", "as_pr", is_flag=True, help="Open (or bring up to date) one PR on this org repository "
              "holding the proposals, as a workflow does (GITHUB_TOKEN, GITHUB_REPOSITORY).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of markdown.")
@click.pass_context
def propose(ctx: click.Context, members: tuple[Path, ...], min_members: int, write: bool, as_pr: bool,
            as_json: bool) -> None:
    """Propose for the org tier each rule admitted in at least 2 members, twins merged, with its evidence."""
    settings = ctx.obj.settings
    roots = _members(settings, members)
    book = _org_book(settings)
    today = datetime.now(timezone.utc).date()
    plan = promotion.plan(book, {Path(r).resolve().name: Path(r).resolve() for r in roots}, min_members, today)
    if write and as_pr:
        raise BadInput("give --write (this checkout) or --pr (a PR on the org repository), not both")
    if write:
        book.apply(plan.change)
    if as_pr:
        outcome = _promotion_pr(settings, plan)
        click.echo(f"{outcome.status}: {outcome.summary}" + (f" ({outcome.url})" if outcome.url else ""), err=True)
    if as_json:
        emit_json(plan.as_dict())
    else:
        click.echo(plan.markdown(), nl=False)


def _promotion_pr(settings: config_mod.Settings, plan: promotion.Promotion):
    """The proposals as one PR on GITHUB_REPOSITORY (the org repository), through the port."""
    from bot import settings as settings_mod
    from bot.cli.github import _float_env
    from bot.github.adapter import PyGithubAdapter
    from bot.github.context import RunContext
    from bot.github.promotion import promotion_pr

    token, repo = settings_mod.get("GITHUB_TOKEN"), settings_mod.get("GITHUB_REPOSITORY") or ""
    if not token:
        raise BadInput("GITHUB_TOKEN is not set; give the job a token with contents and pull-requests: write")
    if "/" not in repo:
        raise BadInput(f"repository {repo!r} is not owner/name; set GITHUB_REPOSITORY to the org repository")
    throttle = _float_env("REPLAYBOOK_GITHUB_THROTTLE", 1.0)
    port = PyGithubAdapter(repo, token, settings_mod.get("GITHUB_API_URL"),
                           backoff=_float_env("REPLAYBOOK_GITHUB_BACKOFF", 1.0),
                           seconds_between_requests=0.25 * throttle, seconds_between_writes=1.0 * throttle,
                           bot_logins=settings.config.github.bot_logins)
    try:
        return promotion_pr(RunContext(port, settings.root, settings), plan)
    finally:
        port.close()


def _source(settings: config_mod.Settings) -> str:
    return settings.root.name
