"""Carrying out planned actions against GitHub: ``execute(actions, port, …)``.

``bot.github.events.plan`` decides what one delivery means; this module does
it through a :class:`~bot.github.port.GitHubPort`, so it never imports
PyGithub or click. Capture, the issue form, the gate and the distill
threshold live here; the pull requests the bot opens (rule PRs, the hits PR,
the maintenance PR) live in :mod:`bot.github.prs`. Every write is idempotent: the bot finds its own issues
and comments again by hidden marker (:func:`~bot.github.port.marker`), so
a redelivered event changes nothing and a retried run of a job comments once.

Text from payloads and logs is untrusted. It only ever reaches GitHub inside
code fences or code spans (no @mentions, links or images from a log), and
reaches ``git`` only as argv items after option-like names are refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Sequence
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from bot import capture as capture_mod
from bot.errors import BadInput, ReplaybookError
from bot.github import dashboard, issue_form, playbook_diff, prs
from bot.github.context import (
    MAX_OPEN_RULE_PRS,
    Context,
    GateRunner,
    GateVerdict,
    Outcome,
    Status,
    code,
    fenced,
)
from bot.github.events import (
    Action,
    CaptureRejectedPr,
    CaptureRun,
    CheckPlaybookInvariants,
    Distill,
    DistillIfDue,
    GateRulePr,
    GitHubConfig,
    Ignore,
    ParseIncidentIssue,
    RecordHits,
    UpdateDashboard,
    DashboardTick,
)
from bot.github.port import GitHubError, GitHubPort, Job, fit_body, marker
from bot.incident import Incident
from bot.neutralise import neutralise

GATE_CONTEXT = "replaybook/admit"
GATE_MARKER = marker("gate")
FORM_MARKER = marker("incident-form")
SUMMARY_LIMIT = 1 << 20  # GitHub's cap on one step summary


def execute(
    actions: Sequence[Action],
    port: GitHubPort,
    *,
    root: Path,
    settings: Any,
    llm: capture_mod.Analyst | None = None,
    payload: dict | None = None,
    gate: GateRunner | None = None,
    step_summary: Path | None = None,
    run_url: str | None = None,
    distiller: Any = None,
    max_open_rule_prs: int = MAX_OPEN_RULE_PRS,
    open_prs: bool = True,
    today: date | None = None,
    config: GitHubConfig | None = None,
) -> list[Outcome]:
    """Carry out ``actions`` in order; one that fails on GitHub becomes a ``failed`` outcome, the rest still run.

    ``payload`` is the delivery's JSON (a rejected PR's title and body come from
    it), ``gate`` runs the gate for a rule PR (default: :class:`GitGate` on
    ``root``), and ``step_summary`` is ``$GITHUB_STEP_SUMMARY``. ``distiller``
    is the model distill asks; ``open_prs`` off leaves distill, hits and the
    invariant check undone (see ``replaybook github handle``). ``config``
    names the agent's accounts (for rule hits).
    """
    ctx = Context(port=port, root=Path(root), settings=settings, llm=llm, payload=payload, gate=gate,
                  step_summary=step_summary, run_url=run_url, distiller=distiller,
                  max_open_rule_prs=max_open_rule_prs, open_prs=open_prs, today=today, config=config)
    outcomes: list[Outcome] = []
    for action in actions:
        try:
            outcomes += _HANDLERS[type(action)](action, ctx)
        except GitHubError as exc:
            outcomes.append(Outcome(action.kind, "failed", code(exc.render(), 400)))
    return outcomes


# ------------------------------------------------------------------ markdown helpers


def _slug(name: str) -> str:
    """A marker-safe, collision-proof key part for a job name such as ``test (3.11, ubuntu)``."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:48] or "job"
    return f"{readable}-{zlib.crc32(name.encode()):08x}"


# ------------------------------------------------------------------ capture_run


def _capture_run(action: CaptureRun, ctx: Context) -> list[Outcome]:
    jobs = ctx.port.failed_jobs(action.run_id)
    if not jobs:
        return [Outcome(action.kind, "skipped", f"run {action.run_id}: no finished job failed or timed out in its "
                                                "latest attempt, so there is no log to capture", action.html_url)]
    return [_capture_job(action, job, ctx) for job in jobs]


def _capture_job(action: CaptureRun, job: Job, ctx: Context) -> Outcome:
    issue_key = f"run-{action.run_id}-job-{_slug(job.name)}"
    with _claimed(ctx, issue_key):  # concurrent deliveries of one failure take turns: one issue, one comment
        return _capture_claimed(action, job, ctx, issue_key)


