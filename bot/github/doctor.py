"""``replaybook doctor``: the set-up checked, each finding a value saying what is wrong and how to fix it.

Every check reuses the code that would fail later: the sandbox is judged by
``bot.replay.sandbox.isolation.problems`` (the checks a replay makes before it starts),
``.replaybook.yml`` by ``bot.config.load``, the workflows by ``init --check``'s
plan (``bot.github.init.plan``). What only GitHub knows (the branch rules, the
Actions variables and secrets) is read through :class:`~bot.github.port.SetupPort`
when a token is given; a 403 or 404 there is "cannot tell", never a crash.

An invalid ``.replaybook.yml`` is a finding (exit 1), not bad input: the doctor
exists to say what is wrong with the set-up, and it still checks the rest.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bot import config as config_mod
from bot._util import yamlfile
from bot._util.markdown import table
from bot.errors import BadInput
from bot.github import init as init_mod
from bot.github.gate import GATE_CONTEXT
from bot.github.port import BranchRules, GitHubError, RequiredCheck, SetupPort
from bot.replay.cache import SECRET_ENV as CACHE_SECRET
from bot.replay.sandbox import isolation

Status = Literal["ok", "fail", "unknown", "skip"]

GATE_JOB = "admit"  # the admit workflow's job, which GitHub Actions reports as a check of that name
GATE_CHECKS = (GATE_CONTEXT, GATE_JOB)
GITHUB_ACTIONS_APP_ID = 15368  # the app every workflow job's check run comes from
PIN_FIX = ("Settings → Rules → Rulesets for {branch}: require the status check `replaybook/admit` and pick your "
           "Replaybook App as its source (API: `required_status_checks: [{{context: replaybook/admit, "
           "integration_id: APP_ID}}]`; classic branch protection: `checks: [{{context, app_id}}]`); without an App, "
           "create one first (docs/install.md, section 2; why: docs/github.md, Requiring it)")
APP_VARIABLE = "REPLAYBOOK_APP_ID"
APP_KEY_SECRET = "REPLAYBOOK_APP_PRIVATE_KEY"
APP_TOKEN_ACTION = "actions/create-github-app-token@"
INSTALL = "docs/install.md"
_SECRET_REF = re.compile(r"\bsecrets\.([A-Za-z_][A-Za-z0-9_]*)")
_BY_HAND = "check it by hand in Settings"
_WITH_TOKEN = f"run it with a maintainer's GITHUB_TOKEN (`gh auth token`) and --repo, or {_BY_HAND}"


@dataclass(frozen=True)
class Finding:
    """One check's result: ``detail`` says what was found, ``fix`` how to put it right (empty when ok)."""

    check: str
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Context:
    """What the GitHub checks can see besides the files: a port (None: no token), and what the job's
    environment says (``REPLAYBOOK_GITHUB_APP=1``; ``REPLAYBOOK_APP_ID`` given as ``vars.REPLAYBOOK_APP_ID``)."""

    port: SetupPort | None = None
    app_token: bool = False
    app_id_set: bool = False


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    api_calls: int = 0

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "fail"]

    def markdown(self) -> str:
        rows = [[f.check, f"**{f.status}**: {f.detail}" if f.status == "fail" else f"{f.status}: {f.detail}", f.fix]
                for f in self.findings]
        return table(["check", "status", "how to fix"], rows, width=400)

    def as_json(self) -> str:
        return json.dumps({"ok": not self.failed, "findings": [asdict(f) for f in self.findings],
                           "api_calls": self.api_calls}, indent=2)


