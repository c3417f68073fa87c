"""The fake GitHub answers in GitHub's shapes, checked against GitHub's own OpenAPI description.

The description comes from npm (``@octokit/openapi``, pinned) and is cached
under the real ~/.cache. Without npm the test fails and says so; set
``REPLAYBOOK_SKIP_OPENAPI=1`` to skip it instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import requests
from fakes.github import FakeGitHub, served_endpoints, setup

OPENAPI_PACKAGE = "@octokit/openapi"
OPENAPI_VERSION = "23.0.2"
MEMBER = "package/generated/api.github.com.json"
# conftest points HOME at a temp dir per test; the cache belongs in the real one.
REAL_HOME = Path.home()

TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


# The OpenAPI description


@pytest.fixture(scope="session")
def openapi() -> dict:
    cache = REAL_HOME / ".cache" / "replaybook" / f"octokit-openapi-{OPENAPI_VERSION}"
    target = cache / "api.github.com.json"
    if not target.exists():
        _fetch(cache, target)
    return json.loads(target.read_text(encoding="utf-8"))


def _fetch(cache: Path, target: Path) -> None:
    skip = os.environ.get("REPLAYBOOK_SKIP_OPENAPI") == "1"
    npm = shutil.which("npm")
    if npm is None:
        if skip:
            pytest.skip("npm is missing and REPLAYBOOK_SKIP_OPENAPI=1")
        pytest.fail(
            "npm is needed to fetch GitHub's OpenAPI description (npm pack "
            f"{OPENAPI_PACKAGE}@{OPENAPI_VERSION}); install Node.js, or set REPLAYBOOK_SKIP_OPENAPI=1 to skip"
        )
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(REAL_HOME)}
    done = subprocess.run(
        [npm, "pack", f"{OPENAPI_PACKAGE}@{OPENAPI_VERSION}", "--pack-destination", str(cache)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    if done.returncode != 0:
        if skip:
            pytest.skip(f"npm pack failed and REPLAYBOOK_SKIP_OPENAPI=1: {done.stderr.strip()[-200:]}")
        pytest.fail(
            f"npm pack {OPENAPI_PACKAGE}@{OPENAPI_VERSION} failed (rc {done.returncode}): {done.stderr.strip()[-500:]}\n"
            "Check the npm registry is reachable, or set REPLAYBOOK_SKIP_OPENAPI=1 to skip"
        )
    tarball = cache / f"octokit-openapi-{OPENAPI_VERSION}.tgz"
    with tarfile.open(tarball) as tar:
        data = tar.extractfile(MEMBER)
        assert data is not None, f"{tarball} has no {MEMBER}"
        partial = target.with_suffix(".part")
        partial.write_bytes(data.read())
        partial.replace(target)  # a cut-short download never looks like a cached one
    tarball.unlink()


# A small checker: types, required properties, nested objects and arrays, enums.


def check(value: Any, schema: dict, spec: dict, where: str = "$") -> list[str]:
    """Problems with ``value`` against ``schema``: missing required properties and wrong JSON types."""
    schema = _resolve(schema, spec)
    if value is None:
        return [] if schema.get("nullable") or _allows_null(schema, spec) else [f"{where}: null where not nullable"]
    problems: list[str] = []
    for sub in schema.get("allOf", []):
        problems += check(value, sub, spec, where)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            options = [check(value, sub, spec, where) for sub in schema[key]]
            if all(options):
                problems.append(f"{where}: matches none of {key}: " + " | ".join(o[0] for o in options))
    kind = schema.get("type")
    if kind:
        expected = TYPES[kind]
        if not isinstance(value, expected) or (kind in ("integer", "number") and isinstance(value, bool)):
            return problems + [f"{where}: {type(value).__name__} where {kind} expected"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        problems += [f"{where}: missing required {name!r}" for name in schema.get("required", []) if name not in value]
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                problems += check(value[name], sub, spec, f"{where}.{name}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += check(item, schema["items"], spec, f"{where}[{i}]")
    return problems


def _resolve(schema: dict, spec: dict) -> dict:
    while "$ref" in schema:
        node: Any = spec
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _allows_null(schema: dict, spec: dict) -> bool:
    subs = schema.get("oneOf", []) + schema.get("anyOf", [])
    return any(_resolve(s, spec).get("nullable") for s in subs) or (
        bool(schema.get("allOf")) and all(_resolve(s, spec).get("nullable") for s in schema["allOf"])
    )


def response_schema(spec: dict, method: str, template: str, status: int) -> dict | None:
    operation = spec["paths"][_spec_path(spec, template)][method.lower()]
    response = _resolve(operation["responses"][str(status)], spec)
    return response.get("content", {}).get("application/json", {}).get("schema")


def _spec_path(spec: dict, template: str) -> str:
    shape = re.sub(r"\{[^}]+\}", "{}", template)
    matches = [p for p in spec["paths"] if re.sub(r"\{[^}]+\}", "{}", p) == shape]
    assert len(matches) == 1, f"{template} matches {matches} in the OpenAPI paths"
    return matches[0]


def test_checker_catches_missing_fields_and_wrong_types(openapi):
    schema = {"$ref": "#/components/schemas/label"}
    good = {"id": 1, "node_id": "x", "url": "u", "name": "n", "description": None, "color": "fff", "default": False}
    assert check(good, schema, openapi) == []
    assert check({**good, "id": "1"}, schema, openapi) == ["$.id: str where integer expected"]
    assert check({k: v for k, v in good.items() if k != "color"}, schema, openapi) == ["$: missing required 'color'"]
    assert check({**good, "default": None}, schema, openapi) == ["$.default: null where not nullable"]


# The fake's answers, one real request per endpoint it serves.

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"


def exercise(gh: FakeGitHub) -> dict[tuple[str, str], requests.Response]:
    """Drive every endpoint once, over HTTP, and return the responses by (method, template)."""
    api = gh.url + gh.repo_path
    gh.add_workflow_run(42, jobs=[{"name": "test", "conclusion": "failure"}, {"name": "lint"}], logs={"test": "boom"})
    job = gh.job_id(42, "test")
    s = requests.Session()
    s.headers["Authorization"] = "token x"
    r: dict[tuple[str, str], requests.Response] = {}
    t = "/repos/{owner}/{repo}"
    r["GET", t] = s.get(api)
    r["POST", t + "/issues"] = s.post(f"{api}/issues", json={"title": "t", "body": "b", "labels": ["replaybook"]})
    r["GET", t + "/issues"] = s.get(f"{api}/issues", params={"state": "all", "labels": "replaybook"})
    r["GET", t + "/issues/{n}"] = s.get(f"{api}/issues/1")
    r["PATCH", t + "/issues/{n}"] = s.patch(f"{api}/issues/1", json={"state": "closed"})
    r["POST", t + "/issues/{n}/comments"] = s.post(f"{api}/issues/1/comments", json={"body": "c"})
    r["GET", t + "/issues/{n}/comments"] = s.get(f"{api}/issues/1/comments")
    comment = r["POST", t + "/issues/{n}/comments"].json()["id"]
    r["GET", t + "/issues/comments/{n}"] = s.get(f"{api}/issues/comments/{comment}")
    r["PATCH", t + "/issues/comments/{n}"] = s.patch(f"{api}/issues/comments/{comment}", json={"body": "d"})
    r["POST", t + "/statuses/{sha}"] = s.post(f"{api}/statuses/{SHA}", json={"state": "success", "context": "replaybook/gate"})
    r["GET", t + "/commits/{ref}/status"] = s.get(f"{api}/commits/{SHA}/status")
    r["GET", t + "/actions/runs/{n}"] = s.get(f"{api}/actions/runs/42")
    r["GET", t + "/actions/runs/{n}/jobs"] = s.get(f"{api}/actions/runs/42/jobs", params={"filter": "latest"})
    r["GET", t + "/actions/jobs/{n}"] = s.get(f"{api}/actions/jobs/{job}")
    r["GET", t + "/actions/jobs/{n}/logs"] = s.get(f"{api}/actions/jobs/{job}/logs", allow_redirects=False)
    gh.add_pull(5, files=[{"filename": "app.py", "additions": 3, "deletions": 1}, {"filename": "new.py", "status": "added"}],
                review_comments=[{"path": "app.py", "body": "not like this", "review_id": 77, "line": 4}])
    r["GET", t + "/pulls/{n}/files"] = s.get(f"{api}/pulls/5/files")
    r["GET", t + "/pulls/{n}/comments"] = s.get(f"{api}/pulls/5/comments")
    main = s.get(f"{api}/git/ref/heads/main")
    r["GET", t + "/git/ref/{ref}"] = main
    r["POST", t + "/git/refs"] = s.post(f"{api}/git/refs", json={"ref": "refs/heads/replaybook/rule-0001",
                                                                "sha": main.json()["object"]["sha"]})
    r["POST", t + "/pulls"] = s.post(f"{api}/pulls", json={"title": "t", "body": "b", "head": "replaybook/rule-0001",
                                                          "base": "main"})
    number = r["POST", t + "/pulls"].json()["number"]
    r["PATCH", t + "/pulls/{n}"] = s.patch(f"{api}/pulls/{number}", json={"body": "c"})
    r["GET", t + "/pulls"] = s.get(f"{api}/pulls", params={"state": "all"})
    head = s.get(f"{api}/git/ref/heads/replaybook/rule-0001").json()["object"]["sha"]
    r["GET", t + "/git/commits/{sha}"] = s.get(f"{api}/git/commits/{head}")
    tree = r["GET", t + "/git/commits/{sha}"].json()["tree"]["sha"]
    r["GET", t + "/git/trees/{sha}"] = s.get(f"{api}/git/trees/{tree}", params={"recursive": "1"})
    r["POST", t + "/git/trees"] = s.post(f"{api}/git/trees", json={"base_tree": tree, "tree": [
        {"path": "a.txt", "mode": "100644", "type": "blob", "content": "a"}]})
    r["POST", t + "/git/commits"] = s.post(f"{api}/git/commits", json={
        "message": "m", "tree": r["POST", t + "/git/trees"].json()["sha"], "parents": [head]})
    r["PATCH", t + "/git/refs/{ref}"] = s.patch(f"{api}/git/refs/heads/replaybook/rule-0001",
                                                json={"sha": r["POST", t + "/git/commits"].json()["sha"]})
    r["PUT", t + "/pulls/{n}/merge"] = s.put(f"{api}/pulls/{number}/merge", json={})
    gh.add_commit("Fix the build [rule-0001]", author="agent-bot")
    r["GET", t + "/commits"] = s.get(f"{api}/commits", params={"since": "2020-01-01T00:00:00Z", "author": "agent-bot"})
    r["POST", t + "/actions/workflows/{ref}/dispatches"] = s.post(
        f"{api}/actions/workflows/replaybook-distill.yml/dispatches", json={"ref": "main", "inputs": {"reason": "x"}})
    r["POST", t + "/labels"] = s.post(f"{api}/labels", json={"name": "replaybook-claim-x", "color": "ededed",
                                                            "description": "1 run-1"})
    r["GET", t + "/labels/{ref}"] = s.get(f"{api}/labels/replaybook-claim-x")
    r["DELETE", t + "/labels/{ref}"] = s.delete(f"{api}/labels/replaybook-claim-x")
    # check runs (issue 30)
    note = {"path": "a.yaml", "start_line": 1, "end_line": 1, "annotation_level": "notice", "message": "m"}
    r["POST", t + "/check-runs"] = s.post(f"{api}/check-runs", json={
        "name": "replaybook/admit", "head_sha": SHA, "status": "completed", "conclusion": "success",
        "output": {"title": "t", "summary": "s", "annotations": [note]},
        "actions": [{"label": "Replay again", "description": "d", "identifier": "replay"}]})
    run = r["POST", t + "/check-runs"].json()["id"]
    r["PATCH", t + "/check-runs/{n}"] = s.patch(f"{api}/check-runs/{run}", json={
        "output": {"title": "t", "summary": "s", "annotations": [note]}})
    _exercise_setup(gh, s, api, r)
    # comment commands (issue 30)
    gh.set_role("maintainer", "maintain")
    r["GET", t + "/collaborators/{ref}/permission"] = s.get(f"{api}/collaborators/maintainer/permission")
    r["POST", t + "/issues/comments/{n}/reactions"] = s.post(f"{api}/issues/comments/{comment}/reactions",
                                                            json={"content": "eyes"})
    r["GET", t + "/issues/comments/{n}/reactions"] = s.get(f"{api}/issues/comments/{comment}/reactions")
    return r


def _exercise_setup(gh: FakeGitHub, s: requests.Session, api: str, r: dict) -> None:
    """The settings `replaybook doctor` reads (issue 30)."""
    t = "/repos/{owner}/{repo}"
    repo = setup(gh)
    repo.add_ruleset("main", required=["replaybook/admit", ("admit", 15368)], merge_queue=True)
    repo.protect("main", checks=["replaybook/admit", ("ci", 15368)])
    repo.secrets += ["ANTHROPIC_API_KEY"]
    repo.org_secrets += ["REPLAYBOOK_APP_PRIVATE_KEY"]
    repo.variables["REPLAYBOOK_APP_ID"] = "123"
    repo.org_variables["OTHER"] = "x"
    r["GET", t + "/rules/branches/{ref}"] = s.get(f"{api}/rules/branches/main")
    r["GET", t + "/branches/{ref}/protection/required_status_checks"] = s.get(
        f"{api}/branches/main/protection/required_status_checks")
    for name in ("secrets", "organization-secrets", "variables", "organization-variables"):
        r["GET", t + f"/actions/{name}"] = s.get(f"{api}/actions/{name}", params={"per_page": 100})
    repo.add_environment("replaybook-gate", policy=["main", "tag:v*"], secrets=["REPLAYBOOK_APP_PRIVATE_KEY"])
    env = f"{api}/environments/replaybook-gate"
    r["GET", t + "/environments/{ref}"] = s.get(env)
    r["GET", t + "/environments/{ref}/deployment-branch-policies"] = s.get(f"{env}/deployment-branch-policies")
    r["GET", t + "/environments/{ref}/secrets"] = s.get(f"{env}/secrets", params={"per_page": 100})


@pytest.fixture(scope="module")
def answers():
    with FakeGitHub() as gh:
        yield gh, exercise(gh)


def test_every_served_endpoint_is_exercised(answers):
    _, responses = answers
    assert set(responses) == set(served_endpoints())


@pytest.mark.parametrize("method,template", sorted(served_endpoints()))
def test_answers_match_githubs_openapi_description(openapi, answers, method, template):
    _, responses = answers
    response = responses[method, template]
    operation = openapi["paths"][_spec_path(openapi, template)][method.lower()]
    assert str(response.status_code) in operation["responses"], (
        f"{method} {template} answered {response.status_code}; GitHub documents {sorted(operation['responses'])}"
    )
    schema = response_schema(openapi, method, template, response.status_code)
    if schema is None:
        if response.status_code == 204:  # GitHub documents no content: none is sent
            assert response.content == b""
        else:
            assert response.status_code == 302 and response.headers["Location"]
        return
    assert check(response.json(), schema, openapi) == []


def test_errors_are_basic_errors(openapi):
    with FakeGitHub() as gh:
        gone = requests.get(f"{gh.url}{gh.repo_path}/issues/99")
        gh.rate_limit_next(gh.repo_path, retry_after=3)
        limited = requests.get(f"{gh.url}{gh.repo_path}")
    assert gone.status_code == 404
    assert check(gone.json(), {"$ref": "#/components/schemas/basic-error"}, openapi) == []
    assert limited.status_code == 403
    assert limited.headers["retry-after"] == "3"
    assert limited.json()["message"].startswith("You have exceeded a secondary rate limit")


def test_urls_use_the_requests_host_and_lists_page_with_link_headers():
    with FakeGitHub() as gh:
        for n in range(5):
            requests.post(f"{gh.url}{gh.repo_path}/issues", json={"title": f"t{n}", "labels": ["replaybook"]})
        via_localhost = gh.url.replace("127.0.0.1", "localhost")
        first = requests.get(f"{via_localhost}{gh.repo_path}/issues", params={"per_page": 2, "labels": "replaybook"})
        assert first.json()[0]["url"].startswith(via_localhost)
        assert 'rel="next"' in first.headers["Link"] and via_localhost in first.headers["Link"]
        seen, page = [], first
        while True:
            seen += [i["number"] for i in page.json()]
            if not page.links.get("next"):
                break
            page = requests.get(page.links["next"]["url"])
        assert sorted(seen) == [1, 2, 3, 4, 5]
        assert gh.calls == 5 + 3


def test_job_logs_redirect_to_plain_text_on_the_same_host():
    with FakeGitHub() as gh:
        gh.add_workflow_run(1, jobs=[{"name": "test", "conclusion": "failure"}], logs={"test": "##[error] boom\n"})
        logs = requests.get(f"{gh.url}{gh.repo_path}/actions/jobs/{gh.job_id(1, 'test')}/logs")
    assert logs.history[0].status_code == 302
    assert logs.headers["Content-Type"].startswith("text/plain")
    assert logs.text == "##[error] boom\n"


def test_branches_and_files_behave_like_githubs():
    with FakeGitHub() as gh:
        api, s = gh.url + gh.repo_path, requests.Session()
        gh.add_file("playbook/PLAYBOOK.md", "old\n")
        sha = s.get(f"{api}/git/ref/heads/main").json()["object"]["sha"]
        assert s.post(f"{api}/git/refs", json={"ref": "refs/heads/b", "sha": sha}).status_code == 201
        again = s.post(f"{api}/git/refs", json={"ref": "refs/heads/b", "sha": sha})
        assert again.status_code == 422 and again.json()["message"] == "Reference already exists"
        head = s.get(f"{api}/git/ref/heads/b").json()["object"]["sha"]  # a branch copies its base
        tree = s.get(f"{api}/git/commits/{head}").json()["tree"]["sha"]
        new_tree = s.post(f"{api}/git/trees", json={"base_tree": tree, "tree": [
            {"path": "playbook/PLAYBOOK.md", "mode": "100644", "type": "blob", "content": "new\n"}]}).json()["sha"]
        commit = s.post(f"{api}/git/commits", json={"message": "m", "tree": new_tree, "parents": [head]}).json()["sha"]
        assert s.patch(f"{api}/git/refs/heads/b", json={"sha": commit}).status_code == 200
        assert gh.branch_files("b") == {"playbook/PLAYBOOK.md": "new\n"}
        assert gh.branch_files("main") == {"playbook/PLAYBOOK.md": "old\n"}
        assert s.get(f"{api}/git/ref/heads/b").json()["object"]["sha"] == commit != sha
        assert s.get(f"{api}/contents/playbook/PLAYBOOK.md").status_code == 404  # the port never uses contents
        assert s.get(f"{api}/git/ref/heads/nope").status_code == 404
