"""``replaybook github``: what the bot does inside a GitHub Actions workflow."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bot import config as config_mod
from bot import settings as settings_mod
from bot.cli.output import emit_json, table
from bot.config import Config
from bot.errors import BadInput, CheckFailed
from bot.github.events import ACTIONS, plan
from bot.settings import Environment


@click.group("github")
def group() -> None:
    """Act on GitHub events from inside a GitHub Actions workflow."""


def _payload(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such event payload file; pass --event-path or set GITHUB_EVENT_PATH") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read the event payload: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{path}: the event payload is not valid JSON ({exc}); "
                       "pass the file GitHub wrote to GITHUB_EVENT_PATH") from None


def _float_env(name: str, default: float) -> float:
    raw = settings_mod.get(name)
    try:
        return default if raw in (None, "") else max(0.0, float(raw))
    except ValueError:
        raise BadInput(f"{name}={raw!r} is not a number of seconds") from None


@group.command("handle")
@click.option("--event-name", envvar="GITHUB_EVENT_NAME", help="The event (default: $GITHUB_EVENT_NAME).")
@click.option("--event-path", type=click.Path(dir_okay=False, path_type=Path), envvar="GITHUB_EVENT_PATH",
              help="The webhook payload JSON (default: $GITHUB_EVENT_PATH).")
@click.option("--repo", envvar="GITHUB_REPOSITORY", help="owner/name (default: $GITHUB_REPOSITORY).")
@click.option("--agent-login", "agent_logins", multiple=True, envvar="REPLAYBOOK_AGENT_LOGINS",
              help="An account the coding agent opens PRs as; repeatable (default: $REPLAYBOOK_AGENT_LOGINS, "
                   "space-separated, else github.agent_logins). Its rejected PRs become incidents and its "
                   "[rule-NNNN] citations count as hits.")
@click.option("--agent-label", envvar="REPLAYBOOK_AGENT_LABEL", help="A PR with this label counts as the agent's.")
@click.option("--watch", "watched", multiple=True, envvar="REPLAYBOOK_WATCHED_WORKFLOWS",
              help="Capture failures of this workflow only (name or file); repeatable (default: "
                   "github.watched_workflows, else all).")
@click.option("--gate-agent", help="The gate replays with this agent only (one of replay.agents in the base's "
              ".replaybook.yml; default: builtin): `/replaybook replay --agent A`.")
@click.option("--gate-trials", type=int, help="The gate runs at most this many trials with the rule (1 to its "
              "after-side budget, at no lower a pass rate): `/replaybook replay --trials N`.")
@click.option("--dry-run", is_flag=True, help="Print the planned actions as JSON; call nothing (no token needed).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON.")
@click.pass_context
def handle(ctx: click.Context, event_name: str | None, event_path: Path | None, repo: str | None,
           agent_logins: tuple[str, ...], agent_label: str | None, watched: tuple[str, ...], gate_agent: str | None,
           gate_trials: int | None, dry_run: bool, as_json: bool) -> None:
    """Plan and carry out what one GitHub event asks of the bot.

    Failed workflow runs and rejected agent PRs become incident issues (one per
    failure, a comment per repeat); incident issue forms are parsed and
    normalised; every PR and merge group gets the admit gate as
    `replaybook/admit`: a check run with a GitHub App token
    (REPLAYBOOK_GITHUB_APP=1), else a commit status (it replays what changes
    what agents are told, and is never success on a fork that needs a
    replay); "Replay again" on the check run gates it again. When a capture brings
    the undistilled incidents to `github.distill_threshold`, it dispatches the
    distill workflow. Reads GITHUB_TOKEN, GITHUB_API_URL, REPLAYBOOK_BOT_LOGINS
    (the App's login, added to github.bot_logins), and the `github:` section
    of .replaybook.yml (the flags override it). Exit 1 when an action
    failed or is not enabled, and when the gate did not admit: the job that
    runs the gate can be the required check.

    Opening PRs is opt-in, with REPLAYBOOK_OPEN_PRS=1: a schedule or dispatch
    then records rule hits (one PR, one commit per batch) and runs distill over
    the open incident issues, one PR per proposed rule that closes the issues
    it cites (at most `github.max_open_rule_prs` open; needs ANTHROPIC_API_KEY);
    a push touching the playbook opens one maintenance PR when its invariants
    break. Give such a job a GitHub App token: PRs opened with the workflow's
    own GITHUB_TOKEN start no workflow, so the admit gate would never run.
    """
    from bot.gate.options import check_options

    check_options(gate_agent, gate_trials)  # before anything is read or called
    if not event_name:
        raise BadInput("no event name; pass --event-name or set GITHUB_EVENT_NAME")
    if event_path is None:
        raise BadInput("no event payload; pass --event-path or set GITHUB_EVENT_PATH")
    payload = _payload(event_path)
    config = _config(ctx.obj.settings, agent_logins, agent_label, watched)
    actions = plan(event_name, payload, config)
    if dry_run:
        emit_json({"event": event_name, "actions": ACTIONS.dump_python(actions, mode="json"), "api_calls": 0})
        return
    token = settings_mod.get("GITHUB_TOKEN")
    if not token:
        raise BadInput("GITHUB_TOKEN is not set; give the job a token (or use --dry-run to only plan)")
    if not repo or "/" not in repo:
        raise BadInput(f"repository {repo!r} is not owner/name; pass --repo or set GITHUB_REPOSITORY")
    from bot.github import handle as handle_mod
    from bot.github.adapter import PyGithubAdapter

    settings = ctx.obj.settings
    throttle = _float_env("REPLAYBOOK_GITHUB_THROTTLE", 1.0)  # 0 in tests; PyGithub's pacing otherwise
    port = PyGithubAdapter(repo, token, settings_mod.get("GITHUB_API_URL"),
                           backoff=_float_env("REPLAYBOOK_GITHUB_BACKOFF", 1.0),
                           seconds_between_requests=0.25 * throttle, seconds_between_writes=1.0 * throttle,
                           bot_logins=config.github.bot_logins)
    env = ctx.obj.env
    open_prs = (settings_mod.get("REPLAYBOOK_OPEN_PRS") or "") in ("1", "true", "yes")
    wants_distill = open_prs and any(a.kind == "distill" for a in actions)
    try:
        outcomes = handle_mod.execute(
            actions, port, root=settings.root, settings=settings, llm=_analyst(settings, env), payload=payload,
            gate=handle_mod.PrGate(settings.root, settings, env=env, agent=gate_agent, trials=gate_trials),
            step_summary=Path(summary) if (summary := settings_mod.get("GITHUB_STEP_SUMMARY")) else None,
            run_url=_run_url(), gate_pages=Path(pages) if (pages := settings_mod.get("REPLAYBOOK_GATE_PAGES")) else None,
            open_prs=open_prs, max_open_rule_prs=_max_open_rule_prs(settings), config=config,
            distiller=_distiller(settings, env) if wants_distill else None, check_runs=app_token(),
        )
    finally:
        port.close()
    if as_json:
        emit_json({"event": event_name, "api_calls": port.calls,
                   "outcomes": [{"kind": o.kind, "status": o.status, "summary": o.summary, "url": o.url,
                                 **({"verdict": o.verdict} if o.verdict else {})} for o in outcomes]})
    else:
        click.echo(table(["action", "status", "what happened"],
                         [[o.kind, o.status, o.summary + (f" ({o.url})" if o.url else "")] for o in outcomes]))
        click.echo(f"\n{port.calls} GitHub API call(s)")
    bad = [o for o in outcomes if o.status in ("failed", "not_implemented")]
    if bad:
        raise CheckFailed(f"{len(bad)} of {len(outcomes)} action(s) did not complete: "
                          + "; ".join(f"{o.kind}: {o.status}" for o in bad))
    rejected = [o for o in outcomes if o.verdict not in (None, "success")]
    if rejected:  # the job is the required check: it passes only when the gate admits
        raise CheckFailed("the admit gate did not admit: " + "; ".join(o.summary for o in rejected))


def app_token() -> bool:
    """Whether GITHUB_TOKEN is a GitHub App's installation token (REPLAYBOOK_GITHUB_APP=1): check runs, not statuses."""
    return (settings_mod.get("REPLAYBOOK_GITHUB_APP") or "").lower() in ("1", "true", "yes")


def _analyst(settings, env: Environment):
    model = settings.config.models.capture
    return config_mod.llm(env, model) if config_mod.has_model(env, model) else None


def _distiller(settings, env: Environment):
    model = settings.config.models.distill
    if not config_mod.has_model(env, model):
        return None  # the distill action says so in its outcome
    from bot.cli.distill import MAX_TOKENS

    llm = config_mod.llm(env, model, timeout_s=300)
    llm.max_tokens = MAX_TOKENS
    return llm


def _config(settings, agent_logins: tuple[str, ...], agent_label: str | None, watched: tuple[str, ...]) -> Config:
    """The config in effect: .replaybook.yml, with what the flags (or their env) give instead."""
    section = settings.config.github
    logins = [name for item in agent_logins for name in item.split()] or section.agent_logins
    github = section.model_copy(update={
        "agent_logins": logins, "agent_label": agent_label or section.agent_label, "bot_logins": _bot_logins(section),
        "watched_workflows": [name for item in watched for name in item.split()] or section.watched_workflows,
    })
    return settings.config.model_copy(update={"github": github})


def _bot_logins(section) -> list[str]:
    """github.bot_logins, plus $REPLAYBOOK_BOT_LOGINS (space-separated): the App the workflow's token belongs to."""
    extra = (settings_mod.get("REPLAYBOOK_BOT_LOGINS") or "").split()
    return list(dict.fromkeys([*section.bot_logins, *extra]))


def _max_open_rule_prs(settings) -> int:
    raw = settings_mod.get("REPLAYBOOK_MAX_OPEN_RULE_PRS") or str(settings.config.github.max_open_rule_prs)
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise BadInput(f"REPLAYBOOK_MAX_OPEN_RULE_PRS={raw!r} is not a whole number of PRs (0 or more)")
    return value


def _run_url() -> str | None:
    parts = [settings_mod.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else None
