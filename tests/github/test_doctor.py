"""`replaybook doctor`: a good set-up passes, and each broken one is a finding that says how to fix it.

Through the real CLI and the real PyGithub adapter, against the HTTP fake GitHub (rulesets, branch protection,
Actions secrets and variables in GitHub's published shapes); the sandbox is this machine's, made to miss a tool
by the PATH the harness starts with.
"""

from __future__ import annotations

import json
import os

import pytest
from fakes.github import setup

from bot.github import init as init_mod
from bot.replay.sandbox import host_tools, isolation

RELEASE_SHA = "0123456789abcdef0123456789abcdef01234567"
APP_ID = 904213  # our App (15368 is GitHub Actions: every job's check run)
ADMIT = init_mod.WORKFLOWS["admit"]
DISTILL = init_mod.WORKFLOWS["distill"]
PROTECTION = "/repos/octo/app/branches/main/protection/required_status_checks"
REFUSED = "Resource not accessible by integration"
GATE_ENV = init_mod.APP_ENVIRONMENT
APP_KEY = "REPLAYBOOK_APP_PRIVATE_KEY"


@pytest.fixture
def repo(cli, root, gh, monkeypatch):
    """A repository set up as docs/install.md says: init's files, the App, the required check, the secrets."""
    monkeypatch.setenv(init_mod.ACTIONS_SHA_ENV, RELEASE_SHA)
    assert cli("init").code == 0
    for name, value in {"GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": "octo/app", "GITHUB_TOKEN": "t",
                        "REPLAYBOOK_GITHUB_THROTTLE": "0", "REPLAYBOOK_GITHUB_BACKOFF": "0"}.items():
        monkeypatch.setenv(name, value)
    for name in ("REPLAYBOOK_GITHUB_APP", "REPLAYBOOK_APP_ID", "REPLAYBOOK_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    settings = setup(gh)
    settings.add_ruleset("main", required=[("replaybook/admit", APP_ID)], merge_queue=True)
    settings.secrets += ["ANTHROPIC_API_KEY"]
    settings.add_environment(GATE_ENV, policy=["main", "gh-readonly-queue/main/*"], secrets=[APP_KEY])
    settings.variables["REPLAYBOOK_APP_ID"] = str(APP_ID)
    return settings


def doctor(cli, *args):
    done = cli("doctor", "--json", *args)
    assert done.code in (0, 1), done.err
    found = json.loads(done.out)
    return done, {f["check"]: f for f in found["findings"]}


def only(findings: dict, prefix: str) -> dict:
    [hit] = [f for name, f in findings.items() if name.startswith(prefix)]
    return hit


def test_a_good_setup_passes_every_check(cli, repo, gh):
    done, findings = doctor(cli)
    assert done.code == 0, findings
    assert {f["status"] for f in findings.values()} <= {"ok", "skip"}
    assert only(findings, "required check")["status"] == "ok"
    assert f"pinned to app {APP_ID}" in only(findings, "required check")["detail"]
    assert "merge queue is on" in only(findings, "merge queue")["detail"]
    assert findings["secret `ANTHROPIC_API_KEY`"]["status"] == "ok"
    assert "secret `REPLAYBOOK_APP_PRIVATE_KEY`" not in findings  # the environment's, never the repository's
    assert findings[f"App key: environment `{GATE_ENV}`"]["status"] == "ok"
    assert findings[f"App key: secret `{APP_KEY}` in the environment `{GATE_ENV}`"]["status"] == "ok"
    assert findings[f"App key: no repository secret `{APP_KEY}`"]["status"] == "ok"
    assert findings["App key: the jobs that read it"]["status"] == "ok"
    assert only(findings, "App token")["status"] == "ok"
    assert all(r.method == "GET" for r in gh.requests), "the doctor only reads"
    table = cli("doctor")
    assert table.code == 0 and table.out.startswith("| check | status | how to fix |")


@pytest.mark.parametrize("missing,says", [("bwrap", "apt-get install bubblewrap"), ("socat", "apt-get install socat"),
                                          ("strace", "apt-get install strace")])
def test_a_sandbox_tool_missing_from_path_is_a_finding(cli, repo, tmp_path, missing, says):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in {"bash", "bwrap", "socat", "strace"} - {missing}:
        os.symlink(host_tools.find(tool), bin_dir / tool)
    started = host_tools._STARTUP_PATH
    host_tools.start_from(str(bin_dir))
    isolation._checked.cache_clear()
    try:
        done, findings = doctor(cli)
    finally:
        host_tools.start_from(started)
        isolation._checked.cache_clear()
    assert done.code == 1
    sandbox = findings["sandbox"]
    assert sandbox["status"] == "fail" and says in sandbox["detail"]
    assert "Sandbox on the runner" in sandbox["fix"]
    assert "sandbox" in done.err  # the one-line summary of what failed


def test_the_unisolated_sandbox_is_a_finding(cli, repo, root):
    (root / ".replaybook.yml").write_text("replay:\n  sandbox: none\n")
    done, findings = doctor(cli)
    assert done.code == 1 and findings["sandbox"]["status"] == "fail"
    assert "replay.sandbox: bwrap" in findings["sandbox"]["fix"]


def test_an_invalid_config_is_a_finding_and_the_rest_is_still_checked(cli, repo, root):
    (root / ".replaybook.yml").write_text("cap: lots\n")
    done, findings = doctor(cli)
    assert done.code == 1, "a broken .replaybook.yml is a finding (exit 1), not bad input (exit 2)"
    config = findings["`.replaybook.yml`"]
    assert config["status"] == "fail" and "cap" in config["detail"]
    assert only(findings, "workflows")["status"] == "skip"
    assert only(findings, "required check")["status"] == "ok"  # the other checks still ran


def test_drifted_workflows_are_a_finding(cli, repo, root):
    (root / init_mod.WORKFLOWS["replay"]).unlink()
    done, findings = doctor(cli)
    assert done.code == 1
    drift = only(findings, "workflows")
    assert drift["status"] == "fail" and "replaybook-replay.yml` (missing)" in drift["detail"]
    assert "replaybook init" in drift["fix"]


def edit(path, old: str, new: str) -> None:
    """Replace ``old`` (which must be there) with ``new`` in a workflow file, as a hand edit would."""
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def test_no_app_variable_means_rule_prs_never_start_the_gate(cli, repo):
    del repo.variables["REPLAYBOOK_APP_ID"]
    done, findings = doctor(cli)
    assert done.code == 1
    app = only(findings, "App token")
    assert app["status"] == "fail" and "GITHUB_TOKEN" in app["detail"] and "start no workflow" in app["detail"]
    assert "REPLAYBOOK_APP_ID" in app["fix"] and "REPLAYBOOK_APP_PRIVATE_KEY" in app["fix"]
    assert findings[f"App key: environment `{GATE_ENV}`"]["status"] == "skip"  # no App, no key needed


def test_a_distill_workflow_that_opens_prs_with_github_token_alone_is_a_finding(cli, repo, root):
    edit(root / DISTILL, "steps.app.outputs.token || github.token", "github.token")
    done, findings = doctor(cli)
    assert done.code == 1
    app = only(findings, "App token")
    assert app["status"] == "fail" and DISTILL in app["detail"] and "GITHUB_TOKEN" in app["detail"]


def test_an_app_token_in_the_job_counts_when_the_variables_cannot_be_read(cli, repo, gh, monkeypatch):
    gh.fail_next("/repos/octo/app/actions/variables", 403, message=REFUSED)
    done, findings = doctor(cli)
    assert only(findings, "App token")["status"] == "unknown"
    monkeypatch.setenv("REPLAYBOOK_GITHUB_APP", "1")
    gh.fail_next("/repos/octo/app/actions/variables", 403, message=REFUSED)
    done, findings = doctor(cli)
    assert only(findings, "App token")["status"] == "ok" and done.code == 0


def test_a_missing_required_check_is_a_finding(cli, repo):
    repo.rulesets.clear()
    repo.add_ruleset("ci only", required=["ci"])
    done, findings = doctor(cli)
    assert done.code == 1
    required = only(findings, "required check")
    assert required["status"] == "fail" and "`ci`" in required["detail"] and "replaybook/admit" in required["detail"]
    assert "Rulesets" in required["fix"]


def test_the_required_check_is_found_in_classic_branch_protection(cli, repo):
    repo.rulesets.clear()
    repo.add_ruleset("queue", merge_queue=True)
    repo.protect("main", checks=["lint", ("replaybook/admit", APP_ID)])
    done, findings = doctor(cli)
    required = only(findings, "required check")
    assert done.code == 0 and required["status"] == "ok" and "branch protection" in required["detail"]


@pytest.mark.parametrize("required", ["replaybook/admit", "admit", ("admit", 15368), ("replaybook/admit", 15368)])
def test_a_required_check_not_pinned_to_the_app_is_a_finding(cli, repo, required):
    """Unpinned (or pinned to GitHub Actions), a status or a job any workflow a PR edits can make satisfies it."""
    repo.rulesets.clear()
    repo.add_ruleset("main", required=[required], merge_queue=True)
    done, findings = doctor(cli)
    found = only(findings, "required check")
    assert done.code == 1 and found["status"] == "fail", found
    assert "without a replay" in found["detail"] and "integration_id" in found["fix"] and "App" in found["fix"]


def test_a_refused_branch_protection_is_cannot_tell_not_a_crash(cli, repo, gh):
    repo.rulesets.clear()
    gh.fail_next(PROTECTION, 403, message=REFUSED)
    done, findings = doctor(cli)
    required = only(findings, "required check")
    assert required["status"] == "unknown" and "HTTP 403" in required["detail"]
    assert "administration: read" in required["fix"]
    assert done.code == 0, "what the token may not read is not a finding"


def test_a_merge_queue_without_merge_group_is_a_finding(cli, repo, root):
    edit(root / ADMIT, "\n  merge_group:\n", "\n")
    done, findings = doctor(cli)
    assert done.code == 1
    queue = findings["merge queue"]
    assert queue["status"] == "fail" and "merge_group" in queue["fix"]
    assert only(findings, "workflows")["status"] == "ok", "a file edited by hand is the user's: init --check is content"
    repo.rulesets.clear()
    repo.add_ruleset("main", required=[("replaybook/admit", APP_ID)])  # no queue: no merge_group needed
    done, findings = doctor(cli)
    assert done.code == 0 and findings["merge queue"]["status"] == "ok"


def test_a_missing_secret_is_a_finding(cli, repo):
    repo.secrets.remove("ANTHROPIC_API_KEY")
    done, findings = doctor(cli)
    assert done.code == 1
    secret = findings["secret `ANTHROPIC_API_KEY`"]
    assert secret["status"] == "fail" and "New repository secret `ANTHROPIC_API_KEY`" in secret["fix"]


def test_secrets_the_token_may_not_list_are_cannot_tell(cli, repo, gh):
    gh.fail_next("/repos/octo/app/actions/secrets", 403, message=REFUSED)
    done, findings = doctor(cli)
    secrets = only(findings, "secrets (")
    assert secrets["status"] == "unknown" and "secrets: read" in secrets["fix"] and done.code == 0


def test_without_a_token_the_github_checks_say_what_they_need(cli, repo, gh, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    gh.reset_calls()
    done, findings = doctor(cli)
    assert done.code == 0 and gh.calls == 0
    assert only(findings, "required check")["status"] == "skip"
    assert "GITHUB_TOKEN" in only(findings, "required check")["fix"]
    offline = cli("doctor", "--offline")
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    assert offline.code == 0 and gh.calls == 0


def test_bad_input_exits_2_with_one_line(cli, repo, root):
    bad = cli("doctor", "--repo", "not-a-repo")
    assert bad.code == 2 and "owner/name" in bad.err
    missing = cli("doctor", str(root / "nowhere"))
    assert missing.code == 2 and "not a folder" in missing.err


def test_a_bad_actions_sha_or_repo_is_bad_input(cli, root):
    for args, said in ((["--actions-sha", "xyz"], "not a full commit id"), (["--repo", "notarepo"], "owner/name"),
                       (["--offline", "--repo", "notarepo"], "owner/name")):
        done = cli("doctor", *args)
        assert done.code == 2, (args, done)
        assert said in done.err and not done.out, (args, done.err)


def test_each_problem_is_a_row_of_its_own(cli, repo, root):
    for name in ("replay", "distill"):
        (root / init_mod.WORKFLOWS[name]).unlink()
    (root / ".replaybook.yml").write_text("cap: lots\nmodels: {agent: 3}\n")
    done = cli("doctor", "--json")
    found = json.loads(done.out)["findings"]
    config = [f for f in found if f["check"] == "`.replaybook.yml`"]
    assert len(config) == 2 and all(f["status"] == "fail" for f in config), config
    assert any("cap" in f["detail"] for f in config) and any("models.agent" in f["detail"] for f in config)
    (root / ".replaybook.yml").write_text("cap: 60\n")
    found = json.loads(cli("doctor", "--json").out)["findings"]
    drift = [f["detail"] for f in found if f["check"].startswith("workflows")]
    assert sorted(drift) == sorted(f"`{init_mod.WORKFLOWS[n]}` (missing)" for n in ("replay", "distill")), drift


# -- where the App's key lives: an environment only the default branch may enter ---------------------------------


def key_findings(cli) -> tuple[int, dict]:
    done, findings = doctor(cli)
    return done.code, {name.removeprefix("App key: "): f for name, f in findings.items() if name.startswith("App key")}


def test_no_gate_environment_is_a_finding_naming_how_to_make_it(cli, repo):
    del repo.environments[GATE_ENV]
    code, found = key_findings(cli)
    assert code == 1
    env = found[f"environment `{GATE_ENV}`"]
    assert env["status"] == "fail" and "does not exist" in env["detail"]
    assert f"New environment `{GATE_ENV}`" in env["fix"] and "Selected branches" in env["fix"] and APP_KEY in env["fix"]


@pytest.mark.parametrize("policy,says", [(None, "every branch may enter it"),
                                         (["main", "release/*"], "also lets in `release/*`"),
                                         (["main", "tag:v*"], "also lets in `tag:v*`"),
                                         (["develop"], "does not let in main")])
def test_an_environment_any_other_branch_may_enter_is_a_finding(cli, repo, policy, says):
    repo.add_environment(GATE_ENV, policy=policy, secrets=[APP_KEY])
    code, found = key_findings(cli)
    env = found[f"environment `{GATE_ENV}`"]
    assert code == 1 and env["status"] == "fail", env
    assert says in env["detail"] and "gh-readonly-queue/main/*" in env["fix"]


@pytest.mark.parametrize("policy", ["protected", ["main"]])
def test_protected_branches_or_the_default_branch_alone_pass(cli, repo, policy):
    repo.add_environment(GATE_ENV, policy=policy, secrets=[APP_KEY])
    code, found = key_findings(cli)
    assert code == 0 and found[f"environment `{GATE_ENV}`"]["status"] == "ok", found


def test_the_key_missing_from_the_environment_is_a_finding(cli, repo):
    repo.add_environment(GATE_ENV, policy=["main"], secrets=["OTHER"])
    code, found = key_findings(cli)
    hit = found[f"secret `{APP_KEY}` in the environment `{GATE_ENV}`"]
    assert code == 1 and hit["status"] == "fail" and "Environment secrets" in hit["fix"]


@pytest.mark.parametrize("where", ["secrets", "org_secrets"])
def test_a_repository_or_organisation_secret_of_the_keys_name_is_a_finding(cli, repo, where):
    getattr(repo, where).append(APP_KEY)
    code, found = key_findings(cli)
    hit = found[f"no repository secret `{APP_KEY}`"]
    assert code == 1 and hit["status"] == "fail"
    assert "every workflow can read it" in hit["detail"] and "delete it" in hit["fix"]


def test_a_job_reading_the_key_outside_the_environment_is_a_finding(cli, repo, root):
    path = root / DISTILL
    path.write_text(path.read_text().replace(f"    environment: {GATE_ENV}\n", "", 1))
    code, found = key_findings(cli)
    hit = found["the jobs that read it"]
    assert code == 1 and hit["status"] == "fail" and "job `distill`" in hit["detail"], hit


def test_an_environment_the_token_may_not_read_is_cannot_tell(cli, repo, gh):
    gh.fail_next(f"/repos/octo/app/environments/{GATE_ENV}", 403, message=REFUSED)
    code, found = key_findings(cli)
    assert found[f"environment `{GATE_ENV}`"]["status"] == "unknown"


def test_the_workflows_init_writes_take_the_key_from_the_environment_only(root, cli, monkeypatch):
    monkeypatch.setenv(init_mod.ACTIONS_SHA_ENV, RELEASE_SHA)
    assert cli("init").code == 0
    from bot.github.doctor import Workflows

    jobs = Workflows(root).jobs_reading(APP_KEY)
    assert {(w, j) for w, j, _ in jobs} >= {("admit", "admit"), ("distill", "distill"), ("distill", "commands")}
    assert {env for _, _, env in jobs} == {GATE_ENV}
