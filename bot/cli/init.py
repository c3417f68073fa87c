"""``replaybook init``: set a repository up for Replaybook (see :mod:`bot.github.init`)."""

from __future__ import annotations

from pathlib import Path

import click

from bot.errors import CheckFailed
from bot.github import init as init_mod


@click.command("init")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; list missing, stale and changed files and exit 1 "
                                            "when init has something to do.")
@click.option("--force", is_flag=True, help="Also overwrite generated files that were changed by hand.")
@click.option("--watch", "watched", multiple=True,
              help="A workflow whose failures become incidents; repeatable (default: every workflow in "
                   ".github/workflows/ that is not Replaybook's own).")
@click.option("--local-actions", is_flag=True, hidden=True,
              help="Reference the actions as ./actions/NAME (Replaybook's own repository).")
@click.option("--actions-sha", envvar=init_mod.ACTIONS_SHA_ENV,
              help="The commit (40 hex digits) to pin the actions to (default: $REPLAYBOOK_ACTIONS_SHA, "
                   "else the commit this build was made from, recorded in the wheel or sdist).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_context
def command(ctx: click.Context, path: Path | None, check: bool, force: bool, watched: tuple[str, ...],
            local_actions: bool, actions_sha: str | None, as_json: bool) -> None:
    """Set up the repository at PATH (default: the current folder) for Replaybook on GitHub.

    Run in a subfolder (packages/api), it sets up the repository's root: the nearest folder above holding
    .git, where GitHub reads workflows. Each --watch name must be a workflow in .github/workflows/ (its
    `name:`, else its file name), or init exits 2 naming those present.

    Writes .replaybook.yml, the playbook folder with an empty PLAYBOOK.md, a
    scenarios/ README, the incident issue form and four workflows
    (replaybook-capture, -distill, -admit, -replay) that use the composite
    actions pinned to the commit of this version's tag. Run it again after upgrading: a file init
    wrote and nobody changed is updated; a changed one is refused (exit 2,
    nothing written) unless --force. .replaybook.yml and the playbook are
    written only when missing. With --check nothing is written; exit 1 when
    init has something to do.
    """
    start = path or ctx.find_root().params.get("root") or Path.cwd()
    root = init_mod.repository_root(start) or start
    if root != Path(start).resolve():
        click.echo(f"note: {start} is inside the git repository at {root}; setting up the repository's root "
                   "(GitHub reads workflows only from its .github/workflows/)", err=True)
    plan = init_mod.plan(root, local_actions=local_actions, watched=list(watched) or None, actions_sha=actions_sha)
    if check:
        _show(plan, as_json, done=False)
        if plan.needs_work:
            raise CheckFailed(f"{len(plan.needs_work)} file(s) need `replaybook init`: "
                              + ", ".join(f"{f.path} ({f.state})" for f in plan.needs_work))
        return
    init_mod.apply(plan, force=force)
    _show(plan, as_json, done=True)
    kept = init_mod.agent_files(plan.root)
    if kept and not as_json and any(f.path == ".replaybook.yml" and f.state == "missing" for f in plan.files):
        click.echo(f"\n.replaybook.yml lists `render: {kept}`: `replaybook playbook render` keeps the playbook section "
                   "in those agents' files and `replaybook playbook check` fails when one is stale.")
    if not as_json:
        click.echo(f"\nReplaybook {init_mod.version()}: {len(plan.needs_work)} file(s) written. "
                   f"`.replaybook/` (local caches and traces) is in .gitignore. Next: {init_mod.docs_url()} "
                   "(the GitHub App, the secrets, the required `admit` check).")


def _show(plan: init_mod.Plan, as_json: bool, *, done: bool) -> None:
    if as_json:
        click.echo(init_mod.manifest(plan))
    else:
        click.echo(plan.report(done=done))
