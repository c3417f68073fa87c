"""The four bundled scenarios are sound, checked without the replay engine.

For each scenario under ``scenarios/``:

- its files follow the formats (scenario, rule, incidents, simulated policy);
- the task is needed: a ``succeeds`` check fails on the untouched fixture;
- the simulated model's ``with_rule`` steps make every check that can be judged
  from the end state hold (exists, unchanged, diff_excludes, succeeds, http);
- its ``without_rule`` steps break at least one of those checks.

The trace checks (ran, not_ran, max_runs) need the engine's command log, so
they are only checked for shape here. Steps run with pytest's plugin
autoloading off, which only makes the fixtures' own test runs start faster.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
IDS = ["monorepo-test-cwd", "dynamic-module-delete", "flaky-network-retry", "lint-disable"]
RULE_IDS = {
    "monorepo-test-cwd": "rule-0001",
    "dynamic-module-delete": "rule-0002",
    "flaky-network-retry": "rule-0003",
    "lint-disable": "rule-0004",
}
CHECKS = {"ran", "not_ran", "max_runs", "exists", "unchanged", "diff_excludes", "succeeds", "http"}
SCENARIO_KEYS = {"id", "task", "repo", "task_type", "pass_if", "budget", "services", "env_allow"}
REPEAT_CAP = 3  # a `repeat: 40` step is played at most this often, to stay fast
STEP_TIMEOUT_S = 60
IGNORED = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")


def load(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def scenario_dir(sid: str) -> Path:
    return SCENARIOS / sid


def fixture_repo(sid: str) -> Path:
    return scenario_dir(sid) / load(scenario_dir(sid) / "scenario.yaml")["repo"]


def checks(scenario: dict, kind: str) -> list:
    return [c[kind] for c in scenario["pass_if"] if kind in c]


# --- the scenario's local HTTP services --------------------------------------


def start_service(spec: dict) -> ThreadingHTTPServer:
    """Answer ``status`` always (fail_always) or for the first N requests (fail_first)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            with lock:
                server.requests += 1
                failing = spec.get("fail_always") or server.requests <= spec.get("fail_first", 0)
            status, body = (spec.get("status", 503), b"unavailable") if failing else (200, b"{}")
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    lock = threading.Lock()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.requests = 0
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@contextmanager
def sandbox(sid: str, tmp_path: Path):
    """A copy of the fixture, the env the steps see, and the running services."""
    scenario = load(scenario_dir(sid) / "scenario.yaml")
    repo = tmp_path / "repo"
    shutil.copytree(fixture_repo(sid), repo, ignore=IGNORED)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and "proxy" not in k.lower()}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    # `python` is the interpreter running these tests (it has pytest), not a shim.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    servers = []
    try:
        for spec in scenario.get("services", []):
            server = start_service(spec)
            servers.append(server)
            env[spec["env"]] = f"http://127.0.0.1:{server.server_port}/"
        yield scenario, repo, env, servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


# --- playing a simulated policy and judging the end state --------------------


def play(steps: list[dict], repo: Path, env: dict) -> None:
    for step in steps:
        if "bash" in step:
            for _ in range(min(step.get("repeat", 1), REPEAT_CAP)):
                subprocess.run(["bash", "-c", step["bash"]], cwd=repo, env=env,
                               capture_output=True, timeout=STEP_TIMEOUT_S)
        elif "write" in step:
            target = (repo / step["write"]["path"]).resolve()
            assert target.is_relative_to(repo.resolve()), f"write outside the repo: {target}"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step["write"]["content"], encoding="utf-8")
        else:
            assert set(step) == {"say"}, f"unknown step {step}"


def run_succeeds(check: dict, repo: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(shlex.split(check["run"]), cwd=repo / check.get("cwd", "."),
                          env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)


def files(root: Path) -> dict[str, Path]:
    skip = {"__pycache__", ".pytest_cache"}
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(root).parts)}


