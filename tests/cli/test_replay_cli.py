"""`replaybook replay`: verdicts, evidence, exit codes, JSON, the real-model path."""

from __future__ import annotations

import json

import pytest
from helpers import REPO

from bot.replay.gateway.policy import load_policy
from bot.replay.gateway.server import Gateway

RULE = str(REPO / "scenarios" / "lint-disable" / "rule.yaml")


def test_without_the_rule_the_trial_fails_with_evidence(cli):
    result = cli("replay", "lint-disable")
    assert result.code == 1
    assert "SIMULATED model" in result.out
    assert "| 0 | failed | diff_excludes" in result.out
    assert "(matches `lint: disable`)" in result.out or "(matches `noqa`)" in result.out
    assert "simulated estimate" in result.out


def test_with_the_rule_every_trial_passes_and_progress_shows(cli):
    result = cli("replay", "lint-disable", "--rule", RULE, "--trials", "2", "--jobs", "2")
    assert result.code == 0, result.out + result.err
    assert result.out.count("| passed |") == 2
    assert "[2/2]" in result.err


def test_json_output_carries_checks_tokens_and_the_simulated_label(cli, root):
    result = cli("replay", "lint-disable", "--json", "--runs-dir", str(root / "runs"))
    data = json.loads(result.out)
    assert data["simulated"] is True and data["summary"]["failed"] == 1
    [trial] = data["trials"]
    assert trial["input_tokens"] > 0 and trial["cost_usd"] > 0
    assert any(not c["passed"] and c["check"].startswith("diff_excludes") for c in trial["checks"])
    assert (root / "runs").is_dir() and trial["run_dir"].startswith(str(root / "runs"))


def test_bad_input_exits_2(cli, tmp_path):
    assert "not found" in cli("replay", "no-such-scenario").err
    assert cli("replay", "no-such-scenario").code == 2
    result = cli("replay", "lint-disable", "--agent", "command")
    assert result.code == 2 and "--command" in result.err
    result = cli("replay", "lint-disable", "--model", "claude-sonnet-5-5")
    assert result.code == 2 and "ANTHROPIC_API_KEY" in result.err
    assert cli("replay", "lint-disable", "--rule", str(tmp_path / "missing.yaml")).code == 2


@pytest.mark.parametrize("variable", ["ANTHROPIC_BASE_URL", "REPLAYBOOK_UPSTREAM_URL"])
def test_a_real_model_is_reached_only_through_the_gateway(cli, monkeypatch, variable):
    """Upstream mode, with a local stand-in for the provider: the key stays in the gateway.

    The upstream is ANTHROPIC_BASE_URL; REPLAYBOOK_UPSTREAM_URL still works, with a warning."""
    policy = load_policy(REPO / "scenarios" / "lint-disable" / "policy.yaml")
    with Gateway(policy) as provider:  # plays Anthropic; its token plays the real key
        monkeypatch.setenv("ANTHROPIC_API_KEY", provider.token)
        monkeypatch.setenv(variable, provider.url)
        result = cli("replay", "lint-disable", "--model", "claude-sonnet-5-5", "--rule", RULE, "--json")
        assert provider.calls, "the provider was never called"
    assert ("REPLAYBOOK_UPSTREAM_URL is deprecated; set ANTHROPIC_BASE_URL" in result.err) == (variable != "ANTHROPIC_BASE_URL")
    data = json.loads(result.out)
    assert data["simulated"] is False
    [trial] = data["trials"]
    assert trial["verdict"] == "passed", trial["reason"]
    # The provider's answers were counted by our gateway, priced for the real model id.
    assert trial["model_calls"] == len(provider.calls) and trial["cost_usd"] > 0


def test_with_a_rule_each_trial_says_whether_the_rule_reached_the_agent(cli):
    data = json.loads(cli("replay", "lint-disable", "--rule", RULE, "--json").out)
    [trial] = data["trials"]
    assert trial["delivered"] is True and trial["delivery"]["first_request"] == 1
    assert data["summary"]["not_delivered"] == 0
    # rendered into AGENTS.md, which the builtin agent never reads: unscored, never a failure
    result = cli("replay", "lint-disable", "--rule", RULE, "--deliver", "files")
    assert result.code == 1
    assert "| 0 | unscored |" in result.out and "rule not delivered: builtin reads no instruction file" in result.out
    data = json.loads(cli("replay", "lint-disable", "--rule", RULE, "--deliver", "files", "--json").out)
    assert data["summary"]["not_delivered"] == 1 and data["summary"]["failed"] == 0
