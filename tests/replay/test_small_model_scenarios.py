"""The scenarios for a small model (scenarios/small-model/, issue 55): each rule carries the one repository fact
its task needs. Their simulated policies agree with their rules, and through the real engine the simulated model
fails each without the rule and passes it with the rule. (Every one is also held sound by its reference solution in
tests/scenario/test_solution.py; what the real local model does on them is measured in bench/real_model.py.)"""

from __future__ import annotations

import re

import pytest
from helpers import REPO

from bot.playbook import rule as rule_mod
from bot.replay.engine import run_trial
from bot.replay.gateway.policy import load_policy
from bot.scenario import spec as sc

SMALL = REPO / "scenarios" / "small-model"
IDS = sorted(p.parent.name for p in SMALL.glob("*/scenario.yaml"))


def test_there_are_scenarios_for_a_small_model_and_the_readme_lists_each():
    assert len(IDS) >= 6, IDS
    text = (REPO / "scenarios" / "README.md").read_text(encoding="utf-8")
    assert all(re.search(rf"`small-model/{sid}`", text) for sid in IDS)


@pytest.mark.parametrize("sid", IDS)
def test_the_rule_and_the_simulated_policy_agree(sid):
    folder = SMALL / sid
    rule = rule_mod.load(folder / "rule.yaml", named_by_id=False)
    policy = load_policy(folder / "policy.yaml")
    assert (folder / "policy.yaml").read_text(encoding="utf-8").startswith("# SIMULATED MODEL policy")
    assert policy.branch_on.lower() in rule.rule.lower()
    assert f"[{rule.id}]" in policy.with_rule[-1].text
    assert rule.replay == f"scenarios/small-model/{sid}" and sc.load(folder).scenario.id == sid


@pytest.mark.parametrize("sid", IDS)
def test_the_simulated_model_fails_without_the_rule_and_passes_with_it(sid, opts):
    loaded = sc.load(SMALL / sid)
    rule = rule_mod.load(SMALL / sid / "rule.yaml", named_by_id=False)
    without = run_trial(loaded, "", opts(), 0)
    with_rule = run_trial(loaded, f"# Playbook\n\n- {rule.rule}\n", opts(), 0)
    assert without.simulated and without.verdict == "failed", without.reason
    assert with_rule.verdict == "passed", with_rule.reason
