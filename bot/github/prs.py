"""Pull requests the bot opens: one per proposed rule (distill), one for playbook maintenance, one for rule hits.

Each is found again by the hidden marker of its key (``rule-NNNN``,
``maintenance``, ``hits``) on a ``replaybook/…`` branch, and updated in place
rather than opened twice. Merging a rule PR is admission: it adds the rule
file, and GitHub closes the incident issues the body names with ``Closes #N``.

On GitHub the incidents are the open incident issues, read as ``gh-N`` (the
issue number), so a rule's ``cites`` name the issues its PR closes.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import tempfile
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from bot import capture as capture_mod
from bot import rule as rules_mod
from bot import markdown, yamlfile
from bot.errors import BadInput
from bot.github import issue_form
from bot.github.context import Context, Outcome, code, fenced
from bot.github.events import CheckPlaybookInvariants, Distill, RecordHits
from bot.github.port import (
    BOT_LOGINS,
    GitHubError,
    GitHubPort,
    IssueRef,
    PullRef,
    fit_body,
    marker,
    marker_keys,
    written_by,
)
from bot.neutralise import neutralise
from bot.incident import Incident, IncidentStore

MAINTENANCE_KEY = "maintenance"
MAINTENANCE_MARKER = marker(MAINTENANCE_KEY)
HITS_KEY = "hits"
BRANCH_PREFIX = "replaybook/"
RULE_BRANCH = BRANCH_PREFIX + "rule-"

# ------------------------------------------------------------------ finding and writing the bot's PRs


def bot_logins(ctx: Context) -> tuple[str, ...]:
    """The accounts the bot writes as (github.bot_logins); only their PRs are the bot's."""
    return tuple(ctx.config.bot_logins) if ctx.config is not None else BOT_LOGINS


def trusted(pr: PullRef, logins: tuple[str, ...] | list[str] = BOT_LOGINS) -> bool:
    """Whether ``pr`` is the bot's own: opened by one of its accounts, from a branch of this repository.

    Anyone can open a PR from a fork whose branch is named ``replaybook/rule-0099`` and whose body holds
    the bot's markers; only the author and the head repository say who wrote it.
    """
    return pr.same_repo and written_by(pr.author, logins)


def _mine(prs: list[PullRef], key: str, logins: tuple[str, ...] = BOT_LOGINS) -> PullRef | None:
    """The bot's PR for ``key``: its marker in the body, on a branch of the bot's, opened by the bot; an open one first."""
    found = [p for p in prs if key in marker_keys(p.body) and _bot_branch(p.head_ref, key) and trusted(p, logins)]
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
                if exc.status != 422 or "already exists" not in exc.message.lower():
                    raise  # e.g. 422 "Object does not exist": another name would fail the same way
        branch = f"{BRANCH_PREFIX}{key}-{n}"
    else:
        raise GitHubError(f"no free branch name for {key}: delete old {BRANCH_PREFIX}{key}-* branches", status=422)
    _write_files(ctx.port, branch, files, title)
    return ctx.port.create_pr(title, body, branch, base)


def _write_files(port: GitHubPort, branch: str, files: dict[str, str | None], message: str) -> int:
    """Put (or delete, for None) every file on ``branch`` in one commit; the number of commits made (0 or 1)."""
    return int(port.commit_files(branch, files, neutralise(message))) if files else 0


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


