"""GitHub API requests per bot action, against the fake GitHub (PyGithub over HTTP).

Budgets from issue #6: at most 8 requests per captured failure, at most 5 per
gate report; from issue #18, at most 3 per dashboard update. Since issue #14 each first capture also takes and releases a claim
(two requests), so concurrent deliveries file one issue. Each row runs ``bot.github.handle.execute`` with the real
PyGithub adapter against a fresh fake and counts the requests the fake served
(faults none); the follow of a job log's redirect to its storage is not an API request and
is not counted. The gate's verdict is given (the replay makes no GitHub call),
and capture runs without a model (a model call makes no GitHub call either).
The distill threshold is on (10) wherever a capture runs, as by default.

    python bench/github_calls.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from fakes.github import FakeGitHub  # noqa: E402

from bot import config as config_mod  # noqa: E402
from bot._util.markdown import table  # noqa: E402
from bot.github import PyGithubAdapter  # noqa: E402
from bot.github.context import GateVerdict  # noqa: E402
from bot.github.events import (  # noqa: E402
    CaptureRejectedPr,
    CaptureRun,
    DistillIfDue,
    GateRulePr,
    ParseIncidentIssue,
    UpdateDashboard,
)
from bot.github.handle import execute  # noqa: E402

LOG = (ROOT / "tests" / "data" / "logs" / "gha_pytest.log").read_text(encoding="utf-8")
FORM = (ROOT / "tests" / "data" / "webhooks" / "issues-opened-incident-form.json")
HEAD = "3484a3fb816e0859fd6e1cea078d76385ff50625"
PAYLOAD = {"repository": {"full_name": "octo/app", "default_branch": "main"}}  # as every webhook carries


def run(gh: FakeGitHub, root: Path, actions: list, **kw) -> int:
    port = PyGithubAdapter("octo/app", "t", gh.url, sleep=lambda s: None, seconds_between_requests=0,
                           seconds_between_writes=0)
    gh.reset_calls()
    try:
        outcomes = execute(actions, port, root=root, settings=config_mod.load(root), **kw)
    finally:
        port.close()
    assert all(o.status != "failed" or "could not run" in o.summary for o in outcomes), outcomes
    # The job log's 302 target is storage, not the API (on GitHub another host, outside the rate limit)
    return sum(1 for r in gh.requests if not r.path.startswith("/_blobs/"))


def capture(run_id: int, attempt: int = 1) -> list:
    return [CaptureRun(run_id=run_id, run_attempt=attempt, workflow="CI", conclusion="failure", head_sha=HEAD,
                       html_url=f"https://github.com/octo/app/actions/runs/{run_id}",
                       key=f"run-{run_id}-attempt-{attempt}"),
            DistillIfDue(threshold=10, workflow="replaybook-distill.yml")]


def _repository_with_a_new_rule(root: Path) -> str:
    """A git repository whose HEAD adds a rule to main's playbook: what a fork PR that needs a replay holds."""
    import subprocess

    from helpers import make_scenario, rule_yaml, write

    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e",
           "HOME": str(root), "PATH": "/usr/bin:/bin:/usr/local/bin"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout

    make_scenario(root)
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD").strip()
    write(root / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
    git("add", "-A")
    git("commit", "-qm", "a rule from a fork")
    return base


def main() -> None:
    import json

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with FakeGitHub() as gh:
            gh.add_workflow_run(7, jobs=[{"name": "test", "conclusion": "failure"}], logs={"test": LOG})
            rows.append(["capture: a failed run, first delivery", run(gh, root, capture(7), payload=PAYLOAD), 8])
            rows.append(["capture: the same delivery again", run(gh, root, capture(7), payload=PAYLOAD), 8])
            rows.append(["capture: a re-run of the job (comment)", run(gh, root, capture(7, 2), payload=PAYLOAD), 8])
            for n in range(8, 17):  # nine more incidents: the tenth reaches the threshold and dispatches
                gh.add_workflow_run(n, jobs=[{"name": "test", "conclusion": "failure"}], logs={"test": LOG})
                calls = run(gh, root, capture(n), payload=PAYLOAD)
            assert gh.dispatches, "the tenth incident should dispatch distill"
            rows.append(["capture: the failure that reaches the distill threshold", calls, 8])
        with FakeGitHub() as gh:
            gh.add_pull(9, files=[{"filename": "api/limits.py"}], review_comments=[{"path": "api/limits.py",
                                                                                  "body": "no"}])
            pr = [CaptureRejectedPr(number=9, reason="closed_unmerged", key="pr-9-closed"),
                  DistillIfDue(threshold=10, workflow="replaybook-distill.yml")]
            rows.append(["capture: a rejected agent PR", run(gh, root, pr, payload={"pull_request": {"title": "t"}}), 8])
        with FakeGitHub() as gh:
            body = json.loads(FORM.read_text())["issue"]["body"]
            gh.add_issue("incident", body, ["incident"])
            form = [ParseIncidentIssue(number=1, key="issue-1"), DistillIfDue(threshold=10,
                                                                              workflow="replaybook-distill.yml")]
            rows.append(["capture: an incident issue form", run(gh, root, form), 8])
        with FakeGitHub() as gh:
            gh.add_pull(3)
            gate = [GateRulePr(number=3, head_sha=HEAD, base_ref="main", base_sha="b" * 40, fork=False, secrets=True)]
            verdict = GateVerdict("success", "admit: rule-0001 admit", "## Replaybook gate\n\nadmit")
            rows.append(["gate report: first", run(gh, root, gate, gate=lambda a: verdict), 5])
            rows.append(["gate report: again (comment edited in place)", run(gh, root, gate, gate=lambda a: verdict), 5])
            rows.append(["gate report as a check run (App token), again", run(gh, root, gate, gate=lambda a: verdict,
                                                                             check_runs=True), 5])
            base = _repository_with_a_new_rule(root / "repo")
            fork = [GateRulePr(number=3, head_sha=HEAD, base_ref="main", base_sha=base, fork=True, secrets=False)]
            rows.append(["gate report: a fork PR (could not run)", run(gh, root / "repo", fork), 5])
        with FakeGitHub() as gh:
            from helpers import make_scenario, rule_yaml, write

            book = root / "dashboard"
            make_scenario(book)
            write(book / "playbook" / "rules" / "rule-0001.yaml", rule_yaml("rule-0001"))
            for n in range(12):
                gh.add_issue("incident", json.loads(FORM.read_text())["issue"]["body"], ["incident"])
            rows.append(["dashboard: first update (opens it)", run(gh, book, [UpdateDashboard()]), 3])
            rows.append(["dashboard: update, nothing changed", run(gh, book, [UpdateDashboard()]), 3])
            write(book / "playbook" / "rules" / "rule-0002.yaml", rule_yaml("rule-0002"))
            rows.append(["dashboard: update in place (a rule admitted)", run(gh, book, [UpdateDashboard()]), 3])
    out = [[what, str(calls), f"≤ {budget}", "ok" if calls <= budget else "OVER"] for what, calls, budget in rows]
    print(table(["action", "API requests", "budget", ""], out))


if __name__ == "__main__":
    main()
