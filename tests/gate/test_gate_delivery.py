"""The gate and delivery: a trial whose rule never reached the agent is unscored, never "the agent ignored it".

The builtin agent against the simulated model (labelled SIMULATED): with the rule in its system prompt every
with-rule trial is delivered; with the playbook rendered into AGENTS.md (``deliver: files``), which the builtin
agent never reads, none is, and the gate says so instead of rejecting the rule as not discriminative.
"""

from __future__ import annotations

from bot.gate import decision as gate_mod
from bot.gate import report
from bot.gate.stats import SequentialTest
from bot.replay.engine import ReplayOptions
from support.gate import book, setup


def _gate(root, path, **replay):
    opts = gate_mod.GateOptions(replay=ReplayOptions(**replay), cache_dir=root / ".cache", suite_trials=3)
    return gate_mod.run_gate(book(root), path, root / "scenarios", opts)


def test_every_with_rule_trial_is_delivered_and_no_without_rule_trial_is_watched(root):
    result = _gate(root, setup(root))
    assert result.decision == "admit", result.reason
    assert result.after.trials and all(t.delivered is True for t in result.after.trials)
    assert all(t.delivered is None for t in result.before.trials)  # no rule under test there
    assert not result.not_delivered and "not delivered" not in report.markdown(result, SequentialTest())
    assert report.as_json(result)["after"]["not_delivered"] == 0


def test_a_rule_that_never_reaches_the_agent_is_an_error_naming_the_cause_not_a_reject(root):
    result = _gate(root, setup(root), deliver="files")
    assert result.decision == "error", result.reason
    assert result.reason.startswith("the rule never reached the agent in any of 4 after-run(s)")
    assert "builtin reads no instruction file" in result.reason
    assert result.after.n == 0 and result.after.undelivered == 4  # unscored: never counted as failures
    text = report.markdown(result, SequentialTest())
    assert "📭 **Rule not delivered** in 4 of 4 trials with it (own scenario `own`)" in text
    data = report.as_json(result)
    assert data["after"]["not_delivered"] == 4 and {t["delivered"] for t in data["after"]["trials"]} == {False}
