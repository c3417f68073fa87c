"""GitHub material shared by the handler, PR, trust and bad-model tests: payloads, seeding, the CLI call, git."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml
from fakes.github import FakeGitHub
from fakes.port import FakePort
from helpers import REPO, incident_yaml, rule_yaml, write
from support import distill

from bot import config as config_mod
from bot.github.events import GateRulePr, plan
from bot.github.handle import PrGate, execute
from bot.github.issue_form import normalised_block
from bot.github.port import Job, Step
from bot.incident.store import Incident
from bot.settings import Environment

DATA = REPO / "tests" / "data"
HEAD = "3484a3fb816e0859fd6e1cea078d76385ff50625"
LOG = (DATA / "logs" / "gha_pytest.log").read_text(encoding="utf-8")
REPOSITORY = {"id": 1, "name": "app", "full_name": "octo/app", "default_branch": "main"}

A1, A2 = "gh-1", "gh-2"  # on GitHub an incident is its issue
RULE = distill.RULE  # the rule rule_answer proposes
WORKER = '"packages/worker has its own pytest.ini; must cd into packages/worker first"'


# ------------------------------------------------------------------ payloads


def run_payload(run_id: int = 7, attempt: int = 1) -> dict:
    return {
        "action": "completed",
        "workflow": {"name": "CI", "path": ".github/workflows/ci.yml"},
        "workflow_run": {"id": run_id, "name": "CI", "path": ".github/workflows/ci.yml", "run_attempt": attempt,
                         "conclusion": "failure", "status": "completed", "head_sha": HEAD,
                         "html_url": f"https://github.com/octo/app/actions/runs/{run_id}"},
        "repository": REPOSITORY,
    }


def rule_pr_payload(*, fork: bool, number: int = 3) -> dict:
    head_repo = "mallory/app" if fork else "octo/app"
    return {
        "action": "opened", "number": number,
        "pull_request": {"number": number, "title": "Add rule-0042", "body": "", "labels": [],
                         "user": {"login": "alice"}, "html_url": f"https://github.com/octo/app/pull/{number}",
                         "head": {"ref": "replaybook/rule-0042", "sha": HEAD, "repo": {"full_name": head_repo}},
                         "base": {"ref": "main", "sha": "b" * 40, "repo": {"full_name": "octo/app"}}},
        "repository": REPOSITORY, "sender": {"login": "alice"},
    }


# ------------------------------------------------------------------ the CLI and the fake


def fork_rule_pr(root: Path, gh: FakeGitHub) -> dict:
    """A repository at ``root`` whose HEAD adds rule-0042, as a fork's PR #1 on ``gh``: its payload."""
    import requests

    base = base_repo(root)
    write(root / "playbook" / "rules" / "rule-0042.yaml", rule_yaml("rule-0042", text="When X, do Y."))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a rule from a fork")
    requests.post(f"{gh.url}{gh.repo_path}/issues", json={"title": "Add rule-0042"})  # PR #1 as an issue
    payload = rule_pr_payload(fork=True, number=1)
    payload["pull_request"]["base"]["sha"] = base
    return payload


def handle(cli, *args: str) -> dict:
    """``replaybook github handle --json``: its JSON report, with the exit code as ``code``."""
    result = cli("github", "handle", "--json", *args)
    data = json.loads(result.out)
    data["code"] = result.code
    return data


def seed_run(gh: FakeGitHub, run_id: int = 7, log: str = LOG) -> None:
    gh.add_workflow_run(run_id, jobs=[{"name": "test (3.11)", "conclusion": "failure"}, {"name": "lint"}],
                        logs={"test (3.11)": log}, head_sha=HEAD)


# ------------------------------------------------------------------ the model's answers


def rule_answer(cites=(A1, A2), **kw) -> str:
    """Distill's answer proposing ``RULE`` (``support.distill.rule_answer``), citing the incidents by their issues."""
    return distill.rule_answer(cites, **kw)


