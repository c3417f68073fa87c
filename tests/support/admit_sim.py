"""The admit workflow's simulation, shared by the workflow tests: a workspace, the fake GitHub, and the runner.

See tests/github/test_workflows_sim.py for what is simulated and how.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

from actsim import ActionContext, ActionFailed, WorkflowResult, run_workflow, stub_python
from fakes.github import FakeGitHub
from helpers import REPO, rule_yaml, write
from support.github import git
from support.webhooks import example
from support.workflows import RULE, SCENARIO

from bot.playbook.store import Playbook
from bot.replay.gateway.server import Gateway

OWNER, NAME = "octo", "app"


def commit_all(ws: Path, message: str) -> str:
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "--allow-empty", "-m", message)
    return git(ws, "rev-parse", "HEAD")


def files_of(ws: Path) -> dict[str, str]:
    return {p.relative_to(ws).as_posix(): p.read_text("utf-8") for p in sorted(ws.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(ws).parts}


def make_workspace(path: Path, *, scenario: bool = False, distill_threshold: int = 10, source: bool = False) -> Path:
    """A small repository for the runner to check out: our workflows and composite actions (with pyproject.toml
    beside them: install.sh installs from there), .replaybook.yml, an empty rendered playbook and, with
    ``scenario``, one scenario. With ``source``, Replaybook's own source too (bot/, README.md, hatch_build.py), so
    a real pip builds and installs it from there, as install.sh does on a runner. One commit on ``main``."""
    path.mkdir(parents=True)
    shutil.copytree(REPO / ".github", path / ".github")
    shutil.copytree(REPO / "actions", path / "actions")
    shutil.copy(REPO / "pyproject.toml", path / "pyproject.toml")
    if source:
        shutil.copytree(REPO / "bot", path / "bot", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("README.md", "hatch_build.py"):
            shutil.copy(REPO / name, path / name)
    (path / ".replaybook.yml").write_text(
        f"github:\n  watched_workflows: [ci]\n  distill_threshold: {distill_threshold}\n", encoding="utf-8")
    if scenario:
        shutil.copytree(SCENARIO, path / "scenarios" / SCENARIO.name,
                        ignore=shutil.ignore_patterns("incidents", "logs", "rule.yaml"))
    Playbook(path / "playbook", root=path).render()
    git(path, "init", "-q", "-b", "main")
    commit_all(path, "start")
    return path


def retarget(payload: dict) -> dict:
    """An example payload, moved to the fake's repository (octo/app, default branch main)."""
    payload = copy.deepcopy(payload)
    repo = payload["repository"]
    repo.update(name=NAME, full_name=f"{OWNER}/{NAME}", default_branch="main")
    if "owner" in repo:
        repo["owner"]["login"] = OWNER
    return payload


def fresh_checkout(w: dict, ctx: ActionContext) -> dict:
    """actions/checkout on a fresh runner (actsim's built-in only records its inputs): the workspace at ``ref``
    (when given; else the commit the test arranged, standing for the event's), nothing an earlier job left behind,
    and, unless ``fetch-depth: 0``, a shallow history of one commit, as the action's default fetch leaves it."""
    ref, ws = str(w.get("ref") or ""), ctx.workspace
    if w.get("path"):  # a second repository beside the first: a clone of the same remote at ``ref`` (else the event's)
        target = ws / str(w["path"])
        shutil.rmtree(target, ignore_errors=True)  # the action empties a folder that is not its clone
        try:
            git(ws, "clone", "-q", "--no-checkout", str(ws), str(target))
            git(target, "checkout", "-q", "--detach", ref or ctx.github["sha"])
        except subprocess.CalledProcessError as exc:
            raise ActionFailed(f"checkout {ref!r} into {w['path']}: {exc.stderr.strip()}") from None
        return {"ref": ref or ctx.github["ref"], "commit": git(target, "rev-parse", "HEAD")}
    try:
        if ref:
            git(ws, "checkout", "-q", "--detach", ref)
        git(ws, "clean", "-ffdxq")
        head = git(ws, "rev-parse", "HEAD")
    except subprocess.CalledProcessError as exc:
        raise ActionFailed(f"checkout {ref!r}: {exc.stderr.strip()}") from None
    shallow = ws / ".git" / "shallow"  # git's own record of a shallow clone's cut-off commits
    if str(w.get("fetch-depth", 1)) == "0":
        shallow.unlink(missing_ok=True)
    elif str(w.get("fetch-depth", 1)) == "1":
        shallow.write_text(head + "\n")
    else:
        raise NotImplementedError(f"checkout fetch-depth {w.get('fetch-depth')!r}")
    return {"ref": ref or ctx.github["ref"], "commit": head}