def _captured_already(action: CaptureRun, job: Job, ctx: Context, issue_key: str) -> tuple[Outcome | None, Any]:
    """An ``unchanged`` outcome when this attempt is already on its issue; and the issue, if any."""
    found = ctx.port.find_issue_by_marker(marker(issue_key))
    attempt_mark = marker(f"{action.key}-job-{_slug(job.name)}")
    if found is not None and (
        attempt_mark in found.body or ctx.port.find_comment_by_marker(found.number, attempt_mark) is not None
    ):
        what = f"run {action.run_id} attempt {action.run_attempt}, job {job.name!r}"
        return Outcome(action.kind, "unchanged", f"{what}: already on #{found.number}", found.url), found
    return None, found


@contextlib.contextmanager
def _claimed(ctx: Context, key: str):
    ctx.port.claim(key)
    try:
        yield
    finally:
        ctx.port.release(key)


def _admitted(ctx: Context) -> list:
    """The checked-out playbook's admitted rules, which capture's model may name in ``repeat_of``
    (none without a model, and a broken playbook only costs the link)."""
    from bot.playbook import Playbook

    if ctx.llm is None:
        return []
    try:
        return Playbook(ctx.settings.path("playbook"), root=ctx.root, cap=ctx.settings.cap).admitted()
    except BadInput:
        return []


def _capture_claimed(action: CaptureRun, job: Job, ctx: Context, issue_key: str) -> Outcome:
    issue_mark = marker(issue_key)
    attempt_mark = marker(f"{action.key}-job-{_slug(job.name)}")
    what = f"run {action.run_id} attempt {action.run_attempt}, job {job.name!r}"
    done, found = _captured_already(action, job, ctx, issue_key)  # under the claim: no other run is writing it
    if done is not None:
        return done
    evidence = _job_evidence(ctx.port, job)
    incident, reason = capture_mod.draft(evidence, ctx.llm, source_url=action.html_url, key=issue_key,
                                         rules=_admitted(ctx))
    incident = _neutral(incident)
    summary = _run_summary(action, job, incident, reason)
    excerpt = f"**Evidence** (from the job log)\n\n{fenced(evidence.excerpt)}"
    if found is None:
        body = fit_body({"marker": f"{issue_mark}\n{attempt_mark}", "summary": summary, "evidence": excerpt,
                         "block": issue_form.normalised_block(incident)})
        title = neutralise(capture_mod.one_liner(f"CI failure: {action.workflow} / {job.name}", 200))
        issue = ctx.port.create_issue(title, body, [ctx.labels.incident])
        ctx.new_incidents += 1
        return Outcome(action.kind, "done", f"{what}: filed #{issue.number}", issue.url)
    body = fit_body({"marker": attempt_mark, "summary": f"Failed again.\n\n{summary}", "evidence": excerpt})
    comment = ctx.port.add_comment(found.number, body)
    return Outcome(action.kind, "done", f"{what}: commented on #{found.number} (a repeat)", comment.url)


_FREE_TEXT = ("task", "trigger", "believed", "actual", "evidence")


def _neutral(incident: Incident) -> Incident:
    """``incident`` with every free-text field neutralised: its block lands in a body the bot speaks in."""
    update = {name: neutralise(value) for name in _FREE_TEXT if isinstance(value := getattr(incident, name), str)}
    return incident.model_copy(update=update)


def _job_evidence(port: GitHubPort, job: Job) -> capture_mod.Evidence:
    """Evidence from the job's log; a log that is gone or empty still gives evidence, never a lost event."""
    step = job.failed_steps[0].name if job.failed_steps else None
    try:
        text = port.job_log(job.id)
        evidence = capture_mod.evidence_from_log(io.BytesIO(text.encode("utf-8", "replace")), name=f"job {job.name}")
    except GitHubError as exc:
        if exc.status not in (404, 410):
            raise
        why = f"its log could not be fetched (HTTP {exc.status}; logs expire, and unfinished jobs have none)"
        evidence = capture_mod.Evidence(trigger=capture_mod.one_liner(f"CI job {job.name} failed; {why}"),
                                        excerpt=f"job: {job.name}\nfailing step: {step or 'unknown'}\n{why}",
                                        source_kind="workflow_run")
    except BadInput:
        evidence = capture_mod.Evidence(trigger=capture_mod.one_liner(f"CI job {job.name} failed with an empty log"),
                                        excerpt=f"job: {job.name}\nthe log is empty", source_kind="workflow_run")
    return dataclasses.replace(evidence, failing_step=evidence.failing_step or step,
                               task_hint=evidence.task_hint or f"CI job {job.name}")