def distill(action: Distill, ctx: Context) -> list[Outcome]:
    """Distill the open incident issues; one PR per proposed rule, an open PR citing the same incidents updated."""
    if ctx.distiller is None:
        return [Outcome(action.kind, "failed", "error: distill needs a model: set ANTHROPIC_API_KEY (and "
                                               "ANTHROPIC_BASE_URL for a proxy) in the job's env")]
    from bot import distill as distill_mod

    prs = ctx.port.list_prs("all")
    rule_prs = [p for p in prs if rule_id_of(p, bot_logins(ctx))]
    with tempfile.TemporaryDirectory(prefix="replaybook-incidents-") as tmp:
        store, unreadable = incidents_from_issues(ctx, Path(tmp))
        report = distill_mod.distill(ctx.settings, ctx.distiller, today=ctx.today, incidents=store,
                                     reserved_ids={rule_id_of(p) for p in rule_prs})
    outcomes: list[Outcome] = []
    held: list[str] = []
    used = {p.head_ref for p in prs}
    open_count = sum(p.state == "open" for p in rule_prs)
    base = from_sha = None
    for proposal in report.proposals:
        cites = set(proposal.cites)
        current = next((p for p in rule_prs if p.state == "open" and cites & cites_of(p)), None)
        if current is not None:
            # The same incidents again: the open PR is brought up to date, under its own id.
            rule_id = rule_id_of(current)
            body, files = _rule_pr(proposal, rule_id, ctx)
            changed = _refresh_pr(ctx, current, body, files, f"Update {rule_id}")
            outcomes.append(Outcome(action.kind, "done" if changed else "unchanged",
                                    f"{rule_id}: {'updated' if changed else 'already current in'} PR "
                                    f"#{current.number}", _pr_url(current)))
            continue
        refused = next((p for p in rule_prs if p.state == "closed" and not p.merged and cites <= cites_of(p)), None)
        if refused is not None:
            outcomes.append(Outcome(action.kind, "skipped", f"{proposal.id}: PR #{refused.number} proposed a rule for "
                                    "these incidents and was closed without merging; no new incident cites them, so "
                                    "no PR was opened", _pr_url(refused)))
            continue
        if open_count >= ctx.max_open_rule_prs:
            held.append(proposal.id)
            continue
        if base is None:
            base, from_sha = ctx.port.default_branch(), ctx.port.default_branch_sha()
        body, files = _rule_pr(proposal, proposal.id, ctx)
        pr = _open_pr(ctx, proposal.id, f"Rule {proposal.id}: {neutralise(capture_mod.one_liner(proposal.rule, 120))}",
                      body, files, base, from_sha, used)
        used.add(pr.head_ref)
        open_count += 1
        outcomes.append(Outcome(action.kind, "done", f"{proposal.id}: opened PR #{pr.number}", _pr_url(pr)))
    outcomes.append(Outcome(action.kind, "done" if report.proposals else "unchanged",
                            _distill_summary(report, held, unreadable, ctx)))
    return outcomes


def incidents_from_issues(ctx: Context, folder: Path) -> tuple[IncidentStore, list[int]]:
    """The open incident issues as a store of ``gh-N`` incidents in ``folder``, and the numbers that do not parse.

    An issue labelled invalid, or one whose form does not parse, is left out
    (the issue itself says what to fix); one the bot filed is read from its
    yaml block. The id is always ``gh-<number>``: the rule PR closes it.
    """
    store = IncidentStore(folder)
    unreadable: list[int] = []
    for issue in ctx.port.list_issues(ctx.labels.incident, "open"):
        incident = _incident_of(issue, ctx)
        if incident is None:
            unreadable.append(issue.number)
        else:
            store.add(incident)
    return store, unreadable


def _incident_of(issue: IssueRef, ctx: Context) -> Incident | None:
    if ctx.labels.invalid in issue.labels:
        return None
    created = issue.created or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    data, problems = issue_form.parse_incident_issue(issue.body, number=issue.number, created_at=created,
                                                     html_url=issue.url or None)
    if problems:
        return None
    data = {**data, "id": f"gh-{issue.number}"}
    try:
        return Incident.model_validate(data)
    except ValueError:
        return None


def is_rule_pr(pr: PullRef, logins: tuple[str, ...] | list[str] = BOT_LOGINS) -> bool:
    return bool(rule_id_of(pr, logins))