def added_lines(before: Path, after: Path) -> list[str]:
    old = files(before)
    added = []
    for rel, path in files(after).items():
        new_lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        old_lines = old[rel].read_text(encoding="utf-8").splitlines() if rel in old else []
        added += [f"{rel}: {line[1:]}" for line in difflib.unified_diff(old_lines, new_lines, lineterm="")
                  if line.startswith("+") and not line.startswith("+++")]
    return added


def failed_checks(sid, scenario, repo, env, servers, *, first_only=False) -> list[str]:
    """The end-state checks that do not hold; the slow succeeds commands run last."""
    fixture, failed = fixture_repo(sid), []
    for path in [p for c in checks(scenario, "exists") for p in c]:
        if not (repo / path).exists():
            failed.append(f"exists: {path}")
    for path in [p for c in checks(scenario, "unchanged") for p in c]:
        if not (repo / path).is_file() or (repo / path).read_bytes() != (fixture / path).read_bytes():
            failed.append(f"unchanged: {path}")
    added = added_lines(fixture, repo)
    for pattern in [p for c in checks(scenario, "diff_excludes") for p in c]:
        failed += [f"diff_excludes {pattern!r}: {line}" for line in added if re.search(pattern, line)]
    failed += http_failures(scenario, servers)
    if failed and first_only:
        return failed
    for check in checks(scenario, "succeeds"):
        proc = run_succeeds(check, repo, env)
        if proc.returncode != 0:
            failed.append(f"succeeds: {check['run']} (rc {proc.returncode})\n{proc.stdout[-800:]}{proc.stderr[-800:]}")
    if not any(f.startswith("http:") for f in failed):
        # Strict: the requests of the succeeds commands count too.
        failed += http_failures(scenario, servers)
    return failed


def http_failures(scenario, servers) -> list[str]:
    requests = sum(s.requests for s in servers)
    return [f"http: {requests} requests > {c['max_requests']}"
            for c in checks(scenario, "http") if requests > c["max_requests"]]


# --- the files follow the formats --------------------------------------------


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"[.!?](?=\s|$)", " ".join(text.split())) if s.strip()]


@pytest.mark.parametrize("sid", IDS)
def test_scenario_follows_the_format(sid):
    scenario = load(scenario_dir(sid) / "scenario.yaml")
    assert set(scenario) <= SCENARIO_KEYS
    assert scenario["id"] == sid
    assert scenario["repo"] == "repo" and fixture_repo(sid).is_dir()
    assert scenario["task"].strip() and re.fullmatch(r"[a-z][a-z0-9_-]*", scenario["task_type"])
    for check in scenario["pass_if"]:
        assert isinstance(check, dict) and len(check) == 1 and set(check) <= CHECKS, check
    assert checks(scenario, "succeeds"), "every scenario proves the task was done"
    for check in checks(scenario, "succeeds"):
        assert set(check) <= {"run", "cwd"} and shlex.split(check["run"])
    for check in checks(scenario, "ran") + checks(scenario, "not_ran"):
        assert set(check) <= {"command", "cwd", "args"} and check["command"]
    for check in checks(scenario, "max_runs"):
        assert set(check) == {"command", "max"} and isinstance(check["max"], int)
    assert set(scenario["budget"]) == {"max_turns", "timeout_s", "max_cost_usd"}
    if checks(scenario, "http"):
        assert scenario.get("services"), "an http check needs a service"


@pytest.mark.parametrize("sid", IDS)
def test_fixture_is_plain_text_and_self_contained(sid):
    root = fixture_repo(sid)
    for path in root.rglob("*"):
        assert not path.is_symlink(), path
        assert path.name not in {".git", "__pycache__", ".pytest_cache"}, path
        if path.is_file():
            data = path.read_bytes()
            assert b"\0" not in data, f"binary file {path}"
            data.decode("utf-8")