def _run_summary(action: CaptureRun, job: Job, incident: Incident, reason: str | None) -> str:
    lines = [
        f"**Workflow:** {code(action.workflow)} · **job:** {code(job.name)} · "
        f"**attempt:** {action.run_attempt} · **conclusion:** {action.conclusion}",
        f"**Run:** {action.html_url} · **commit:** `{action.head_sha[:12]}`",
        f"**Trigger:** {code(incident.trigger)}",
    ]
    if incident.triage:
        lines += ["", "> [!IMPORTANT]",
                  f"> Needs triage: {reason or 'capture could not state the belief delta'}. Fill in `believed`, "
                  "`actual` and `failure_class` in the yaml block below; the bot keeps your edit."]
    return "\n".join(lines)


# ------------------------------------------------------------------ capture_rejected_pr


def _capture_rejected_pr(action: CaptureRejectedPr, ctx: Context) -> list[Outcome]:
    with _claimed(ctx, action.key):
        return _capture_rejected_claimed(action, ctx)


def _capture_rejected_claimed(action: CaptureRejectedPr, ctx: Context) -> list[Outcome]:
    mark = marker(action.key)
    what = f"PR #{action.number} ({action.reason.replace('_', ' ')})"
    found = ctx.port.find_issue_by_marker(mark)
    if found is not None:
        return [Outcome(action.kind, "unchanged", f"{what}: already filed as #{found.number}", found.url)]
    pr = (ctx.payload or {}).get("pull_request") or {}
    review = (ctx.payload or {}).get("review") or {}
    title = str(pr.get("title") or f"pull request #{action.number}")
    comments = [c for c in ctx.port.review_comments(action.number)
                if action.review_id is None or c.review_id in (None, action.review_id)]
    review_text = "\n".join([str(review.get("body") or ""), *(f"{c.path}:{c.line or ''} {c.body}" for c in comments)])
    stat = "\n".join(f"{f.filename} | +{f.additions} -{f.deletions} ({f.status})"
                     for f in ctx.port.pull_files(action.number)[:40])
    evidence = capture_mod.evidence_from_pr(title, str(pr.get("body") or ""), review_text.strip() or None, stat)
    incident, reason = capture_mod.draft(evidence, ctx.llm, source_url=action.html_url, key=action.key,
                                         rules=_admitted(ctx))
    incident = _neutral(incident)
    summary = "\n".join([
        f"**Pull request:** #{action.number} · **why:** {action.reason.replace('_', ' ')}"
        + (f" · {action.html_url}" if action.html_url else ""),
        f"**Trigger:** {code(incident.trigger)}",
        *(["", "> [!IMPORTANT]", f"> Needs triage: {reason}. Fill in `believed`, `actual` and `failure_class` "
           "in the yaml block below."] if incident.triage else []),
    ])
    body = fit_body({"marker": mark, "summary": summary,
                     "evidence": f"**Evidence** (title, review, body, diff stat)\n\n{fenced(evidence.excerpt)}",
                     "block": issue_form.normalised_block(incident)})
    issue = ctx.port.create_issue(f"Rejected agent PR #{action.number}: "
                                  + neutralise(capture_mod.one_liner(title, 160)), body,
                                  [ctx.labels.incident])
    ctx.new_incidents += 1
    return [Outcome(action.kind, "done", f"{what}: filed #{issue.number}", issue.url)]


# ------------------------------------------------------------------ parse_incident_issue


