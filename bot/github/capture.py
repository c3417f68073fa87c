"""Capture on GitHub: failed runs and rejected agent PRs become incident issues; the incident form is read.

One issue per failure, found again by its hidden marker; a repeat is a
comment on it. Concurrent deliveries of one failure take turns through a
claim, so they file one issue. Text from logs and PRs is untrusted: it is
neutralised, and reaches GitHub only inside code fences or spans.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import zlib
from datetime import datetime, timezone
from typing import Any

from bot._util.text_safety import neutralise
from bot.errors import BadInput
from bot.github import issue_form
from bot.github.context import Outcome, RunContext, code, fenced
from bot.github.events import CaptureRejectedPr, CaptureRun, ParseIncidentIssue
from bot.github.port import GitHubError, GitHubPort, Job, fit_body, marker
from bot.incident import capture as capture_mod
from bot.incident.store import Incident

FORM_MARKER = marker("incident-form")


def _slug(name: str) -> str:
    """A marker-safe, collision-proof key part for a job name such as ``test (3.11, ubuntu)``."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:48] or "job"
    return f"{readable}-{zlib.crc32(name.encode()):08x}"


def capture_run(action: CaptureRun, ctx: RunContext) -> list[Outcome]:
    jobs = ctx.port.failed_jobs(action.run_id)
    if not jobs:
        return [Outcome(action.kind, "skipped", f"run {action.run_id}: no finished job failed or timed out in its "
                                                "latest attempt, so there is no log to capture", action.html_url)]
    return [_capture_job(action, job, ctx) for job in jobs]


def _capture_job(action: CaptureRun, job: Job, ctx: RunContext) -> Outcome:
    issue_key = f"run-{action.run_id}-job-{_slug(job.name)}"
    with _claimed(ctx, issue_key):  # concurrent deliveries of one failure take turns: one issue, one comment
        return _capture_claimed(action, job, ctx, issue_key)


def _captured_already(action: CaptureRun, job: Job, ctx: RunContext, issue_key: str) -> tuple[Outcome | None, Any]:
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
def _claimed(ctx: RunContext, key: str):
    ctx.port.claim(key)
    try:
        yield
    finally:
        ctx.port.release(key)


def _admitted(ctx: RunContext) -> list:
    """The checked-out playbook's admitted rules, which capture's model may name in ``repeat_of``
    (none without a model, and a broken playbook only costs the link)."""
    from bot.playbook.store import Playbook

    if ctx.llm is None:
        return []
    try:
        return Playbook(ctx.settings.path("playbook"), root=ctx.root, cap=ctx.settings.cap).admitted()
    except BadInput:
        return []


def _capture_claimed(action: CaptureRun, job: Job, ctx: RunContext, issue_key: str) -> Outcome:
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


def capture_rejected_pr(action: CaptureRejectedPr, ctx: RunContext) -> list[Outcome]:
    with _claimed(ctx, action.key):
        return _capture_rejected_claimed(action, ctx)


def _capture_rejected_claimed(action: CaptureRejectedPr, ctx: RunContext) -> list[Outcome]:
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


def parse_issue(action: ParseIncidentIssue, ctx: RunContext) -> list[Outcome]:
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