class Sim:
    """Runs our workflows in one workspace against one fake GitHub, as GitHub would for each event."""

    def __init__(self, ws: Path, gh: FakeGitHub, tmp: Path, *, index: str | None = None):
        """``index``: the runner's package index. None: none at all (``PIP_NO_INDEX``), and setup-python's
        interpreter is the stub that logs pip's arguments (``pip_log``). A URL (a PyPI mirror on 127.0.0.1): this
        interpreter, so install.sh's venv and pip are real and fetch from there (``REPLAYBOOK_PACKAGE_INDEX``)."""
        self.ws, self.gh, self.tmp, self.index = ws, gh, tmp, index
        self.pip_log = tmp / "pip.log"
        self.python = Path(sys.executable) if index else stub_python(tmp / "py", self.pip_log)
        self.run_id = 100

    def run(self, workflow: str, event: str, payload: dict, *, secrets: dict | None = None, vars: dict | None = None,
            model: Gateway | None = None, **kw) -> WorkflowResult:
        # No package index on this runner (unless given one): `replaybook model install embeddings` fails at once
        # (offline), and the gate judges twins by word overlap, as its report then says.
        env = {"REPLAYBOOK_GITHUB_BACKOFF": "0", "REPLAYBOOK_GITHUB_THROTTLE": "0",
               **({"REPLAYBOOK_PACKAGE_INDEX": self.index} if self.index else {"PIP_NO_INDEX": "1"})}
        if os.environ.get("PYTHONPATH"):  # a worktree on a shared venv: the runner runs the code under test too
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        if os.environ.get("REPLAYBOOK_CACHE_DIR"):  # conftest's shared shim cache
            env["REPLAYBOOK_CACHE_DIR"] = os.environ["REPLAYBOOK_CACHE_DIR"]
        # The machine's trust store and proxy, as a runner has its own: a scenario's environment is built with uv,
        # and whether an earlier test already built it must not decide whether this one can.
        env.update({k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY",
                                                                 "HTTP_PROXY", "NO_PROXY", "https_proxy", "no_proxy")})
        secrets = dict(secrets or {})
        if model is not None:  # the repository secret, and a proxy in front of the Messages API on the runner
            secrets["ANTHROPIC_API_KEY"] = model.token
            env["ANTHROPIC_BASE_URL"] = model.url
        self.run_id += 1
        path = self.ws / ".github" / "workflows" / f"replaybook-{workflow}.yml"
        if event in ("workflow_dispatch", "check_run") and "sha" not in kw and "main" in self.gh.state.refs:
            kw["sha"] = self.gh.state.refs["main"]  # as GitHub sets GITHUB_SHA: the default branch's head
        base_sha = payload["pull_request"]["base"]["sha"] if event == "pull_request_target" else None
        known = base_sha and subprocess.run(["git", "-C", str(self.ws), "cat-file", "-e", f"{base_sha}^{{commit}}"],
                                            capture_output=True).returncode == 0
        if known:  # GitHub runs the base branch's copy of the workflow, never the PR's
            path = self.tmp / f"base-{self.run_id}-{path.name}"
            path.write_text(git(self.ws, "show", f"{base_sha}:.github/workflows/replaybook-{workflow}.yml"),
                            encoding="utf-8")
        # else: a real webhook example's base commit, unknown here; the workspace is the base branch itself
        return run_workflow(path, event, payload,
                            workspace=self.ws, env=env, secrets=secrets, vars=vars, repository=f"{OWNER}/{NAME}",
                            api_url=self.gh.url, run_id=self.run_id,
                            uses={"actions/setup-python": lambda w, ctx: {"python-path": str(self.python)},
                                  "actions/checkout": fresh_checkout}, **kw)

    def seed_main(self) -> str:
        """The fake's main branch holds the workspace's files at its head commit."""
        for rel, text in files_of(self.ws).items():
            self.gh.add_file(rel, text)
        sha = git(self.ws, "rev-parse", "HEAD")
        self.gh.state.refs["main"] = sha
        return sha