def _parse_issue(action: ParseIncidentIssue, ctx: Context) -> list[Outcome]:
    issue = ctx.port.get_issue(action.number)  # fresh: the payload's body may predate a later edit
    created = action.created_at or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    data, problems = issue_form.parse_incident_issue(issue.body, number=action.number, created_at=created,
                                                     html_url=action.html_url)
    invalid = ctx.labels.invalid
    others = [name for name in issue.labels if name != invalid]
    if problems:
        listed = "\n".join(f"- {code(p, 500)}" for p in problems)
        text = (f"**This incident cannot be read yet** ({len(problems)} problem(s)):\n\n{listed}\n\n"
                "Edit the issue and fix the sections named above (keep the `### …` headings the form made); "
                "the bot reads it again on every edit and removes the `" + invalid + "` label once it parses.")
        ctx.port.upsert_comment(action.number, FORM_MARKER, text)
        if invalid not in issue.labels:
            ctx.port.update_issue(action.number, labels=[*others, invalid])
        return [Outcome(action.kind, "done", f"issue #{action.number}: {len(problems)} problem(s); labelled "
                                             f"{invalid} and listed them in one comment", issue.url)]
    body = issue_form.replace_block(issue.body, Incident.model_validate(data))
    changed_body = body != issue.body
    was_invalid = invalid in issue.labels
    if not changed_body and not was_invalid:
        return [Outcome(action.kind, "unchanged", f"issue #{action.number}: parses; block already current", issue.url)]
    ctx.port.update_issue(action.number, body=body if changed_body else None, labels=others if was_invalid else None)
    if was_invalid or not issue_form.has_block(issue.body):
        ctx.new_incidents += 1  # an incident distill can read for the first time
    if was_invalid:
        ctx.port.upsert_comment(action.number, FORM_MARKER, "**Fixed:** the incident now parses; thank you.")
    done = ["normalised block written" if changed_body else "block already current"]
    done += [f"removed {invalid}"] if was_invalid else []
    return [Outcome(action.kind, "done", f"issue #{action.number}: parses; " + ", ".join(done), issue.url)]


# ------------------------------------------------------------------ gate_rule_pr