# ------------------------------------------------------------------ git


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "HOME": str(cwd), "PATH": os.environ.get("PATH", "/usr/bin:/bin:/usr/local/bin")}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def base_repo(root: Path) -> str:
    """A git repository at ``root`` whose one commit on main admits rule-0001; that commit's id."""
    git(root, "init", "-q", "-b", "main")
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return git(root, "rev-parse", "HEAD")


# ------------------------------------------------------------------ the PR gate on the port


def run_pr_gate(port: FakePort, root: Path, head: str, base: str, *, merge_group: bool = False,
                settings=None) -> tuple[dict, str]:
    """Run the real PR gate (``execute`` + ``PrGate``) on ``port`` for the repository at ``root``, whose HEAD
    is the PR's ``head``; returns the status it set and the report it commented (none for a merge group)."""
    settings = settings or config_mod.load(root)
    number = None if merge_group else port.add_pull().number
    action = GateRulePr(number=number, head_sha=head, base_ref="main", base_sha=base, fork=False, secrets=True,
                        merge_group=merge_group)
    execute([action], port, root=root, settings=settings, gate=PrGate(root, settings))
    report = "" if number is None else "".join(c.body for c in port.comments_on(number))
    [status] = port.statuses_for(head)
    return status, report


# ------------------------------------------------------------------ an event on the port, as the CLI runs it


def seed_port_run(port: FakePort, run_id: int = 7, log: str = LOG) -> None:
    """As :func:`seed_run`, on the port: ``test (3.11)`` failed with ``log``, ``lint`` passed."""
    failed, passed = run_id * 10 + 1, run_id * 10 + 2
    port.jobs[run_id] = [Job(failed, "test (3.11)", "failure", (Step(1, "run", "failure"),)),
                         Job(passed, "lint", "success", (Step(1, "run", "success"),))]
    port.logs[failed] = log


def port_incidents(port: FakePort, count: int) -> list[str]:
    """As :func:`incidents`, on the port: ``count`` incident issues the bot filed; their ids."""
    ids = []
    for i in range(count):
        data = yaml.safe_load(incident_yaml("ignored", created=f"2026-07-{14 + i:02d}T09:32:00Z", actual=WORKER))
        body = "**Trigger:** CI failed\n\n" + normalised_block(Incident.model_validate(data))
        ids.append(f"gh-{port.file_issue('CI failure: test', body, ['replaybook', 'incident'], author=port.login).number}")
    return ids


def on_port(port: FakePort, root: Path, event_name: str, payload: dict, *, step_summary: Path | None = None,
            open_prs: bool = True, agent_logins: tuple[str, ...] = (), max_open_rule_prs: int | None = None) -> list:
    """What ``replaybook github handle`` does with one event, on ``port``, with PRs opted in; its outcomes.

    ``agent_logins`` and ``max_open_rule_prs`` stand for the command's flags (else .replaybook.yml's). Capture
    and distill ask the model the environment names (ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL), as the CLI does.
    """
    from bot.cli.distill import MAX_TOKENS

    settings = config_mod.load(root)
    env = Environment.read()
    section = settings.config.github
    config = settings.config.model_copy(update={"github": section.model_copy(
        update={"agent_logins": list(agent_logins) or section.agent_logins})})
    actions = plan(event_name, payload, config)
    distiller = None
    if env.api_key and open_prs and any(a.kind == "distill" for a in actions):
        distiller = config_mod.llm(env, settings.config.models.distill, timeout_s=300)
        distiller.max_tokens = MAX_TOKENS
    llm = config_mod.llm(env, settings.config.models.capture) if env.api_key else None
    return execute(actions, port, root=root, settings=settings, llm=llm, payload=payload, step_summary=step_summary,
                   gate=PrGate(root, settings, env=env), open_prs=open_prs, config=config, distiller=distiller,
                   max_open_rule_prs=section.max_open_rule_prs if max_open_rule_prs is None else max_open_rule_prs)


def completed(outcomes: list) -> bool:
    """Whether the command would exit 0: no action failed or was not enabled, and any gate admitted."""
    return all(o.status not in ("failed", "not_implemented") and o.verdict in (None, "success") for o in outcomes)
