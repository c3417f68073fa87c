"""Deciding from one webhook payload what the bot should do.

``plan(event_name, payload, config)`` is pure: no network, no PyGithub, no
clock. ``config`` is the repository's :class:`bot.config.Config` in effect
(``.replaybook.yml``, with the command's flags applied): one schema, locally
and on GitHub. It reads the event GitHub delivered (``GITHUB_EVENT_NAME`` and the
JSON at ``GITHUB_EVENT_PATH`` in Actions) and returns typed actions for the
adapter to carry out. Every string in a payload is untrusted data: it is
copied into actions as is and must never be formatted into a shell command
or an Actions expression.

A payload missing a field we need, or holding the wrong type there, raises
``BadInput`` naming the field, never ``KeyError``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from bot.config import Config
from bot.errors import BadInput
from bot.github.issue_form import strip_block

DASHBOARD_LABEL = "replaybook:dashboard"  # bot.github.dashboard.LABEL
GATE_CHECK = "replaybook/admit"  # bot.github.gate.GATE_CONTEXT


# ------------------------------------------------------------------ actions


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaptureRun(_Action):
    """A watched workflow run failed: capture an incident from its logs."""

    kind: Literal["capture_run"] = "capture_run"
    run_id: int
    run_attempt: int
    workflow: str
    conclusion: Literal["failure", "timed_out"]
    head_sha: str
    html_url: str
    key: str  # run-<id>-attempt-<n>


class CaptureRejectedPr(_Action):
    """An agent PR was closed unmerged, or a reviewer requested changes."""

    kind: Literal["capture_rejected_pr"] = "capture_rejected_pr"
    number: int
    reason: Literal["closed_unmerged", "changes_requested"]
    html_url: str | None = None
    review_id: int | None = None
    key: str  # pr-<n>-closed | review-<id>


class ParseIncidentIssue(_Action):
    """An incident issue was opened or edited: parse it, then normalise its block."""

    kind: Literal["parse_incident_issue"] = "parse_incident_issue"
    number: int
    html_url: str | None = None
    created_at: str | None = None
    key: str  # issue-<n>


class GateRulePr(_Action):
    """Run the gate on a rule PR (or a merge group) and report a status.

    When ``secrets`` is false the replay cannot run: the gate must report
    that, and never success. For a merge group ``number`` may be unknown and
    the adapter decides from the diff ``base_sha..head_sha`` whether rules
    change, checking the cap on that merged result.
    """

    kind: Literal["gate_rule_pr"] = "gate_rule_pr"
    number: int | None
    head_sha: str
    base_ref: str
    base_sha: str | None = None
    fork: bool
    secrets: bool
    merge_group: bool = False


class CheckPlaybookInvariants(_Action):
    """The default branch's playbook changed: check the cap and the rule invariants."""

    kind: Literal["check_playbook_invariants"] = "check_playbook_invariants"
    after_sha: str


class Distill(_Action):
    """Turn unresolved incidents into candidate rules."""

    kind: Literal["distill"] = "distill"
    reason: Literal["schedule", "dispatch", "threshold"]


class DistillIfDue(_Action):
    """After a capture: if this delivery filed a new incident and the undistilled ones reached ``threshold``,
    dispatch ``workflow`` (distill needs a token that may open PRs, which a capture job does not hold)."""

    kind: Literal["distill_if_due"] = "distill_if_due"
    threshold: int
    workflow: str


class RecordHits(_Action):
    """Look for ``[rule-NNNN]`` in the agent's recent merged PRs and commits and record the hits, in one batch."""

    kind: Literal["record_hits"] = "record_hits"
    lookback_days: int


class UpdateDashboard(_Action):
    """Edit the dashboard issue in place (bot/github/dashboard.py) and write its report to the job summary."""

    kind: Literal["update_dashboard"] = "update_dashboard"


class DashboardTick(_Action):
    """The dashboard issue was edited: carry out its ticked boxes once."""

    kind: Literal["dashboard_tick"] = "dashboard_tick"
    number: int


class Retest(_Action):
    """Replay each admitted rule's scenario without it; retire the redundant ones in one PR (bot/github/retest.py).

    ``if_changed`` re-tests only when the agent's model or pinned version differs from the last re-test's.
    """

    kind: Literal["retest"] = "retest"
    reason: Literal["monthly", "dispatch", "if_changed"]