def _gate_rule_pr(action: GateRulePr, ctx: Context) -> list[Outcome]:
    where = f"PR #{action.number}" if action.number else f"merge group {action.head_sha[:12]}"
    # Every PR comes here: the gate passes at once when nothing agents are told changes, and answers
    # error (never success) when a replay is needed but this run has no secrets (a fork).
    runner = ctx.gate or GitGate(ctx.root, ctx.settings)
    try:
        verdict = runner(action)
    except ReplaybookError as exc:
        verdict = GateVerdict("error", f"the gate could not decide: {exc.message}",
                              f"## Replaybook gate: could not decide\n\n{fenced(exc.render())}\n")
    description = capture_mod.one_liner(verdict.description, 140)
    if ctx.step_summary is not None:  # first: a fork PR's read-only token fails the writes below
        with open(ctx.step_summary, "a", encoding="utf-8") as f:
            f.write(verdict.report[: SUMMARY_LIMIT // 2] + "\n")
    ctx.port.set_status(action.head_sha, verdict.state, GATE_CONTEXT, description, ctx.run_url)
    url = None
    if action.number is not None:
        url = ctx.port.upsert_comment(action.number, GATE_MARKER, fit_body({"report": verdict.report},
                                                                           trim_first=("report",))).url
    status: Status = "failed" if verdict.state == "error" else "done"
    return [Outcome(action.kind, status, f"{where}: {verdict.state}: {description}", url, verdict=verdict.state)]


class GitGate:
    """The gate on what a PR changes in the admitted playbook, in the checked-out PR head at ``root``.

    What to replay comes from :func:`bot.github.playbook_diff.playbook_change`:
    the rules whose meaning differs from where the PR left the base, by
    parsing, never by git's file status (the workflow must fetch the base
    commit: ``fetch-depth: 0``). The cap, the playbook the rules are judged
    against, the scenarios and the incidents are read with the base commit's
    ``.replaybook.yml``, never the PR's; the playbook itself is the base
    commit's, read with ``git archive`` into a temporary folder. Without
    secrets (a fork) or without ``ANTHROPIC_API_KEY`` (and no ``replay``
    given) a PR that needs a replay gets ``error``: a simulated replay never
    admits a real rule.
    """

    def __init__(self, root: Path, settings: Any, replay: Any = None, api_key: str | None = None,
                 base_url: str | None = None):
        self.root, self.settings, self.replay, self.api_key = Path(root), settings, replay, api_key
        self.base_url = base_url  # ANTHROPIC_BASE_URL: a proxy in front of the Messages API
        self.git = playbook_diff.Git(self.root)

    def change(self, base_sha: str) -> playbook_diff.Change:
        return playbook_diff.playbook_change(self.git, base_sha)

    def changed_rules(self, base_sha: str) -> list[str]:
        """The head's rule files whose meaning the PR changes (what the gate replays)."""
        return self.change(base_sha).gated

    def base_settings(self, change: playbook_diff.Change) -> Any:
        from bot.config import Settings

        return Settings(self.root, change.base_config, None)

    def base_playbook(self, base_sha: str, into: Path, folder: str | None = None) -> Path:
        folder = (folder or self.settings.config.paths.playbook).strip("/")
        if self.git.tree(base_sha, folder):
            data = self.git("archive", "--format=tar", base_sha, "--", folder)
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(into, filter="data")
        (into / folder).mkdir(parents=True, exist_ok=True)  # a base without a playbook: an empty one
        return into / folder

    def judged_against(self, base_sha: str, names: list[str], into: Path, settings: Any = None) -> Any:
        """The base commit's playbook, less each rule the PR rewrites (judged as new), under the base's config."""
        from bot.incident import IncidentStore
        from bot.playbook import Playbook

        settings = settings or self.settings
        folder = self.base_playbook(base_sha, into, settings.config.paths.playbook)
        for name in names:
            (folder / "rules" / Path(name).name).unlink(missing_ok=True)
        return Playbook(folder, root=self.root, cap=settings.cap, incidents=IncidentStore(settings.path("incidents")))

    def __call__(self, action: GateRulePr) -> GateVerdict:
        base = action.base_sha or ""
        change = self.change(base)
        settings = self.base_settings(change)
        cap = settings.cap
        if change.refused:
            listed = "\n".join(f"- {code(p, 300)}" for p in change.refused)
            return GateVerdict("failure", "refused: " + change.refused[0],
                               f"## Replaybook gate: refused\n\n{listed}\n\nReplace each link with the file it "
                               "points to: the gate judges exactly the text agents are given.\n")
        if change.head_count > cap:
            # Two PRs that each fit can overflow together: a merge group is checked on the merged result.
            what = "the merged result of this merge group" if action.merge_group else "this PR"
            return GateVerdict("failure", f"{change.head_count} rules past the cap of {cap}",
                               f"## Replaybook gate: over the cap\n\nWith {what} the playbook holds "
                               f"{change.head_count} admitted rules; the cap is {cap}. Merge rule PRs one at a time "
                               "(each retires the coldest rule it displaces), or run distill again to refresh this "
                               "PR against the default branch.\n")
        if not change.gated:
            return _nothing_to_replay(change)
        if not action.secrets:
            why = "a fork" if action.fork else "a Dependabot PR"
            return GateVerdict("error", "replay could not run: no secrets on fork PRs",
                               f"## Replaybook gate: could not run\n\nThis is {why}, so the workflow gets no "
                               "secrets and the replay cannot run. The gate reports `error`, never success. A "
                               "maintainer can push the branch to this repository to run it.\n\n"
                               + _listing(change))
        return self._replay(action, change, settings)

    def _replay(self, action: GateRulePr, change: playbook_diff.Change, settings: Any) -> GateVerdict:
        from bot import gate as gate_mod
        from bot import gate_report
        from bot.replay import isolation
        from bot.replay.engine import ReplayOptions

        replay = self.replay
        if replay is None:
            if not self.api_key:
                raise BadInput("ANTHROPIC_API_KEY is not set, so the replay cannot run")
            replay = ReplayOptions(model=settings.config.models.agent, api_key=self.api_key,
                                   sandbox=settings.config.replay.sandbox,  # the base's: a PR cannot lift it
                                   **({"upstream_url": self.base_url} if self.base_url else {}))
        if isolation.backend(replay.sandbox).name == "none":
            return GateVerdict("failure", "the gate refuses to replay without a sandbox",
                               "## Replaybook gate: no sandbox\n\nThe replay was asked to run with `--sandbox none` "
                               "(`REPLAYBOOK_SANDBOX` or `replay.sandbox` in `.replaybook.yml`). A rule PR's fixture is "
                               "code anyone who can push a branch controls, and it would run beside the API key, so "
                               "the gate never admits from an unisolated replay. Use `bwrap` (see docs/install.md) "
                               "or `docker`.\n")
        opts = gate_mod.GateOptions(replay=replay)
        results = []
        with tempfile.TemporaryDirectory(prefix="replaybook-base-") as tmp:
            book = self.judged_against(action.base_sha or "", change.gated, Path(tmp), settings)
            for name in change.gated:
                results.append(gate_mod.run_gate(book, self.root / name, settings.path("scenarios"), opts))
        decisions = {r.decision for r in results}
        state = "error" if "error" in decisions else "failure" if "reject" in decisions else "success"
        word = {"success": "admit", "failure": "reject", "error": "could not decide"}[state]
        ids = ", ".join(f"{r.rule_id} {r.decision}" for r in results)
        report = "\n\n".join(gate_report.markdown(r, opts.test) for r in results)
        return GateVerdict(state, f"{word}: {ids}", report)


def _listing(change: playbook_diff.Change) -> str:
    return "\n".join(f"- {code(path, 200)}: {code(change.why.get(path, 'changed'), 200)}" for path in change.gated)


def _nothing_to_replay(change: playbook_diff.Change) -> GateVerdict:
    if change.bookkeeping:
        description = "no rule changed (bookkeeping only)"
        detail = "Only `last_hit` moved on " + ", ".join(change.bookkeeping) + ": nothing to replay."
    else:
        description = "no rule changed"
        detail = "No admitted rule, and no scenario a rule replays, changed: nothing to replay."
    if change.removed:
        detail += " No longer admitted: " + ", ".join(change.removed) + "."
    return GateVerdict("success", description, f"## Replaybook gate\n\n{detail}\n")


# ------------------------------------------------------------------ distill_if_due


def _distill_if_due(action: DistillIfDue, ctx: Context) -> list[Outcome]:
    """Dispatch distill when this delivery's new incidents brought the undistilled ones to the threshold.

    Undistilled: open incident issues that parse and that no open rule PR
    cites. Only the delivery that crosses the threshold dispatches, so twenty
    more incidents while distill is refused start it once, not twenty times
    (the weekly schedule picks them up).
    """
    if ctx.new_incidents == 0:
        return [Outcome(action.kind, "skipped", "no new incident in this delivery")]
    waiting = [i.number for i in ctx.port.list_issues(ctx.labels.incident, "open") if ctx.labels.invalid not in i.labels]
    if len(waiting) >= action.threshold:  # only then is it worth a request to learn which ones PRs cite
        cited = {c for pr in ctx.port.list_prs("open") if prs.is_rule_pr(pr, prs.bot_logins(ctx))
                 for c in prs.cites_of(pr)}
        waiting = [n for n in waiting if f"gh-{n}" not in cited]
    count = len(waiting)
    if count < action.threshold or count - ctx.new_incidents >= action.threshold:
        return [Outcome(action.kind, "skipped", f"{count} undistilled incident(s); distill starts when "
                                                f"{action.threshold} are reached (github.distill_threshold)")]
    branch = ((ctx.payload or {}).get("repository") or {}).get("default_branch") or ctx.port.default_branch()
    ctx.port.dispatch_workflow(action.workflow, str(branch), {"reason": "threshold"})
    return [Outcome(action.kind, "done", f"{count} undistilled incident(s) reached the threshold of "
                                         f"{action.threshold}: dispatched {action.workflow}")]


# ------------------------------------------------------------------ the rest


def _pr_writer(handler: Callable[[Any, Context], list[Outcome]]) -> Callable[[Any, Context], list[Outcome]]:
    """``handler``, or a clear "not enabled" when this run may not open pull requests."""

    def run(action: Any, ctx: Context) -> list[Outcome]:
        if not ctx.open_prs:
            return [Outcome(action.kind, "not_implemented",
                            "not enabled: set REPLAYBOOK_OPEN_PRS=1 and give the job a GitHub App token as "
                            "GITHUB_TOKEN; PRs opened with the workflow's own token start no workflow, so the "
                            "admit gate would never run on them")]
        return handler(action, ctx)

    return run


def _ignore(action: Ignore, ctx: Context) -> list[Outcome]:
    return [Outcome(action.kind, "skipped", action.reason)]


_HANDLERS: dict[type, Callable[[Any, Context], list[Outcome]]] = {
    CaptureRun: _capture_run,
    CaptureRejectedPr: _capture_rejected_pr,
    ParseIncidentIssue: _parse_issue,
    GateRulePr: _gate_rule_pr,
    CheckPlaybookInvariants: _pr_writer(prs.check_invariants),
    Distill: _pr_writer(prs.distill),
    RecordHits: _pr_writer(prs.record_hits),
    DistillIfDue: _distill_if_due,
    UpdateDashboard: dashboard.update,
    DashboardTick: dashboard.act,
    Ignore: _ignore,
}

__all__ = ["GATE_CONTEXT", "GATE_MARKER", "GateVerdict", "GitGate", "Outcome", "execute"]
