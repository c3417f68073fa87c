"""``replaybook doctor``: check the set-up and say how to fix each finding (see :mod:`bot.github.doctor`)."""

from __future__ import annotations

from pathlib import Path

import click

from bot import config as config_mod
from bot import settings as settings_mod
from bot.cli.github import _float_env, app_token
from bot.cli.output import report
from bot.errors import BadInput, CheckFailed
from bot.github import doctor as doctor_mod
from bot.github import init as init_mod


@click.command("doctor")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--repo", envvar="GITHUB_REPOSITORY",
              help="owner/name whose GitHub settings to check (default: $GITHUB_REPOSITORY); needs GITHUB_TOKEN.")
@click.option("--offline", is_flag=True, help="Check only this machine and the files; ask GitHub nothing.")
@click.option("--local-actions", is_flag=True, hidden=True,
              help="Compare the workflows with init's ./actions/NAME form (Replaybook's own repository).")
@click.option("--actions-sha", envvar=init_mod.ACTIONS_SHA_ENV,
              help="The commit init pins the actions to, for the workflow comparison (as `init --actions-sha`).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.pass_context
def command(ctx: click.Context, path: Path | None, repo: str | None, offline: bool, local_actions: bool,
            actions_sha: str | None, as_json: bool) -> None:
    """Check the set-up of PATH (default: the repository root) and say how to fix each finding.

    On this machine: the replay sandbox starts (bubblewrap and its user
    namespaces, socat, strace: the checks a replay makes), `.replaybook.yml`
    is valid, and the workflows are what `replaybook init --check` expects.
    The workflow that opens PRs must mint a GitHub App token: PRs opened with
    GITHUB_TOKEN alone start no workflow, so the gate would never run. With
    GITHUB_TOKEN and --repo (a workflow sets both), also on GitHub: the App's
    variable is set (or REPLAYBOOK_GITHUB_APP=1 says this job's token is the
    App's), `replaybook/admit` (or the `admit` job) is a required check on the
    default branch, the admit workflow runs on `merge_group` when a merge
    queue is on, and each secret the workflows read exists (names only). What
    the token may not read is "unknown", with how to check it by hand.

    Exit 0 when nothing failed, 1 with findings (an invalid .replaybook.yml is
    one), 2 on bad input.
    """
    root = path or ctx.find_root().params.get("root")
    if root is None:
        found = config_mod.find(Path.cwd().resolve())
        root = found.parent if found else Path.cwd()
    if actions_sha is not None:
        init_mod.actions_commit(actions_sha)  # 40 hex digits, or bad input (exit 2) before any check
    if repo is not None and (repo.count("/") != 1 or not all(repo.split("/"))):
        raise BadInput(f"repository {repo!r} is not owner/name; pass --repo OWNER/NAME or set GITHUB_REPOSITORY")
    port = None if offline else _port(repo)
    context = doctor_mod.Context(port, app_token=app_token(), app_id_set=bool(settings_mod.get("REPLAYBOOK_APP_ID")))
    try:
        result = doctor_mod.run(root, context, local_actions=local_actions, actions_sha=actions_sha)
    finally:
        if port is not None:
            port.close()
    report(result.as_json() if as_json else result.markdown())
    if result.failed:
        raise CheckFailed(f"{len(result.failed)} finding(s): " + ", ".join(f.check for f in result.failed))


def _port(repo: str | None):
    token = settings_mod.get("GITHUB_TOKEN")
    if not token or not repo:
        return None  # the GitHub checks say they need a token (and a repository)
    from bot.github.adapter import PyGithubAdapter

    throttle = _float_env("REPLAYBOOK_GITHUB_THROTTLE", 1.0)
    return PyGithubAdapter(repo, token, settings_mod.get("GITHUB_API_URL"), retries=1,
                           backoff=_float_env("REPLAYBOOK_GITHUB_BACKOFF", 1.0),
                           seconds_between_requests=0.25 * throttle, seconds_between_writes=1.0 * throttle)
