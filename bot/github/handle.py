"""Carrying out planned actions against GitHub: ``execute(actions, port, …)``.

``bot.github.events.plan`` decides what one delivery means; this module does
it through a :class:`~bot.github.port.GitHubPort`, so it never imports
PyGithub or click. Every write is idempotent: the bot finds its own issues
and comments again by hidden marker (:func:`~bot.github.port.marker`), so
a redelivered event changes nothing and a retried run of a job comments once.

Text from payloads and logs is untrusted. It only ever reaches GitHub inside
code fences or code spans (no @mentions, links or images from a log), and
reaches ``git`` only as argv items after option-like names are refused.
"""

from __future__ import annotations

import dataclasses
import filecmp
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Literal

from bot import capture as capture_mod
from bot.errors import BadInput, ReplaybookError
from bot.github import issue_form
from bot.github.events import (
    Action,
    CaptureRejectedPr,
    CaptureRun,
    CheckPlaybookInvariants,
    Distill,
    GateRulePr,
    Ignore,
    ParseIncidentIssue,
)
from bot.github.port import GitHubError, GitHubPort, Job, PullRef, fit_body, marker, marker_keys
from bot.incident import Incident

Status = Literal["done", "unchanged", "skipped", "failed", "not_implemented"]
GATE_CONTEXT = "replaybook/admit"
GATE_MARKER = marker("gate")
FORM_MARKER = marker("incident-form")
NOT_YET = "not implemented yet (issue #6)"
SUMMARY_LIMIT = 1 << 20  # GitHub's cap on one step summary
MAINTENANCE_KEY = "maintenance"
MAINTENANCE_MARKER = marker(MAINTENANCE_KEY)
BRANCH_PREFIX = "replaybook/"
MAX_OPEN_RULE_PRS = 5


@dataclass(frozen=True)
class Outcome:
    """What one action did. ``status`` is ``failed`` or ``not_implemented`` when nobody should rely on it."""

    kind: str
    status: Status
    summary: str
    url: str | None = None


@dataclass(frozen=True)
class GateVerdict:
    """A gate run's answer: the commit status state, its one-line description, and the markdown report."""

    state: Literal["success", "failure", "error"]
    description: str
    report: str


GateRunner = Callable[[GateRulePr], GateVerdict]


@dataclass
class Context:
    port: GitHubPort
    root: Path
    settings: Any  # bot.config.Settings
    llm: capture_mod.Analyst | None = None
    payload: dict | None = None
    gate: GateRunner | None = None
    step_summary: Path | None = None
    run_url: str | None = None
    distiller: Any = None  # bot.distill.AsksJson; None when no model is configured
    max_open_rule_prs: int = MAX_OPEN_RULE_PRS
    open_prs: bool = True
    today: date | None = None

    @property
    def labels(self) -> Any:
        return self.settings.config.labels


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
) -> list[Outcome]:
    """Carry out ``actions`` in order; one that fails on GitHub becomes a ``failed`` outcome, the rest still run.

    ``payload`` is the delivery's JSON (a rejected PR's title and body come from
    it), ``gate`` runs the gate for a rule PR (default: :class:`GitGate` on
    ``root``), and ``step_summary`` is ``$GITHUB_STEP_SUMMARY``. ``distiller``
    is the model distill asks; ``open_prs`` off leaves distill and the
    invariant check undone (see ``replaybook github handle``).
    """
    ctx = Context(port, Path(root), settings, llm, payload, gate, step_summary, run_url, distiller,
                  max_open_rule_prs, open_prs, today)
    outcomes: list[Outcome] = []
    for action in actions:
        try:
            outcomes += _HANDLERS[type(action)](action, ctx)
        except GitHubError as exc:
            outcomes.append(Outcome(action.kind, "failed", _code(exc.render(), 400)))
    return outcomes


# ------------------------------------------------------------------ markdown helpers


def _code(text: str, limit: int = 300) -> str:
    """``text`` as one inline code span: nothing in it renders, pings or links."""
    line = capture_mod.one_liner(text, limit)
    ticks = "`" * (max((len(r) for r in re.findall(r"`+", line)), default=0) + 1)
    return f"{ticks} {line} {ticks}"


