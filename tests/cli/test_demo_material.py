"""The two bundled scenarios made for the demo's refusals are sound: they load, their rules
and incidents agree, and each untouched fixture needs the task done."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO

from bot._util import records
from bot.incident.store import Incident
from bot.playbook import rule as rules_mod
from bot.replay.gateway.policy import load_policy
from bot.scenario import spec as sc

REGRESSES = "targeted-tests"  # its rule fixes it, and breaks the other one
FOLLOWED = "whole-suite-after-change"  # its rule is one the agent already follows


@pytest.mark.parametrize("sid", [REGRESSES, FOLLOWED])
def test_scenario_rule_and_incidents_agree(sid):
    folder = REPO / "scenarios" / sid
    loaded = sc.load(folder)
    rule = rules_mod.load(folder / "rule.yaml", named_by_id=False)
    assert loaded.scenario.id == sid and rule.replay == f"scenarios/{sid}" and len(rule.cites) == 2
    for incident_id in rule.cites:
        incident = records.load(Incident, folder / "incidents" / f"{incident_id}.yaml", what="incident")
        assert incident.unresolved and (folder / "logs" / f"{incident_id}.log").is_file()


def test_both_policies_branch_on_the_regressing_rule_only():
    regressing = rules_mod.load(REPO / "scenarios" / REGRESSES / "rule.yaml", named_by_id=False)
    followed = rules_mod.load(REPO / "scenarios" / FOLLOWED / "rule.yaml", named_by_id=False)
    for sid in (REGRESSES, FOLLOWED):
        branch = load_policy(REPO / "scenarios" / sid / "policy.yaml").branch_on.lower()
        assert branch in regressing.rule.lower() and branch not in followed.rule.lower()


@pytest.mark.parametrize("sid", [REGRESSES, FOLLOWED])
def test_the_untouched_fixture_fails_a_succeeds_check(sid):
    loaded = sc.load(REPO / "scenarios" / sid)
    import shlex

    codes = [subprocess.run([sys.executable, *shlex.split(c.succeeds.run)[1:]], cwd=loaded.fixture, env={"PYTHONDONTWRITEBYTECODE": "1"},
                            capture_output=True).returncode for c in loaded.scenario.checks_of(sc.SucceedsCheck)]
    assert any(codes), f"doing nothing passes every succeeds check of {sid}"