class RunCommand(_Action):
    """A new comment holds ``/replaybook`` command lines (bot/github/commands.py), run by bot/github/command_run.py.

    ``body`` is the comment as written, untrusted data; ``state`` the issue's or PR's (closed: a reply, no run)."""

    kind: Literal["run_command"] = "run_command"
    comment_id: int
    number: int
    is_pr: bool
    state: str
    login: str
    body: str
    html_url: str | None = None


class Ignore(_Action):
    """Nothing to do; ``reason`` says why, for the log."""

    kind: Literal["ignore"] = "ignore"
    reason: str


Action = Annotated[
    Union[CaptureRun, CaptureRejectedPr, ParseIncidentIssue, GateRulePr, CheckPlaybookInvariants, Distill,
          DistillIfDue, RecordHits, UpdateDashboard, DashboardTick, Retest, RunCommand, Ignore],
    Field(discriminator="kind"),
]
ACTIONS = TypeAdapter(list[Action])

# ------------------------------------------------------------------ reading payloads

_MISSING = object()
_TYPES = {str: "a string", int: "an integer", bool: "true or false", dict: "an object", list: "a list"}


def _field(payload: Any, path: str, kind: type | tuple[type, ...], *, event: str, optional: bool = False) -> Any:
    """``payload[a][b]…`` for ``path`` "a.b…", checked against ``kind``; BadInput names the field."""
    node: Any = payload
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            node = _MISSING
        if node is _MISSING or node is None:
            if optional:
                return None
            what = "missing" if node is _MISSING else "null"
            raise BadInput(f"{event} payload: field `{path}` is {what}; is this a real `{event}` webhook payload?")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; a payload's true is never an id.
    if not isinstance(node, kinds) or (isinstance(node, bool) and bool not in kinds):
        expected = " or ".join(_TYPES.get(k, k.__name__) for k in kinds)
        raise BadInput(f"{event} payload: field `{path}` should be {expected}, got {type(node).__name__} {node!r:.60}")
    return node


def _labels(payload: dict, path: str, event: str) -> set[str]:
    labels = _field(payload, path, list, event=event, optional=True) or []
    names = set()
    for index in range(len(labels)):
        names.add(_field(payload, f"{path}.{index}.name", str, event=event))
    return names


def _default_branch(payload: dict, event: str) -> str:
    return _field(payload, "repository.default_branch", str, event=event)


# ------------------------------------------------------------------ rules


def plan(event_name: str, payload: dict, config: Config | None = None) -> list[Action]:
    """The actions for one delivery of ``event_name`` with ``payload``."""
    config = config or Config()
    if not isinstance(payload, dict):
        raise BadInput(f"{event_name} payload: should be a JSON object, got {type(payload).__name__}")
    handler = _HANDLERS.get(event_name)
    if handler is None:
        return [Ignore(reason=f"event `{event_name}` is not one the bot acts on")]
    actions = handler(payload, config, event_name)
    if config.github.distill_threshold and any(isinstance(a, (CaptureRun, CaptureRejectedPr, ParseIncidentIssue))
                                        for a in actions):
        actions.append(DistillIfDue(threshold=config.github.distill_threshold, workflow=config.github.distill_workflow))
    return actions


_RUN_ACTS = ("failure", "timed_out")


def _workflow_names(payload: dict, event: str) -> list[str]:
    run_name = _field(payload, "workflow_run.name", str, event=event, optional=True)
    workflow_name = _field(payload, "workflow.name", str, event=event, optional=True)
    path = _field(payload, "workflow_run.path", str, event=event, optional=True) or ""
    file_name = path.rsplit("/", 1)[-1]
    return [n for n in (workflow_name, run_name, file_name) if n]