def _fenced(text: str, info: str = "text") -> str:
    ticks = "`" * max(3, max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}"


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
    issue_mark = marker(issue_key)
    attempt_mark = marker(f"{action.key}-job-{_slug(job.name)}")
    what = f"run {action.run_id} attempt {action.run_attempt}, job {job.name!r}"
    found = ctx.port.find_issue_by_marker(issue_mark)
    if found is not None and (
        attempt_mark in found.body or ctx.port.find_comment_by_marker(found.number, attempt_mark) is not None
    ):
        return Outcome(action.kind, "unchanged", f"{what}: already on #{found.number}", found.url)
    evidence = _job_evidence(ctx.port, job)
    incident, reason = capture_mod.draft(evidence, ctx.llm, source_url=action.html_url, key=issue_key)
    summary = _run_summary(action, job, incident, reason)
    excerpt = f"**Evidence** (from the job log)\n\n{_fenced(evidence.excerpt)}"
    if found is None:
        body = fit_body({"marker": f"{issue_mark}\n{attempt_mark}", "summary": summary, "evidence": excerpt,
                         "block": issue_form.normalised_block(incident)})
        title = capture_mod.one_liner(f"CI failure: {action.workflow} / {job.name}", 200)
        issue = ctx.port.create_issue(title, body, [ctx.labels.incident])
        return Outcome(action.kind, "done", f"{what}: filed #{issue.number}", issue.url)
    body = fit_body({"marker": attempt_mark, "summary": f"Failed again.\n\n{summary}", "evidence": excerpt})
    comment = ctx.port.add_comment(found.number, body)
    return Outcome(action.kind, "done", f"{what}: commented on #{found.number} (a repeat)", comment.url)


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
        f"**Workflow:** {_code(action.workflow)} · **job:** {_code(job.name)} · "
        f"**attempt:** {action.run_attempt} · **conclusion:** {action.conclusion}",
        f"**Run:** {action.html_url} · **commit:** `{action.head_sha[:12]}`",
        f"**Trigger:** {_code(incident.trigger)}",
    ]
    if incident.triage:
        lines += ["", "> [!IMPORTANT]",
                  f"> Needs triage: {reason or 'capture could not state the belief delta'}. Fill in `believed`, "
                  "`actual` and `failure_class` in the yaml block below; the bot keeps your edit."]
    return "\n".join(lines)


# ------------------------------------------------------------------ capture_rejected_pr


def _capture_rejected_pr(action: CaptureRejectedPr, ctx: Context) -> list[Outcome]:
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
    incident, reason = capture_mod.draft(evidence, ctx.llm, source_url=action.html_url, key=action.key)
    summary = "\n".join([
        f"**Pull request:** #{action.number} · **why:** {action.reason.replace('_', ' ')}"
        + (f" · {action.html_url}" if action.html_url else ""),
        f"**Trigger:** {_code(incident.trigger)}",
        *(["", "> [!IMPORTANT]", f"> Needs triage: {reason}. Fill in `believed`, `actual` and `failure_class` "
           "in the yaml block below."] if incident.triage else []),
    ])
    body = fit_body({"marker": mark, "summary": summary,
                     "evidence": f"**Evidence** (title, review, body, diff stat)\n\n{_fenced(evidence.excerpt)}",
                     "block": issue_form.normalised_block(incident)})
    issue = ctx.port.create_issue(capture_mod.one_liner(f"Rejected agent PR #{action.number}: {title}", 200), body,
                                  [ctx.labels.incident])
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
        listed = "\n".join(f"- {_code(p, 500)}" for p in problems)
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
    if was_invalid:
        ctx.port.upsert_comment(action.number, FORM_MARKER, "**Fixed:** the incident now parses; thank you.")
    done = ["normalised block written" if changed_body else "block already current"]
    done += [f"removed {invalid}"] if was_invalid else []
    return [Outcome(action.kind, "done", f"issue #{action.number}: parses; " + ", ".join(done), issue.url)]


# ------------------------------------------------------------------ gate_rule_pr