def rule_id_of(pr: PullRef, logins: tuple[str, ...] | list[str] = BOT_LOGINS) -> str:
    """The rule id of one of the bot's rule PRs (see :func:`trusted`), or ''."""
    if not pr.head_ref.startswith(RULE_BRANCH) or not trusted(pr, logins):
        return ""
    return next((k for k in marker_keys(pr.body) if re.fullmatch(r"rule-\d{4,}", k)), "")


def cites_of(pr: PullRef) -> set[str]:
    return {k[len("cite:"):] for k in marker_keys(pr.body) if k.startswith("cite:")}


def _distill_summary(report: Any, held: list[str], unreadable: list[int], ctx: Context) -> str:
    parts = [f"{len(report.groups)} group(s), {len(report.proposals)} proposal(s), "
             f"{sum(r.what == 'refused' for r in report.refusals)} refused"]
    if report.simulated:
        parts.insert(0, "SIMULATED model")
    refused = [r for r in report.refusals if r.what in ("refused", "failed")]
    if refused:
        parts.append("why: " + code(" | ".join(f"{r.group}: {r.reason}" for r in refused), 600))
    if unreadable:
        parts.append("left out (invalid form): " + ", ".join(f"#{n}" for n in unreadable))
    if report.failed:
        parts.append(f"{report.failed} model call(s) failed")
    if report.spec_changes:
        parts.append(f"{len(report.spec_changes)} spec change(s) proposed but not opened as PRs: "
                     + ", ".join(s.id for s in report.spec_changes))
    if held:
        parts.append(f"held back by the cap of {ctx.max_open_rule_prs} open rule PRs "
                     f"(github.max_open_rule_prs): {', '.join(held)}")
    return "distill: " + "; ".join(parts)


def _rule_pr(proposal: Any, rule_id: str, ctx: Context) -> tuple[str, dict[str, str | None]]:
    """The PR body and files for a proposal admitted as ``rule_id``.

    The files are what merging must change for the admission to be whole:
    the rule under ``rules/``, any new scenario, and, when the playbook is at
    its cap, the coldest rule moved to ``archive/``. PLAYBOOK.md is not in
    it (two rule PRs would always conflict there); the push after the merge
    re-renders it through the maintenance PR.
    """
    settings, root = ctx.settings, ctx.root
    folder = settings.config.paths.playbook.strip("/")
    text = Path(proposal.path).read_text("utf-8")
    if rule_id != proposal.id:
        text = yamlfile.set_top_level(text, "id", rule_id)
    files = _admission_files(ctx, rule_id, text)
    if proposal.new_scenario:
        scenario = settings.path("scenarios") / proposal.scenario
        for path in sorted(p for p in scenario.rglob("*") if p.is_file()):
            files[path.relative_to(root).as_posix()] = path.read_text("utf-8")
    cites = [c for c in proposal.cites if _citable(c)]
    marks = "\n".join([marker(rule_id), *(marker(f"cite:{c}") for c in cites)])
    closes = [f"Closes #{c[3:]}" for c in cites if re.fullmatch(r"gh-\d+", c)]
    retired = sorted(p.rsplit("/", 1)[-1].removesuffix(".yaml") for p, t in files.items()
                     if t is not None and p.startswith(f"{folder}/archive/"))
    scenario_line = (f"a new scenario, {code(proposal.scenario, 120)}, added by this PR" if proposal.new_scenario
                     else f"the existing scenario {code(proposal.scenario, 120)}")
    summary = "\n".join([
        f"## Proposed rule {rule_id}" + (" (provisional: one incident)" if proposal.provisional else ""),
        "", fenced(proposal.rule), "",
        f"**Cites** ({len(proposal.cites)} incident(s)):", *(f"- {code(c, 120)}" for c in proposal.cites), "",
        f"**Replay:** {scenario_line}. To replay it locally: "
        f"`replaybook gate {folder}/rules/{rule_id}.yaml` (add `--model` and ANTHROPIC_API_KEY for the real model).",
        *(["", f"**At the cap of {settings.cap}:** merging also retires the coldest rule(s) to archive/: "
           + ", ".join(retired) + "."] if retired else []),
        "",
        "Merging this PR admits the rule. The `replaybook/admit` status replays the scenario with and without the "
        "rule and decides. Close the PR to refuse it; distill opens another only when new incidents come.",
        *(["", *closes] if closes else []),
    ])
    return fit_body({"marker": marks, "summary": summary}), files