def _workflow_run(payload: dict, config: Config, event: str) -> list[Action]:
    action = _field(payload, "action", str, event=event)
    run_id = _field(payload, "workflow_run.id", int, event=event)
    if action != "completed":
        return [Ignore(reason=f"workflow run {run_id} is `{action}`, not completed")]
    conclusion = _field(payload, "workflow_run.conclusion", str, event=event, optional=True)
    if conclusion not in _RUN_ACTS:
        return [Ignore(reason=f"workflow run {run_id} concluded {conclusion or 'without a conclusion'}; only failure and timed_out are captured")]
    names = _workflow_names(payload, event)
    if not names:
        raise BadInput(f"{event} payload: field `workflow.name` (or `workflow_run.name`, `workflow_run.path`) is missing")
    lowered = [n.lower() for n in names]
    if any(n.startswith(p.lower()) for n in lowered for p in config.github.bot_workflow_prefixes if p):
        return [Ignore(reason=f"workflow {names[0]!r} is the bot's own")]
    if config.github.watched_workflows and not {w.lower() for w in config.github.watched_workflows} & set(lowered):
        return [Ignore(reason=f"workflow {names[0]!r} is not in watched_workflows")]
    attempt = _field(payload, "workflow_run.run_attempt", int, event=event)
    return [
        CaptureRun(
            run_id=run_id,
            run_attempt=attempt,
            workflow=names[0],
            conclusion=conclusion,
            head_sha=_field(payload, "workflow_run.head_sha", str, event=event),
            html_url=_field(payload, "workflow_run.html_url", str, event=event),
            key=f"run-{run_id}-attempt-{attempt}",
        )
    ]


def _counts_as_agent(pr_path: str, payload: dict, config: Config, event: str) -> str | None:
    """None when the PR is the agent's, else why not."""
    if not config.github.agent_logins and not config.github.agent_label:
        return "neither agent_logins nor agent_label is configured, so no PR counts as the agent's; set one"
    login = _field(payload, f"{pr_path}.user.login", str, event=event)
    if login.lower() in {a.lower() for a in config.github.agent_logins}:
        return None
    if config.github.agent_label and config.github.agent_label in _labels(payload, f"{pr_path}.labels", event):
        return None
    return f"PR author {login!r} is not an agent login and the PR lacks the agent label"


_GATE_ACTIONS = ("opened", "synchronize", "reopened")


def _rejected(number: int, reason: str, html_url: str | None, key: str, review_id: int | None = None
              ) -> CaptureRejectedPr:
    return CaptureRejectedPr(number=number, reason=reason, html_url=html_url, key=key, review_id=review_id)


def _pull_request(payload: dict, config: Config, event: str) -> list[Action]:
    action = _field(payload, "action", str, event=event)
    number = _field(payload, "number", int, event=event, optional=True)
    if number is None:
        number = _field(payload, "pull_request.number", int, event=event)
    if action == "closed":
        if _field(payload, "pull_request.merged", bool, event=event, optional=True):
            return [Ignore(reason=f"PR #{number} was merged")]
        why_not = _counts_as_agent("pull_request", payload, config, event)
        if why_not:
            return [Ignore(reason=f"PR #{number} closed unmerged, but {why_not}")]
        return [_rejected(number, "closed_unmerged", _field(payload, "pull_request.html_url", str, event=event,
                                                            optional=True), f"pr-{number}-closed")]
    if action in _GATE_ACTIONS:
        # Every PR is gated, whatever its branch or label: the gate passes at once when nothing an
        # agent is told changes, so a rule edit on any branch is replayed.
        # `pull_request_target` is how the admit workflow runs: its definition and the gate's code are the
        # base's, and the PR's head is only read as data (and replayed in the sandbox). On a plain
        # `pull_request` a same-repository PR would run its own edited copy of the workflow.
        head_repo = _field(payload, "pull_request.head.repo.full_name", str, event=event, optional=True)
        base_repo = _field(payload, "pull_request.base.repo.full_name", str, event=event)
        fork = head_repo != base_repo  # a deleted fork has head.repo null: still a fork
        sender = _field(payload, "sender.login", str, event=event, optional=True)
        # Dependabot PRs get no secrets either, fork or not.
        secrets = not fork and sender != "dependabot[bot]"
        return [
            GateRulePr(
                number=number,
                head_sha=_field(payload, "pull_request.head.sha", str, event=event),
                base_ref=_field(payload, "pull_request.base.ref", str, event=event),
                base_sha=_field(payload, "pull_request.base.sha", str, event=event, optional=True),
                fork=fork,
                secrets=secrets,
            )
        ]
    return [Ignore(reason=f"PR #{number} action `{action}` needs nothing")]


def _review(payload: dict, config: Config, event: str) -> list[Action]:
    action = _field(payload, "action", str, event=event)
    review_id = _field(payload, "review.id", int, event=event)
    number = _field(payload, "pull_request.number", int, event=event)
    if action != "submitted":
        return [Ignore(reason=f"review {review_id} on PR #{number} was {action}, not submitted")]
    state = _field(payload, "review.state", str, event=event).lower()
    if state != "changes_requested":
        return [Ignore(reason=f"review {review_id} on PR #{number} is `{state}`, not changes_requested")]
    why_not = _counts_as_agent("pull_request", payload, config, event)
    if why_not:
        return [Ignore(reason=f"changes requested on PR #{number}, but {why_not}")]
    return [_rejected(number, "changes_requested", _field(payload, "review.html_url", str, event=event, optional=True),
                      f"review-{review_id}", review_id)]