def _gate_rule_pr(action: GateRulePr, ctx: Context) -> list[Outcome]:
    where = f"PR #{action.number}" if action.number else f"merge group {action.head_sha[:12]}"
    if not action.secrets:
        why = "a fork" if action.fork else "a Dependabot PR"
        verdict = GateVerdict("error", "replay could not run: no secrets on fork PRs",
                              f"## Replaybook gate: could not run\n\nThis is {why}, so the workflow gets no secrets "
                              "and the replay cannot run. The gate reports `error`, never success. A maintainer "
                              "can push the branch to this repository to run it.\n")
    else:
        runner = ctx.gate or GitGate(ctx.root, ctx.settings)
        try:
            verdict = runner(action)
        except ReplaybookError as exc:
            verdict = GateVerdict("error", f"the gate could not decide: {exc.message}",
                                  f"## Replaybook gate: could not decide\n\n{_fenced(exc.render())}\n")
    description = capture_mod.one_liner(verdict.description, 140)
    ctx.port.set_status(action.head_sha, verdict.state, GATE_CONTEXT, description, ctx.run_url)
    url = None
    if action.number is not None:
        url = ctx.port.upsert_comment(action.number, GATE_MARKER, fit_body({"report": verdict.report},
                                                                           trim_first=("report",))).url
    if ctx.step_summary is not None:
        with open(ctx.step_summary, "a", encoding="utf-8") as f:
            f.write(verdict.report[: SUMMARY_LIMIT // 2] + "\n")
    status: Status = "failed" if verdict.state == "error" else "done"
    return [Outcome(action.kind, status, f"{where}: {verdict.state}: {description}", url)]


_SHA = re.compile(r"^[0-9a-f]{7,40}$")


class GitGate:
    """The gate on the rule files a PR changes, in the checked-out PR head at ``root``.

    Rule files: ``git diff --name-only --diff-filter=AM BASE...HEAD -- <playbook>/rules/``
    (the workflow must fetch the base commit: ``fetch-depth: 0``). The playbook
    they are judged against is the base commit's, read with ``git archive BASE
    -- <playbook>`` into a temporary folder: no worktree, nothing in the
    repository changes. Scenarios and incidents come from the head, since a
    rule PR brings its own scenario. Without ``ANTHROPIC_API_KEY`` (and no
    ``replay`` given) the gate answers ``error``: a simulated replay never
    admits a real rule.
    """

    def __init__(self, root: Path, settings: Any, replay: Any = None, api_key: str | None = None):
        self.root, self.settings, self.replay, self.api_key = Path(root), settings, replay, api_key

    def git(self, *args: str) -> bytes:
        done = subprocess.run(["git", *args], cwd=self.root, capture_output=True, timeout=120)
        if done.returncode != 0:
            raise BadInput(f"git {args[0]} failed ({done.returncode}): "
                           f"{done.stderr.decode('utf-8', 'replace').strip()[-300:]}")
        return done.stdout

    def changed_rules(self, base_sha: str) -> list[str]:
        if not _SHA.match(base_sha or ""):
            raise BadInput(f"base sha {base_sha!r} is not a commit id")
        rules = f"{self.settings.config.paths.playbook.strip('/')}/rules/"
        out = self.git("diff", "--name-only", "-z", "--diff-filter=AM", f"{base_sha}...HEAD", "--", rules)
        return sorted(n for n in out.decode("utf-8", "replace").split("\0") if n.endswith((".yaml", ".yml")))

    def base_playbook(self, base_sha: str, into: Path) -> Path:
        folder = self.settings.config.paths.playbook.strip("/")
        data = self.git("archive", "--format=tar", base_sha, "--", folder)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(into, filter="data")
        (into / folder).mkdir(parents=True, exist_ok=True)  # a base without a playbook: an empty one
        return into / folder

    def __call__(self, action: GateRulePr) -> GateVerdict:
        from bot import gate as gate_mod
        from bot import gate_report
        from bot.incident import IncidentStore
        from bot.playbook import Playbook
        from bot.replay.engine import ReplayOptions

        base = action.base_sha or ""
        names = self.changed_rules(base)
        if not names:
            return GateVerdict("success", "no rule file changed", "## Replaybook gate\n\nNo rule file changed.\n")
        replay = self.replay
        if replay is None:
            if not self.api_key:
                raise BadInput("ANTHROPIC_API_KEY is not set, so the replay cannot run")
            replay = ReplayOptions(model=self.settings.config.models.agent, api_key=self.api_key)
        opts = gate_mod.GateOptions(replay=replay)
        results = []
        with tempfile.TemporaryDirectory(prefix="replaybook-base-") as tmp:
            base_book = self.base_playbook(base, Path(tmp))
            book = Playbook(base_book, root=self.root, cap=self.settings.cap,
                            incidents=IncidentStore(self.settings.path("incidents")))
            for name in names:
                results.append(gate_mod.run_gate(book, self.root / name, self.settings.path("scenarios"), opts))
        decisions = {r.decision for r in results}
        state = "error" if "error" in decisions else "failure" if "reject" in decisions else "success"
        word = {"success": "admit", "failure": "reject", "error": "could not decide"}[state]
        ids = ", ".join(f"{r.rule_id} {r.decision}" for r in results)
        report = "\n\n".join(gate_report.markdown(r, opts.test) for r in results)
        return GateVerdict(state, f"{word}: {ids}", report)


# ------------------------------------------------------------------ pull requests the bot opens


def _mine(prs: list[PullRef], key: str) -> PullRef | None:
    """The bot's PR for ``key``: its marker in the body, on a branch of the bot's; an open one first."""
    found = [p for p in prs if key in marker_keys(p.body) and _bot_branch(p.head_ref, key)]
    return next((p for p in found if p.state == "open"), found[-1] if found else None)


def _bot_branch(ref: str, key: str) -> bool:
    return ref == BRANCH_PREFIX + key or ref.startswith(f"{BRANCH_PREFIX}{key}-")


def _open_pr(ctx: Context, key: str, title: str, body: str, files: dict[str, str | None], base: str,
             from_sha: str, used: set[str]) -> PullRef:
    """A new PR for ``key`` carrying ``files`` (None deletes), on ``replaybook/KEY`` or a fresh variant of it.

    A branch left behind by a closed PR is never reused: its old commits would come along.
    """
    branch = BRANCH_PREFIX + key
    for n in range(2, 100):
        if branch not in used:
            try:
                ctx.port.create_branch(branch, from_sha)
                break
            except GitHubError as exc:
                if exc.status != 422:
                    raise
        branch = f"{BRANCH_PREFIX}{key}-{n}"
    else:
        raise GitHubError(f"no free branch name for {key}: delete old {BRANCH_PREFIX}{key}-* branches", status=422)
    _write_files(ctx.port, branch, files, title)
    return ctx.port.create_pr(title, body, branch, base)


def _write_files(port: GitHubPort, branch: str, files: dict[str, str | None], message: str) -> int:
    """Put (or delete, for None) each file on ``branch``; the number of commits made."""
    changed = 0
    for path, text in sorted(files.items()):
        if text is None:
            changed += port.delete_file(branch, path, f"{message}: remove {path}")
        else:
            changed += port.put_file(branch, path, text, f"{message}: {path}")
    return changed


def _refresh_pr(ctx: Context, pr: PullRef, body: str, files: dict[str, str | None], message: str) -> bool:
    """Bring an open PR's files and body up to date in place; whether anything changed."""
    changed = _write_files(ctx.port, pr.head_ref, files, message) > 0
    if pr.body != body:
        ctx.port.update_pr(pr.number, body=body)
        changed = True
    return changed


def _pr_url(pr: PullRef) -> str | None:
    return pr.url or None


# ------------------------------------------------------------------ distill


def _distill(action: Distill, ctx: Context) -> list[Outcome]:
    if ctx.distiller is None:
        return [Outcome(action.kind, "failed", "error: distill needs a model: set ANTHROPIC_API_KEY (and "
                                               "ANTHROPIC_BASE_URL for a proxy) in the job's env")]
    from bot import distill as distill_mod

    report = distill_mod.distill(ctx.settings, ctx.distiller, today=ctx.today)
    outcomes: list[Outcome] = []
    held: list[str] = []
    if report.proposals:
        prs = ctx.port.list_prs("all")
        used = {p.head_ref for p in prs}
        open_rule_prs = sum(1 for p in prs if p.state == "open" and p.head_ref.startswith(BRANCH_PREFIX + "rule-")
                            and any(k.startswith("rule-") for k in marker_keys(p.body)))
        base = from_sha = None
        for proposal in report.proposals:
            found = _mine(prs, proposal.id)
            if found is None or found.state != "open":
                skip = _closed_rule_skip(proposal, found)
                if skip is not None:
                    outcomes.append(Outcome(action.kind, "skipped", skip, _pr_url(found) if found else None))
                    continue
                if open_rule_prs >= ctx.max_open_rule_prs:
                    held.append(proposal.id)
                    continue
            body, files = _rule_pr(proposal, ctx)
            if found is not None and found.state == "open":
                old = {k[len("cite:"):] for k in marker_keys(found.body) if k.startswith("cite:")}
                if old and not old & set(proposal.cites):
                    outcomes.append(Outcome(action.kind, "skipped", f"{proposal.id}: PR #{found.number} holds a "
                                            "rule citing other incidents (the id was reused); close it or merge it, "
                                            "then distill again", _pr_url(found)))
                    continue
                changed = _refresh_pr(ctx, found, body, files, f"Update {proposal.id}")
                outcomes.append(Outcome(action.kind, "done" if changed else "unchanged",
                                        f"{proposal.id}: {'updated' if changed else 'already current in'} "
                                        f"PR #{found.number}", _pr_url(found)))
                continue
            if base is None:
                base, from_sha = ctx.port.default_branch(), ctx.port.default_branch_sha()
            pr = _open_pr(ctx, proposal.id, f"Rule {proposal.id}: {capture_mod.one_liner(proposal.rule, 120)}",
                          body, files, base, from_sha, used)
            open_rule_prs += 1
            outcomes.append(Outcome(action.kind, "done", f"{proposal.id}: opened PR #{pr.number}", _pr_url(pr)))
    outcomes.append(Outcome(action.kind, "done" if report.proposals else "unchanged", _distill_summary(report, held,
                                                                                                     ctx)))
    return outcomes


def _closed_rule_skip(proposal: Any, found: PullRef | None) -> str | None:
    """Why a proposal whose PR was closed gets no new one, or None when it should get one."""
    if found is None:
        return None
    if found.merged:
        return f"{proposal.id}: PR #{found.number} was merged already; the id was reused, so nothing was opened"
    old = {k[len("cite:"):] for k in marker_keys(found.body) if k.startswith("cite:")}
    new = sorted(set(proposal.cites) - old)
    if not new:
        return (f"{proposal.id}: PR #{found.number} was closed without merging and no new incident cites it; "
                "not reopened")
    return None


def _distill_summary(report: Any, held: list[str], ctx: Context) -> str:
    parts = [f"{len(report.groups)} group(s), {len(report.proposals)} proposal(s), "
             f"{sum(r.what == 'refused' for r in report.refusals)} refused"]
    refused = [r for r in report.refusals if r.what in ("refused", "failed")]
    if refused:
        parts.append("why: " + _code(" | ".join(f"{r.group}: {r.reason}" for r in refused), 600))
    if report.failed:
        parts.append(f"{report.failed} model call(s) failed")
    if report.spec_changes:
        parts.append(f"{len(report.spec_changes)} spec change(s) proposed but not opened as PRs: "
                     + ", ".join(s.id for s in report.spec_changes))
    if held:
        parts.append(f"held back by the cap of {ctx.max_open_rule_prs} open rule PRs "
                     f"(REPLAYBOOK_MAX_OPEN_RULE_PRS): {', '.join(held)}")
    return "distill: " + "; ".join(parts)


def _rule_pr(proposal: Any, ctx: Context) -> tuple[str, dict[str, str | None]]:
    """The PR body and files for a proposal: the rule under rules/ (merging admits it) and any new scenario."""
    settings, root = ctx.settings, ctx.root
    folder = settings.config.paths.playbook.strip("/")
    files: dict[str, str | None] = {f"{folder}/rules/{proposal.id}.yaml": Path(proposal.path).read_text("utf-8")}
    if proposal.new_scenario:
        scenario = settings.path("scenarios") / proposal.scenario
        for path in sorted(p for p in scenario.rglob("*") if p.is_file()):
            files[path.relative_to(root).as_posix()] = path.read_text("utf-8")
    marks = "\n".join([marker(proposal.id), *(marker(f"cite:{c}") for c in proposal.cites if _citable(c))])
    cites = "\n".join(f"- {_code(c, 120)}" for c in proposal.cites)
    scenario_line = (f"a new scenario, {_code(proposal.scenario, 120)}, added by this PR" if proposal.new_scenario
                     else f"the existing scenario {_code(proposal.scenario, 120)}")
    summary = "\n".join([
        f"## Proposed rule {proposal.id}" + (" (provisional: one incident)" if proposal.provisional else ""),
        "", _fenced(proposal.rule), "", f"**Cites** ({len(proposal.cites)} incident(s)):", cites, "",
        f"**Replay:** {scenario_line}.", "",
        f"Merging this PR admits the rule: it adds `{folder}/rules/{proposal.id}.yaml`. The `{GATE_CONTEXT}` "
        "status replays the scenario with and without the rule and decides. Close the PR to refuse it; "
        "distill opens it again only when new incidents cite it.",
    ])
    return fit_body({"marker": marks, "summary": summary}), files


def _citable(incident_id: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*", incident_id))


# ------------------------------------------------------------------ check_playbook_invariants


def _check_invariants(action: CheckPlaybookInvariants, ctx: Context) -> list[Outcome]:
    from bot.incident import IncidentStore
    from bot.playbook import Playbook

    settings, root = ctx.settings, ctx.root
    store = IncidentStore(settings.path("incidents"))
    sections = [root / s for s in settings.config.sections]
    book = Playbook(settings.path("playbook"), root=root, cap=settings.cap, incidents=store)
    problems = book.check(sections)
    where = f"the playbook at {action.after_sha[:12]}"
    if not problems:
        return [Outcome(action.kind, "unchanged", f"ok: {where} holds every invariant")]
    with tempfile.TemporaryDirectory(prefix="replaybook-maintenance-") as tmp:
        files, fixed, left = _mechanical_fixes(ctx, Path(tmp), sections, store, ctx.today or date.today())
    listed = "\n".join(f"- {_code(p, 500)}" for p in problems)
    todo = "\n".join(f"- {_code(p, 500)}" for p in left) or "- nothing: merging this PR fixes every problem"
    summary = "\n".join([
        f"## Replaybook: the playbook needs maintenance ({len(problems)} problem(s))", "",
        f"`replaybook playbook check` on `{action.after_sha[:12]}` found:", "", listed, "",
        "**This PR fixes:** " + ("; ".join(fixed) if fixed else "nothing mechanically"), "",
        "**Still needs a person:**", todo,
    ])
    body = fit_body({"marker": MAINTENANCE_MARKER, "summary": summary}, trim_first=("summary",))
    prs = ctx.port.list_prs("open")
    found = _mine(prs, MAINTENANCE_KEY)
    if found is not None:
        changed = _refresh_pr(ctx, found, body, files, "Playbook maintenance")
        return [Outcome(action.kind, "done" if changed else "unchanged",
                        f"{where}: {len(problems)} problem(s); "
                        f"{'updated' if changed else 'already listed in'} PR #{found.number}", _pr_url(found))]
    if not files:
        return [Outcome(action.kind, "failed", f"{where}: {len(problems)} problem(s), none fixable mechanically: "
                                               + _code("; ".join(problems), 600))]
    pr = _open_pr(ctx, MAINTENANCE_KEY, "Replaybook: playbook maintenance", body, files, ctx.port.default_branch(),
                  action.after_sha, {p.head_ref for p in prs})
    return [Outcome(action.kind, "done", f"{where}: {len(problems)} problem(s); opened PR #{pr.number}",
                    _pr_url(pr))]


def _mechanical_fixes(ctx: Context, tmp: Path, sections: list[Path], store: Any,
                      today: date) -> tuple[dict[str, str | None], list[str], list[str]]:
    """Files (relative path -> text, None to delete) that retire past the cap and re-render, made in ``tmp``.

    The checkout is never written: its playbook folder and section files are
    copied into ``tmp``, fixed there, and compared with the originals.
    """
    from bot.playbook import Playbook

    settings, root = ctx.settings, ctx.root
    folder = settings.config.paths.playbook.strip("/")
    source = root / folder
    copy = tmp / folder
    if source.is_dir():
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".*"))
    copy.mkdir(parents=True, exist_ok=True)
    copied = {}
    for file in sections:
        rel = Path(os.path.relpath(file, root))
        if rel.parts and rel.parts[0] != "..":
            copied[rel.as_posix()] = tmp / rel
            if file.exists():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, tmp / rel)
    book = Playbook(copy, root=tmp, cap=settings.cap)
    fixed: list[str] = []
    try:
        retired = book.retire_over_cap(today)
        if retired:
            fixed.append("retires the coldest past the cap: " + ", ".join(r.id for r in retired))
        if book.render():
            fixed.append(f"re-renders {folder}/PLAYBOOK.md")
        synced = [rel for rel, path in copied.items() if book.sync_section(path)]
        if synced:
            fixed.append("syncs the playbook section of " + ", ".join(synced))
    except BadInput:
        pass  # a broken rule file or a twin id: nothing is safe to rewrite until a person fixes it
    files = _changed(source, copy, folder)
    for rel, path in copied.items():
        old, new = root / rel, path
        if new.exists() and (not old.exists() or not filecmp.cmp(old, new, shallow=False)):
            files[rel] = new.read_text("utf-8")
    after = Playbook(copy, root=root, cap=settings.cap, incidents=store)
    return files, fixed, after.check(list(copied.values()))