def only_job(result: WorkflowResult, job: str):
    assert result.triggered, result.why
    assert job in result.jobs, result.log()
    return result.jobs[job]


def checkout(job, path: str | None = None) -> dict:
    """The evaluated `with:` of the job's actions/checkout step (the one into ``path``, else the workspace's)."""
    (step,) = [s for s in job.steps if s.kind == "uses" and s.name.startswith("actions/checkout@")
               and s.inputs.get("path") == path]
    return step.inputs


PR_NUMBER = 2  # the examples' pull request


def make_rule_pr(tmp_path, gh) -> tuple[Sim, str, str]:
    """A workspace on the rule PR's branch: main (one scenario, empty playbook) plus one commit adding the rule,
    the whole history fetched (`fetch-depth: 0`). The fake holds main and the open PR. Returns (sim, base, head)."""
    sim = Sim(make_workspace(tmp_path / "ws", scenario=True), gh, tmp_path)
    base = sim.seed_main()
    git(sim.ws, "checkout", "-q", "-b", "replaybook/rule-0001")
    write(sim.ws / "playbook" / "rules" / "rule-0001.yaml",
          rule_yaml("rule-0001", cites=("gh-1", "gh-2"), text=RULE, created="2026-11-30"))
    head = commit_all(sim.ws, "Rule rule-0001")
    gh.add_pull(PR_NUMBER, head_sha=head, head_ref="replaybook/rule-0001", title="rule-0001", body="Closes #1")
    return sim, base, head


def pr_event(examples, head: str, base: str, *, head_ref: str = "replaybook/rule-0001",
             head_repo: str = f"{OWNER}/{NAME}") -> dict:
    """GitHub's example of an opened PR, as the rule PR (``head_repo`` another repository for a fork)."""
    payload = retarget(example(examples, "pull_request", "opened"))
    pr = payload["pull_request"]
    assert payload["number"] == pr["number"] == PR_NUMBER
    pr["head"].update(ref=head_ref, sha=head)
    pr["head"]["repo"]["full_name"] = head_repo
    pr["base"].update(ref="main", sha=base)
    pr["base"]["repo"]["full_name"] = f"{OWNER}/{NAME}"
    return payload


def gh_shim(*, fork: bool = False) -> str:
    """The runner's `gh api PATH`, against the fake GitHub (gh itself is not installed here). The fake serves no
    GET /pulls/N, so the pull request is picked from the list, which has every field the workflow reads;
    ``fork`` makes it come from another repository."""
    edit = ' | jq \'.head.repo.full_name = "mallory/app"\'' if fork else ""
    return r"""
[ "$1" = api ] || { echo "gh shim: only 'gh api PATH' is simulated, not: $*" >&2; exit 2; }
get() { curl -sSf -H "Authorization: token $GH_TOKEN" "$GITHUB_API_URL/$1"; }
case "$2" in
  repos/*/pulls/[0-9]*)
    get "${2%/*}?state=all&per_page=100" | jq -e --argjson n "${2##*/}" '.[] | select(.number == $n)'""" + edit + """ ;;
  *) get "$2" ;;
esac
"""