def _issues(payload: dict, config: Config, event: str) -> list[Action]:
    action = _field(payload, "action", str, event=event)
    number = _field(payload, "issue.number", int, event=event)
    if action not in ("opened", "edited", "labeled"):
        return [Ignore(reason=f"issue #{number} action `{action}` needs nothing")]
    if action == "edited" and DASHBOARD_LABEL in _labels(payload, "issue.labels", event):
        return [DashboardTick(number=number)]  # the handler checks it is the bot's own issue
    if config.labels.incident not in _labels(payload, "issue.labels", event):
        return [Ignore(reason=f"issue #{number} lacks the `{config.labels.incident}` label")]
    if action == "labeled" and _field(payload, "label.name", str, event=event) != config.labels.incident:
        return [Ignore(reason=f"issue #{number} got a label other than `{config.labels.incident}`")]
    if action == "edited":
        old = _field(payload, "changes.body.from", str, event=event, optional=True)
        if old is None:
            return [Ignore(reason=f"issue #{number} edit left the body unchanged")]
        new = _field(payload, "issue.body", str, event=event, optional=True) or ""
        if strip_block(old) == strip_block(new):
            # The bot's own normalised block changed: parsing again would loop.
            return [Ignore(reason=f"issue #{number} edit touched only the bot's normalised block")]
    return [
        ParseIncidentIssue(
            number=number,
            html_url=_field(payload, "issue.html_url", str, event=event, optional=True),
            created_at=_field(payload, "issue.created_at", str, event=event, optional=True),
            key=f"issue-{number}",
        )
    ]


def _merge_group(payload: dict, config: Config, event: str) -> list[Action]:
    action = _field(payload, "action", str, event=event)
    if action != "checks_requested":
        return [Ignore(reason=f"merge group action `{action}` needs nothing")]
    head_ref = _field(payload, "merge_group.head_ref", str, event=event)
    match = re.search(r"/pr-(\d+)-[0-9a-f]+$", head_ref)
    base_ref = _field(payload, "merge_group.base_ref", str, event=event)
    # A merge group lists neither labels nor branches: every group is gated,
    # and the gate passes at once when the merged diff touches no rule.
    return [
        GateRulePr(
            number=int(match.group(1)) if match else None,
            head_sha=_field(payload, "merge_group.head_sha", str, event=event),
            base_ref=base_ref.removeprefix("refs/heads/"),
            base_sha=_field(payload, "merge_group.base_sha", str, event=event, optional=True),
            fork=False,
            secrets=True,
            merge_group=True,
        )
    ]


def _check_run(payload: dict, config: Config, event: str) -> list[Action]:
    """"Replay again" on the gate's check run: gate its commit again (bot/github/checks.py)."""
    action = _field(payload, "action", str, event=event)
    name = _field(payload, "check_run.name", str, event=event)
    if action != "requested_action":
        return [Ignore(reason=f"check_run `{action}` on `{name}` needs nothing; only \"Replay again\" re-gates")]
    identifier = _field(payload, "requested_action.identifier", str, event=event)
    if name != GATE_CHECK or identifier != "replay":
        return [Ignore(reason=f"check_run action `{identifier}` on `{name}` is not the gate's \"Replay again\"")]
    head_sha = _field(payload, "check_run.head_sha", str, event=event)
    pulls = _field(payload, "check_run.pull_requests", list, event=event, optional=True) or []
    # GitHub lists only the PRs whose head branch is in this repository: a fork's PR is never here.
    pull = next((p for p in pulls if isinstance(p, dict) and (p.get("head") or {}).get("sha") == head_sha), None)
    if pull is None:
        return [Ignore(reason=f"check_run `{name}` on {head_sha[:12]} belongs to no pull request of this repository; "
                              "push the PR's branch here, or dispatch the admit workflow with its number")]
    index = pulls.index(pull)
    base_id = _field(payload, f"check_run.pull_requests.{index}.base.repo.id", int, event=event)
    head_id = _field(payload, f"check_run.pull_requests.{index}.head.repo.id", int, event=event)
    return [GateRulePr(number=_field(payload, f"check_run.pull_requests.{index}.number", int, event=event),
                       head_sha=head_sha,
                       base_ref=_field(payload, f"check_run.pull_requests.{index}.base.ref", str, event=event),
                       base_sha=_field(payload, f"check_run.pull_requests.{index}.base.sha", str, event=event,
                                       optional=True),
                       fork=head_id != base_id, secrets=head_id == base_id)]