def _admission_files(ctx: Context, rule_id: str, text: str) -> dict[str, str | None]:
    """The rule file and, past the cap, the retirements its admission brings (relative path -> text, None: delete)."""
    from bot.playbook import Playbook

    settings = ctx.settings
    folder = settings.config.paths.playbook.strip("/")
    source = ctx.root / folder
    with tempfile.TemporaryDirectory(prefix="replaybook-admission-") as tmp:
        copy = Path(tmp) / folder
        if source.is_dir():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".*"))
        shutil.rmtree(copy / "proposed", ignore_errors=True)  # this run's proposals: only this one is admitted
        (copy / "rules").mkdir(parents=True, exist_ok=True)
        (copy / "rules" / f"{rule_id}.yaml").write_text(text, encoding="utf-8")
        book = Playbook(copy, root=Path(tmp), cap=settings.cap)
        try:
            book.retire_over_cap(ctx.today or date.today())
        except BadInput:
            pass  # a broken rule on the base: the gate and the invariant check say so
        changed = _changed(source, copy, folder)
    keep = (f"{folder}/rules/", f"{folder}/archive/")
    return {path: text for path, text in changed.items() if path.startswith(keep)}


def _citable(incident_id: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*", incident_id))


# ------------------------------------------------------------------ record_hits


def record_hits(action: RecordHits, ctx: Context) -> list[Outcome]:
    """``[rule-NNNN]`` in the agent's merged PRs and commits since the lookback, as one batch in one PR.

    A hit moves the rule's ``last_hit`` forward (never back), so scanning the
    same window twice records nothing new, and a hit already in the open hits
    PR is not written again. The retirement order reads ``last_hit``.
    """
    logins = list(ctx.config.agent_logins) if ctx.config else []
    label = ctx.config.agent_label if ctx.config else None
    if not logins and not label:
        return [Outcome(action.kind, "skipped", "no agent account is configured (github.agent_logins in "
                                                ".replaybook.yml), so no citation counts as a hit")]
    today = ctx.today or datetime.now(timezone.utc).date()
    since = today - timedelta(days=action.lookback_days)
    seen: dict[str, tuple[date, str]] = {}  # rule id -> (latest day, where)

    def note(text: str, day: date, where: str) -> None:
        for rule_id in rules_mod.citations(text):
            if rule_id not in seen or seen[rule_id][0] < day:
                seen[rule_id] = (day, where)

    agents = {login.lower() for login in logins}
    prs = ctx.port.list_prs("all")
    for pr in prs:
        if pr.merged_at and pr.merged_at[:10] >= since.isoformat() and (
                pr.author.lower() in agents or (label and label in pr.labels)):
            note(f"{pr.title}\n{pr.body}", date.fromisoformat(pr.merged_at[:10]), f"PR #{pr.number}")
    for login in logins:
        for commit in ctx.port.commits_since(f"{since.isoformat()}T00:00:00Z", login):
            if commit.date:
                note(commit.message, date.fromisoformat(commit.date[:10]), f"commit {commit.sha[:12]}")
    files, rows, unknown = _hit_files(ctx, seen)
    if not files:
        what = f"{len(seen)} rule(s) cited, none more recently than recorded" if seen else "no rule was cited"
        extra = f"; not in the playbook: {', '.join(unknown)}" if unknown else ""
        return [Outcome(action.kind, "unchanged", f"hits since {since}: {what}{extra}")]
    summary = "\n".join([
        f"## Replaybook: rule hits ({len(rows)} rule(s))", "",
        f"The agent cited these rules as `[rule-NNNN]` in merged PRs or commits since {since}. "
        "Merging records the hits; past the cap the rule with the lowest score (docs/playbook.md) retires first.", "",
        markdown.table(["rule", "last hit before", "last hit now", "where"], rows),
        *(["", "Cited but not in the playbook (retired or unknown): " + ", ".join(unknown)] if unknown else []),
    ])
    body = fit_body({"marker": marker(HITS_KEY), "summary": summary}, trim_first=("summary",))
    found = _mine(prs, HITS_KEY, bot_logins(ctx))
    if found is not None and found.state == "open":
        changed = _refresh_pr(ctx, found, body, files, "Record rule hits")
        return [Outcome(action.kind, "done" if changed else "unchanged",
                        f"{len(rows)} rule hit(s): {'updated' if changed else 'already in'} PR #{found.number}",
                        _pr_url(found))]
    pr = _open_pr(ctx, HITS_KEY, "Replaybook: record rule hits", body, files, ctx.port.default_branch(),
                  ctx.port.default_branch_sha(), {p.head_ref for p in prs})
    return [Outcome(action.kind, "done", f"{len(rows)} rule hit(s): opened PR #{pr.number}", _pr_url(pr))]


def _hit_files(ctx: Context, seen: dict[str, tuple[date, str]]
               ) -> tuple[dict[str, str | None], list[list[str]], list[str]]:
    folder = ctx.settings.config.paths.playbook.strip("/")
    rules_dir = ctx.root / folder / "rules"
    files: dict[str, str | None] = {}
    rows: list[list[str]] = []
    unknown: list[str] = []
    for rule_id, (day, where) in sorted(seen.items()):
        path = rules_dir / f"{rule_id}.yaml"
        if not path.is_file():
            unknown.append(rule_id)
            continue
        try:
            rule = rules_mod.load(path)
        except BadInput:
            continue  # the invariant check reports a broken rule file
        if rule.last_hit is not None and rule.last_hit >= day:
            continue
        text = path.read_text(encoding="utf-8")
        text = yamlfile.set_top_level(text, "hits", str((rule.hits or 0) + 1))  # one per day it moves
        files[f"{folder}/rules/{rule_id}.yaml"] = yamlfile.set_top_level(text, "last_hit", day.isoformat())
        rows.append([rule_id, str(rule.last_hit or "never"), str(day), where])
    return files, rows, unknown


# ------------------------------------------------------------------ check_playbook_invariants


def check_invariants(action: CheckPlaybookInvariants, ctx: Context) -> list[Outcome]:
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
    listed = "\n".join(f"- {code(p, 500)}" for p in problems)
    todo = "\n".join(f"- {code(p, 500)}" for p in left) or "- nothing: merging this PR fixes every problem"
    summary = "\n".join([
        f"## Replaybook: the playbook needs maintenance ({len(problems)} problem(s))", "",
        f"`replaybook playbook check` on `{action.after_sha[:12]}` found:", "", listed, "",
        "**This PR fixes:** " + ("; ".join(fixed) if fixed else "nothing mechanically"), "",
        "**Still needs a person:**", todo,
    ])
    body = fit_body({"marker": MAINTENANCE_MARKER, "summary": summary}, trim_first=("summary",))
    prs = ctx.port.list_prs("open")
    found = _mine(prs, MAINTENANCE_KEY, bot_logins(ctx))
    if found is not None:
        changed = _refresh_pr(ctx, found, body, files, "Playbook maintenance")
        return [Outcome(action.kind, "done" if changed else "unchanged",
                        f"{where}: {len(problems)} problem(s); "
                        f"{'updated' if changed else 'already listed in'} PR #{found.number}", _pr_url(found))]
    if not files:
        return [Outcome(action.kind, "failed", f"{where}: {len(problems)} problem(s), none fixable mechanically: "
                                               + code("; ".join(problems), 600))]
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