def run(root: Path, context: Context = Context(), *, local_actions: bool = False,
        actions_sha: str | None = None) -> Report:
    """Every check on the repository at ``root``; BadInput only when ``root`` is not a folder."""
    root = Path(root)
    if not root.is_dir():
        raise BadInput(f"{root}: not a folder; pass the root of the repository to check")
    root = root.resolve()
    settings, config_findings = check_config(root)
    findings = [*config_findings, *check_sandbox(settings),
                *check_init(root, settings, local_actions=local_actions, actions_sha=actions_sha)]
    workflows = Workflows(root)
    variables = _read(context.port.variable_names) if context.port else None
    findings.append(check_app_token(workflows, context, variables))
    rules = protection = None
    if context.port is not None:
        branch = _read(context.port.default_branch)
        if isinstance(branch, str):
            rules = _read(lambda: context.port.branch_rules(branch))
            protection = _read(lambda: context.port.protection_checks(branch))
    else:
        branch = None
    findings.append(check_required(branch, rules, protection, context.port is not None))
    findings.append(check_merge_queue(workflows, branch, rules))
    secrets = _read(context.port.secret_names) if context.port else None
    findings += check_secrets(workflows, secrets, app_configured=_app_configured(context, variables))
    findings += check_app_key(workflows, context, branch, secrets, app_configured=_app_configured(context, variables))
    return Report(tuple(findings), context.port.calls if context.port else 0)


# ------------------------------------------------------------------ local checks


def check_config(root: Path) -> tuple[config_mod.Settings | None, list[Finding]]:
    """One finding per problem of ``.replaybook.yml`` (one row each), or one ``ok``."""
    try:
        settings = config_mod.load(root)
    except BadInput as exc:
        return None, [Finding("`.replaybook.yml`", "fail", problem,
                              "correct the field it names (docs/formats.md, the config); `replaybook schema` gives "
                              "the JSON Schema for your editor") for problem in exc.problems or [exc.message]]
    where = "valid" if settings.source else "absent: every key at its default"
    return settings, [Finding("`.replaybook.yml`", "ok", where)]


def check_sandbox(settings: config_mod.Settings | None) -> list[Finding]:
    """One finding per thing the sandbox lacks (one row each), or one ``ok``."""
    name = settings.config.replay.sandbox if settings else config_mod.Replay().sandbox
    if name == "none":
        return [Finding("sandbox", "fail", "`replay.sandbox: none` runs agents unisolated; the GitHub gate refuses it",
                        "set `replay.sandbox: bwrap` (or `docker`) in .replaybook.yml")]
    problems = isolation.problems(name)
    if problems:
        return [Finding("sandbox", "fail", f"{name}: {problem}",
                        f"{INSTALL}, \"Sandbox on the runner\" (on GitHub the admit and replay actions run "
                        "actions/sandbox.sh first)") for problem in problems]
    return [Finding("sandbox", "ok", f"{name} starts, with socat" + (" and strace" if isolation.traced(name) else ""))]


def check_init(root: Path, settings: config_mod.Settings | None, *, local_actions: bool,
               actions_sha: str | None) -> list[Finding]:
    """One finding per file `replaybook init` would write (one row each), or one ``ok``."""
    check = "workflows (`init --check`)"
    if settings is None:
        return [Finding(check, "skip", "needs a valid .replaybook.yml", "fix .replaybook.yml first")]
    try:
        plan = init_mod.plan(root, local_actions=local_actions, actions_sha=actions_sha)
    except BadInput as exc:
        return [Finding(check, "unknown", exc.message, "pass --actions-sha")]
    if not plan.needs_work:
        return [Finding(check, "ok", f"{len(plan.files)} files as `replaybook init` writes them")]
    return [Finding(check, "fail", f"`{f.path}` ({f.state})",
                    "run `replaybook init`" + (" (changed by hand: merge by hand, or `--force`)"
                                               if f.state == "conflict" else ""))
            for f in plan.needs_work]