def _changed(old: Path, new: Path, prefix: str) -> dict[str, str | None]:
    """Files under ``new`` that differ from ``old`` (text), and files only in ``old`` (None)."""
    def listing(top: Path) -> set[str]:
        if not top.is_dir():
            return set()
        return {p.relative_to(top).as_posix() for p in top.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(top).parts)}

    before, after = listing(old), listing(new)
    out: dict[str, str | None] = {f"{prefix}/{rel}": None for rel in sorted(before - after)}
    for rel in sorted(after):
        if rel not in before or not filecmp.cmp(old / rel, new / rel, shallow=False):
            out[f"{prefix}/{rel}"] = (new / rel).read_text("utf-8")
    return out


# ------------------------------------------------------------------ the rest


def _not_yet(action: CheckPlaybookInvariants | Distill, ctx: Context) -> list[Outcome]:
    return [Outcome(action.kind, "not_implemented", NOT_YET)]


def _pr_writer(handler: Callable[[Any, Context], list[Outcome]]) -> Callable[[Any, Context], list[Outcome]]:
    """``handler``, or a clear "not enabled" when this run may not open pull requests."""

    def run(action: Any, ctx: Context) -> list[Outcome]:
        if not ctx.open_prs:
            return [Outcome(action.kind, "not_implemented",
                            "not enabled: set REPLAYBOOK_OPEN_PRS=1 and give the job a GitHub App token as "
                            "GITHUB_TOKEN; PRs opened with the workflow's own token start no workflow, so the "
                            f"admit gate would never run on them ({NOT_YET})")]
        return handler(action, ctx)

    return run


def _ignore(action: Ignore, ctx: Context) -> list[Outcome]:
    return [Outcome(action.kind, "skipped", action.reason)]


_HANDLERS: dict[type, Callable[[Any, Context], list[Outcome]]] = {
    CaptureRun: _capture_run,
    CaptureRejectedPr: _capture_rejected_pr,
    ParseIncidentIssue: _parse_issue,
    GateRulePr: _gate_rule_pr,
    CheckPlaybookInvariants: _pr_writer(_check_invariants),
    Distill: _pr_writer(_distill),
    Ignore: _ignore,
}

__all__ = ["GATE_CONTEXT", "GATE_MARKER", "GateVerdict", "GitGate", "Outcome", "execute"]