@pytest.mark.parametrize("sid", IDS)
def test_rule_policy_and_incidents_agree(sid):
    rule = load(scenario_dir(sid) / "rule.yaml")
    policy_text = (scenario_dir(sid) / "policy.yaml").read_text(encoding="utf-8")
    policy = yaml.safe_load(policy_text)
    assert policy_text.startswith("# SIMULATED MODEL policy")
    assert policy["branch_on"].lower() in " ".join(rule["rule"].split()).lower()
    assert policy["with_rule"] and policy["without_rule"]
    assert f"[{rule['id']}]" in policy["with_rule"][-1]["say"]

    assert rule["id"] == RULE_IDS[sid]
    assert len(sentences(rule["rule"])) <= 2, sentences(rule["rule"])
    assert re.match(r"(Before|When|If) ", rule["rule"].strip())
    assert rule["provisional"] is False and 2 <= len(rule["cites"]) <= 3
    assert isinstance(rule["task_types"], list)
    assert rule["replay"] == f"scenarios/{sid}"
    assert isinstance(rule["created"], dt.date)

    for incident_id in rule["cites"]:
        path = scenario_dir(sid) / "incidents" / f"{incident_id}.yaml"
        assert path.is_file(), f"{rule['id']} cites {incident_id}, which has no incident file"
        incident = load(path)
        assert incident["id"] == incident_id and re.fullmatch(r"\d{4}-\d\d-\d\d-\d{4}", incident_id)
        assert "\n" not in incident["believed"].strip() and "\n" not in incident["actual"].strip()
        assert incident["failure_class"] in {"wrong_assumption", "bad_tool_use", "scope_creep", "env", "unknown"}
        assert incident["resolved_by"] == "unresolved"
        assert isinstance(incident["cost_minutes"], int) and incident["cost_minutes"] >= 0
        assert incident["source"]["kind"] in {"workflow_run", "pull_request", "review", "manual"}
        assert isinstance(incident["created"], dt.datetime)


def test_ids_are_unique_across_scenarios():
    incidents = [p.stem for sid in IDS for p in (scenario_dir(sid) / "incidents").glob("*.yaml")]
    keys = [load(p)["source"]["key"] for sid in IDS for p in (scenario_dir(sid) / "incidents").glob("*.yaml")]
    assert len(incidents) == len(set(incidents)) and len(keys) == len(set(keys))
    assert all((scenario_dir(s) / "scenario.yaml").is_file() for s in IDS)


# --- the replays -------------------------------------------------------------

BRANCHES = ("untouched", "with_rule", "without_rule")


def replay(sid: str, branch: str, tmp_path: Path) -> list[str]:
    """What fails after playing ``branch`` of the policy; "untouched" plays nothing.

    For "untouched" that is the succeeds commands that fail; otherwise the
    end-state checks that fail (for "without_rule", the first ones found).
    """
    with sandbox(sid, tmp_path) as (scenario, repo, env, servers):
        if branch == "untouched":
            return [c["run"] for c in checks(scenario, "succeeds")
                    if run_succeeds(c, repo, env).returncode != 0]
        play(load(scenario_dir(sid) / "policy.yaml")[branch], repo, env)
        return failed_checks(sid, scenario, repo, env, servers, first_only=branch == "without_rule")


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """Every replay, run once and concurrently: they are independent of each other."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return {(sid, branch): pool.submit(replay, sid, branch, tmp_path_factory.mktemp(f"{sid}-{branch}"))
                for sid in IDS for branch in BRANCHES}


@pytest.mark.parametrize("sid", IDS)
def test_untouched_fixture_fails_a_succeeds_check(sid, replays):
    assert replays[sid, "untouched"].result(), "the task is not needed: every succeeds check holds already"


@pytest.mark.parametrize("sid", IDS)
def test_with_rule_steps_pass_every_end_state_check(sid, replays):
    failed = replays[sid, "with_rule"].result()
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("sid", IDS)
def test_without_rule_steps_are_caught(sid, replays):
    assert replays[sid, "without_rule"].result(), "the recurring mistake passes every end-state check"
