"""The four bundled scenarios are sound: they load, agree with their rules and incidents,
and their untouched fixtures need the task done. (Replays of both branches, through the
real engine, are in tests/replay/test_engine.py.)"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from helpers import REPO

from bot._util import records
from bot.incident.store import Incident
from bot.playbook import rule as rules_mod
from bot.replay.gateway.policy import load_policy
from bot.scenario import spec as sc

IDS = ["monorepo-test-cwd", "dynamic-module-delete", "flaky-network-retry", "lint-disable"]
RULE_IDS = dict(zip(IDS, ["rule-0001", "rule-0002", "rule-0003", "rule-0004"]))


def folder(sid):
    return REPO / "scenarios" / sid


@pytest.mark.parametrize("sid", IDS)
def test_scenario_loads_and_proves_the_task(sid):
    loaded = sc.load(folder(sid))
    assert loaded.scenario.id == sid and loaded.fixture == (folder(sid) / "repo").resolve()
    assert loaded.scenario.checks_of(sc.SucceedsCheck)
    if loaded.scenario.checks_of(sc.Http):
        assert loaded.scenario.services, "an http check needs a service"


@pytest.mark.parametrize("sid", IDS)
def test_fixture_is_plain_text_and_self_contained(sid):
    for path in (folder(sid) / "repo").rglob("*"):
        assert not path.is_symlink(), path
        assert path.name not in {".git", "__pycache__", ".pytest_cache"}, path
        if path.is_file():
            data = path.read_bytes()
            assert b"\0" not in data, f"binary file {path}"
            data.decode("utf-8")


@pytest.mark.parametrize("sid", IDS)
def test_rule_policy_and_incidents_agree(sid):
    rule = rules_mod.load(folder(sid) / "rule.yaml", named_by_id=False)
    policy = load_policy(folder(sid) / "policy.yaml")
    assert (folder(sid) / "policy.yaml").read_text().startswith("# SIMULATED MODEL policy")
    assert policy.branch_on.lower() in rule.rule.lower()
    assert f"[{rule.id}]" in policy.with_rule[-1].text
    assert rule.id == RULE_IDS[sid] and rule.replay == f"scenarios/{sid}"
    assert not rule.provisional and 2 <= len(rule.cites) <= 3
    for incident_id in rule.cites:
        path = folder(sid) / "incidents" / f"{incident_id}.yaml"
        incident = records.load(Incident, path, what="incident")
        assert incident.id == incident_id and incident.unresolved


def test_ids_and_source_keys_are_unique_across_scenarios():
    incidents = [records.load(Incident, p, what="incident")
                 for sid in IDS for p in (folder(sid) / "incidents").glob("*.yaml")]
    assert len({i.id for i in incidents}) == len(incidents)
    assert len({i.source.key for i in incidents}) == len(incidents)


@pytest.mark.parametrize("sid", IDS)
def test_the_untouched_fixture_fails_a_succeeds_check(sid, tmp_path):
    """Doing nothing must fail: otherwise the scenario cannot tell an agent that did the task."""
    loaded = sc.load(folder(sid))
    repo = tmp_path / "repo"
    shutil.copytree(loaded.fixture, repo)
    env = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": str(tmp_path),
           "FLAKY_URL": "http://127.0.0.1:9", **loaded.scenario.env}
    results = []
    for check in loaded.scenario.checks_of(sc.SucceedsCheck):
        argv = [sys.executable if a == "python" else a for a in shlex.split(check.succeeds.run)]
        cwd = repo / (check.succeeds.cwd or ".")
        results.append(subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=120).returncode)
    assert any(rc != 0 for rc in results), results


def test_scenarios_readme_lists_every_scenario():
    text = (REPO / "scenarios" / "README.md").read_text()
    assert all(re.search(rf"`{sid}`", text) for sid in IDS)


@pytest.mark.parametrize("sid", IDS)
def test_rule_validate_finds_the_incidents_beside_a_bundled_scenario(sid, root, cli):
    shutil.copytree(folder(sid), root / "scenarios" / sid)
    rule_file = root / "scenarios" / sid / "rule.yaml"
    result = cli("rule", "validate", str(rule_file))
    assert result.code == 0 and f"{rule_file}: ok" in result.out, result.err
    cited = rules_mod.load(rule_file, named_by_id=False).cites[0]
    (root / "scenarios" / sid / "incidents" / f"{cited}.yaml").unlink()
    missing = cli("rule", "validate", str(rule_file))
    assert missing.code == 2 and f"incident {cited!r} does not exist" in missing.err
    assert f"scenarios/{sid}/incidents" in missing.err  # the message names where it looked