_TRUNCATED = 20  # GitHub lists at most 20 commits in a push payload


def _push(payload: dict, config: Config, event: str) -> list[Action]:
    ref = _field(payload, "ref", str, event=event)
    default = _default_branch(payload, event)
    if ref != f"refs/heads/{default}":
        return [Ignore(reason=f"push to {ref}, not the default branch {default}")]
    if _field(payload, "deleted", bool, event=event, optional=True):
        return [Ignore(reason=f"push deleted {ref}")]
    after = _field(payload, "after", str, event=event)
    commits = _field(payload, "commits", list, event=event)
    prefix = config.paths.playbook.strip("/") + "/"
    touched = len(commits) >= _TRUNCATED  # the list may be cut: check rather than miss a change
    for index, _ in enumerate(commits):
        for which in ("added", "modified", "removed"):
            paths = _field(payload, f"commits.{index}.{which}", list, event=event, optional=True) or []
            touched = touched or any(isinstance(p, str) and p.startswith(prefix) for p in paths)
    if not touched:
        return [Ignore(reason=f"push to {default} touches nothing under {prefix}")]
    return [CheckPlaybookInvariants(after_sha=after)]


RETEST_CRON = "41 5 1 * *"  # the scheduled workflow's monthly entry (bot/github/templates/init/replaybook-distill.yml.j2)


def _schedule(payload: dict, config: Config, event: str) -> list[Action]:
    if _field(payload, "schedule", str, event=event, optional=True) == RETEST_CRON:
        return [Retest(reason="monthly")]
    return [RecordHits(lookback_days=config.github.hits_lookback_days), Distill(reason="schedule"),
            *([UpdateDashboard()] if config.github.dashboard else []), Retest(reason="if_changed")]


def _dispatch(payload: dict, config: Config, event: str) -> list[Action]:
    # The threshold dispatches with `inputs.reason: threshold`; a person's dispatch also records hits.
    reason = _field(payload, "inputs.reason", str, event=event, optional=True)
    if reason == "threshold":
        return [Distill(reason="threshold")]
    if reason == "retest":
        return [Retest(reason="dispatch")]
    return [RecordHits(lookback_days=config.github.hits_lookback_days), Distill(reason="dispatch")]


def _issue_comment(payload: dict, config: Config, event: str) -> list[Action]:  # a PR's comments are an issue's
    from bot.github.commands import parse

    action = _field(payload, "action", str, event=event)
    comment_id = _field(payload, "comment.id", int, event=event)
    if action != "created":
        return [Ignore(reason=f"comment {comment_id} was {action}; only a new comment runs a command")]
    login = _field(payload, "comment.user.login", str, event=event)
    if login.lower() in {b.lower() for b in config.github.bot_logins}:
        return [Ignore(reason=f"comment {comment_id} is the bot's own ({login!r}): it never runs a command")]
    body = _field(payload, "comment.body", str, event=event, optional=True) or ""
    if not parse(body):
        return [Ignore(reason=f"comment {comment_id} holds no `/replaybook` command line")]
    issue = payload.get("issue") if isinstance(payload.get("issue"), dict) else {}  # a PR's comment: `pull_request`
    return [RunCommand(comment_id=comment_id, number=_field(payload, "issue.number", int, event=event),
                       is_pr=isinstance(issue.get("pull_request"), dict),
                       state=_field(payload, "issue.state", str, event=event), login=login, body=body,
                       html_url=_field(payload, "comment.html_url", str, event=event, optional=True))]


_HANDLERS = {
    "issue_comment": _issue_comment,
    "workflow_run": _workflow_run,
    "pull_request": _pull_request,
    "pull_request_target": _pull_request,
    "pull_request_review": _review,
    "issues": _issues,
    "merge_group": _merge_group,
    "check_run": _check_run,
    "push": _push,
    "schedule": _schedule,
    "workflow_dispatch": _dispatch,
}