class Workflows:
    """The Replaybook workflows on disk, parsed (a file that is missing or not YAML reads as None)."""

    def __init__(self, root: Path):
        self.root = root
        self.texts: dict[str, str] = {}
        self.docs: dict[str, dict | None] = {}
        for name, path in init_mod.WORKFLOWS.items():
            try:
                text = (root / path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                self.docs[name] = None
                continue
            self.texts[name] = text
            try:
                doc = yamlfile.parse(root / path, text, what="workflow").data
            except BadInput:
                doc = None
            self.docs[name] = doc if isinstance(doc, dict) else None

    def steps(self, name: str) -> list[dict]:
        jobs = (self.docs.get(name) or {}).get("jobs")
        return [s for job in (jobs.values() if isinstance(jobs, dict) else []) if isinstance(job, dict)
                for s in job.get("steps") or [] if isinstance(s, dict)]

    def triggers(self, name: str) -> set[str]:
        doc = self.docs.get(name) or {}
        on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on:` key as True
        if isinstance(on, str):
            return {on}
        return {str(k) for k in on} if isinstance(on, (dict, list)) else set()

    def mints_app_token(self, name: str) -> bool:
        """Whether ``name`` makes a GitHub App token and hands it to Replaybook's action as its github-token."""
        steps = self.steps(name)
        ids = {s.get("id") for s in steps if str(s.get("uses", "")).startswith(APP_TOKEN_ACTION) and s.get("id")}
        return any(f"steps.{i}.outputs.token" in str((s.get("with") or {}).get("github-token", ""))
                   for s in steps for i in ids)

    def jobs_reading(self, secret: str) -> list[tuple[str, str, Any]]:
        """(workflow, job, its ``environment:``) of every job whose text reads ``secrets.<secret>``."""
        out = []
        for name, doc in self.docs.items():
            jobs = (doc or {}).get("jobs")
            for job_id, job in (jobs.items() if isinstance(jobs, dict) else []):
                if isinstance(job, dict) and re.search(rf"\bsecrets\.{secret}\b", str(job)):
                    env = job.get("environment")
                    out.append((name, str(job_id), env.get("name") if isinstance(env, dict) else env))
        return out

    def secrets(self) -> list[str]:
        return sorted({m for text in self.texts.values() for m in _SECRET_REF.findall(text)} - {"GITHUB_TOKEN"})


# ------------------------------------------------------------------ what only GitHub knows


def check_app_token(workflows: Workflows, context: Context, variables: Any) -> Finding:
    """The workflow that opens PRs (distill) must open them as a GitHub App: GITHUB_TOKEN's start no workflow."""
    check, path = "App token (PRs start the gate)", init_mod.WORKFLOWS["distill"]
    why = ("rule PRs opened with GITHUB_TOKEN alone start no workflow (events that token causes never do), so the "
           "admit gate never runs on them")
    if workflows.docs.get("distill") is None:
        return Finding(check, "skip", f"no {path}", "run `replaybook init`")
    if not workflows.mints_app_token("distill"):
        return Finding(check, "fail", f"{path} opens PRs with GITHUB_TOKEN: {why}",
                       "`replaybook init` (its distill workflow mints an App token with actions/create-github-app-token), "
                       f"then create the App ({INSTALL}, section 2)")
    if context.app_token or context.app_id_set:
        how = "this job's token is a GitHub App's" if context.app_token else f"vars.{APP_VARIABLE} is set"
        return Finding(check, "ok", f"{path} mints an App token; {how}")
    if isinstance(variables, frozenset):
        if APP_VARIABLE in variables:
            return Finding(check, "ok", f"{path} mints an App token; vars.{APP_VARIABLE} is set")
        return Finding(check, "fail", f"vars.{APP_VARIABLE} is not set, so {path} falls back to GITHUB_TOKEN: {why}",
                       f"create and install a GitHub App, then set the variable {APP_VARIABLE} and the secret "
                       f"{APP_KEY_SECRET} in the environment `{init_mod.APP_ENVIRONMENT}` ({INSTALL}, section 2); until then dispatch replaybook-admit for each rule PR")
    if variables is None:
        return Finding(check, "skip", f"{path} mints an App token when vars.{APP_VARIABLE} is set; whether it is "
                       "needs a GitHub token", f"{_WITH_TOKEN} → Secrets and variables → Actions")
    return Finding(check, "unknown", f"{path} mints an App token when vars.{APP_VARIABLE} is set; "
                   + _cannot_read("the Actions variables", variables),
                   f"grant `variables: read`, or {_WITH_TOKEN} → Secrets and variables → Actions")


def check_required(branch: Any, rules: Any, protection: Any, has_port: bool) -> Finding:
    """``replaybook/admit`` (or the ``admit`` job) is required on the default branch: by a ruleset or by protection."""
    check = "required check"
    if not has_port:
        return Finding(check, "skip", "needs a GitHub token", _WITH_TOKEN + " → Rules")
    if not isinstance(branch, str):
        return Finding(check, "unknown", _cannot_read("the repository", branch), _WITH_TOKEN)
    found: list[RequiredCheck] = []
    if isinstance(rules, BranchRules):
        found += rules.required_checks
    if isinstance(protection, tuple):
        found += protection
    ours = [c for c in found if c.context in GATE_CHECKS]
    pinned = [c for c in ours if c.context == GATE_CONTEXT and c.app_id and c.app_id != GITHUB_ACTIONS_APP_ID]
    if pinned:
        c = pinned[0]
        return Finding(check, "ok", f"`{c.context}` is required on {branch} by {c.source}, pinned to app {c.app_id}")
    if ours:
        # Unpinned, a commit status anyone's workflow sets with GITHUB_TOKEN satisfies it; pinned to GitHub Actions,
        # a job of that name in a workflow the PR itself edits does. Only the App can report as the App.
        c = ours[0]
        source = "from any source" if not c.app_id else "pinned to GitHub Actions"
        return Finding(check, "fail", f"`{c.context}` is required on {branch} by {c.source}, but {source}: a workflow "
                       "a PR edits can report it (a status set with GITHUB_TOKEN, or a job of that name), so a rule "
                       "PR could pass without a replay", PIN_FIX.format(branch=branch))
    fix = PIN_FIX.format(branch=branch)
    unread = [what for what, got in (("its rulesets", rules), ("its branch protection", protection))
              if not isinstance(got, (BranchRules, tuple))]
    if not unread:
        others = ", ".join(f"`{c.context}`" for c in found) or "no check"
        return Finding(check, "fail", f"{branch} requires {others}, not `{GATE_CONTEXT}`: a rule PR can merge "
                       "without the gate", fix)
    errors = [got for got in (rules, protection) if isinstance(got, GitHubError)]
    return Finding(check, "unknown", f"no rule GitHub showed requires `{GATE_CONTEXT}` on {branch}, but "
                   + " and ".join(unread) + " could not be read" + (f" ({_status(errors[0])})" if errors else ""),
                   f"grant `administration: read` to the token, or {_BY_HAND} → Rules ({fix})")


def check_merge_queue(workflows: Workflows, branch: Any, rules: Any) -> Finding:
    """With a merge queue on, the admit workflow must run on ``merge_group``: else the queue waits for ever."""
    check, path = "merge queue", init_mod.WORKFLOWS["admit"]
    if workflows.docs.get("admit") is None:
        return Finding(check, "skip", f"no {path}", "run `replaybook init`")
    if "merge_group" in workflows.triggers("admit"):
        return Finding(check, "ok", f"{path} runs on merge_group"
                       + (" (the merge queue is on)" if isinstance(rules, BranchRules) and rules.merge_queue else ""))
    fix = f"add `merge_group:` to the `on:` of {path} (or `replaybook init`)"
    if isinstance(rules, BranchRules):
        if rules.merge_queue:
            return Finding(check, "fail", f"a merge queue is on for {branch} but {path} has no merge_group trigger: "
                           "the required check never reports in the queue, so nothing merges", fix)
        return Finding(check, "ok", f"no merge queue on {branch} ({path} has no merge_group trigger)", fix)
    if rules is None and not isinstance(branch, GitHubError):
        return Finding(check, "skip", f"{path} has no merge_group trigger; without a token the queue is not seen",
                       fix + " if you turn a merge queue on")
    return Finding(check, "unknown", f"{path} has no merge_group trigger; " + _cannot_read("the rulesets", rules),
                   fix + " if a merge queue is on")


def check_secrets(workflows: Workflows, names: Any, *, app_configured: bool | None) -> list[Finding]:
    """Each secret the Replaybook workflows read exists (names only); the App's key only once the App is set."""
    out, wanted = [], workflows.secrets()
    if not isinstance(names, frozenset) and wanted:  # one row: nothing can be told of any of them
        listed = ", ".join(f"`{n}`" for n in wanted)
        out.append(Finding(f"secrets ({listed})", "skip", "needs a GitHub token", _WITH_TOKEN) if names is None else
                   Finding(f"secrets ({listed})", "unknown", _cannot_read("the Actions secrets", names),
                           f"grant `secrets: read` (a workflow's GITHUB_TOKEN never can), or {_WITH_TOKEN}"))
    for secret in wanted if isinstance(names, frozenset) else ():
        check = f"secret `{secret}`"
        if secret == APP_KEY_SECRET:
            continue  # an environment's secret, never the repository's: ``check_app_key``
        elif secret in names:
            out.append(Finding(check, "ok", "set"))
        else:
            out.append(Finding(check, "fail", "the workflows read it, but it is not set", "Settings → Secrets and "
                               f"variables → Actions → New repository secret `{secret}` ({INSTALL}, section 3)"))
    if CACHE_SECRET not in wanted:
        out.append(Finding(f"secret `{CACHE_SECRET}`", "skip", "the workflows keep no replay cache between runs, "
                           "so none is needed (a cache kept between runs must be signed with it)"))
    return out


def check_app_key(workflows: Workflows, context: Context, branch: Any, secrets: Any, *,
                  app_configured: bool | None) -> list[Finding]:
    """Where the App's key lives: an environment only the default branch (and its merge queue) may enter, read by
    every job that mints the App's token; no repository or organisation secret of that name (every workflow,
    a PR's edited one too, can read those). docs/github.md, "Where the App's key lives"."""
    env_name, out = init_mod.APP_ENVIRONMENT, []
    where = f"environment `{env_name}`"
    default = branch if isinstance(branch, str) else "<default>"
    policy = (f"Deployment branches and tags: *Selected branches and tags*, add {default} (with a merge queue also "
              f"`gh-readonly-queue/{default}/*`), nothing else; or *Protected branches only*")
    why = "docs/github.md, \"Where the App's key lives\""
    fix_env = f"Settings → Environments → `{env_name}` → {policy} ({why})"
    loose = [f"{init_mod.WORKFLOWS.get(w, w)} job `{j}`" for w, j, env in workflows.jobs_reading(APP_KEY_SECRET)
             if env != env_name]
    out.append(Finding("App key: the jobs that read it", "fail", f"{', '.join(loose)} read {APP_KEY_SECRET} outside "
                       f"the {where}: a repository secret there is readable by every workflow a PR edits",
                       f"`replaybook init` (its jobs declare `environment: {env_name}`), or add that line to each")
               if loose else Finding("App key: the jobs that read it", "ok", f"every one declares the {where}"))
    if app_configured is False:
        return [*out, Finding(f"App key: {where}", "skip", f"needed only with the App (vars.{APP_VARIABLE})")]
    if context.port is None:
        return [*out, Finding(f"App key: {where}", "skip", "needs a GitHub token", _WITH_TOKEN + " → Environments")]
    env = _read(lambda: context.port.environment(env_name))
    if isinstance(env, GitHubError):
        return [*out, Finding(f"App key: {where}", "unknown", _cannot_read("the environment", env),
                              f"grant `actions: read`, or {_WITH_TOKEN} → Environments")]
    if env is None:
        out.append(Finding(f"App key: {where}", "fail", "it does not exist, so no job can read the key from it "
                           "(and GitHub makes it, open to every branch, the first time a job names it)",
                           f"Settings → Environments → New environment `{env_name}`; {policy}; then add the "
                           f"environment secret {APP_KEY_SECRET} ({why})"))
    else:
        out.append(_branch_policy(env, branch, where, fix_env))
        names = _read(lambda: context.port.environment_secret_names(env_name))
        check = f"App key: secret `{APP_KEY_SECRET}` in the {where}"
        if isinstance(names, GitHubError):
            out.append(Finding(check, "unknown", _cannot_read("the environment's secrets", names),
                               f"grant `secrets: read`, or {_WITH_TOKEN} → Environments → `{env_name}`"))
        elif APP_KEY_SECRET in names:
            out.append(Finding(check, "ok", "set"))
        else:
            out.append(Finding(check, "fail", "not set: the jobs that mint the App's token get no key",
                               f"Settings → Environments → `{env_name}` → Environment secrets → Add `{APP_KEY_SECRET}` "
                               "(the App's private key, the whole .pem)"))
    if isinstance(secrets, frozenset) and APP_KEY_SECRET in secrets:
        out.append(Finding(f"App key: no repository secret `{APP_KEY_SECRET}`", "fail", "a repository (or "
                           "organisation) secret of that name exists: every workflow can read it, a PR's edited "
                           "`pull_request` workflow too, and post as the App",
                           f"delete it (Settings → Secrets and variables → Actions; an organisation's: remove this "
                           f"repository from its access) and keep the key in the {where} only"))
    elif isinstance(secrets, frozenset):
        out.append(Finding(f"App key: no repository secret `{APP_KEY_SECRET}`", "ok", "none: only the environment's"))
    return out


def _branch_policy(env: Any, branch: Any, where: str, fix: str) -> Finding:
    check = f"App key: {where}"
    if env.branches == "protected":
        return Finding(check, "ok", "protected branches only may enter it")
    if env.branches != "custom":
        return Finding(check, "fail", "every branch may enter it: a workflow on any branch a PR pushes reads the key",
                       fix)
    allowed = {branch, f"gh-readonly-queue/{branch}/*"} if isinstance(branch, str) else set()
    extra = [p for p in env.patterns if p not in allowed]
    if extra or not isinstance(branch, str) or branch not in env.patterns:
        what = [f"it also lets in {', '.join(f'`{p}`' for p in extra)}"] if extra else []
        what.append(f"it does not let in {branch}" if isinstance(branch, str) and branch not in env.patterns
                    else "" if isinstance(branch, str) else "the default branch could not be read")
        return Finding(check, "fail", "; ".join(w for w in what if w) + ": only the default branch (and its merge "
                       "queue) may read the key", fix)
    return Finding(check, "ok", f"only {', '.join(f'`{p}`' for p in env.patterns)} may enter it")


def _app_configured(context: Context, variables: Any) -> bool | None:
    if context.app_token or context.app_id_set:
        return True
    return (APP_VARIABLE in variables) if isinstance(variables, frozenset) else None


def _read(call: Any) -> Any:
    """``call()``, or the GitHubError it raised: a refusal is a finding's evidence, never a crash."""
    try:
        return call()
    except GitHubError as exc:
        return exc


def _status(exc: GitHubError) -> str:
    return f"HTTP {exc.status}" if exc.status else "GitHub could not be reached"


def _cannot_read(what: str, got: Any) -> str:
    if isinstance(got, GitHubError):
        return f"cannot tell: GitHub refused to show {what} ({_status(got)})"
    return f"cannot tell: {what} were not read"


__all__ = ["Context", "Finding", "Report", "Workflows", "run"]
