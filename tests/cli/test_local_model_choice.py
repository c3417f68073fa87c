"""`--model local` wherever a model is chosen: one resolution, exit 2 without the install, labels and $0.

The replays of the real local model are in tests/replay/test_local_model_real.py; here every test runs
with a HOME of its own, where the model is not installed, and reads what the reports say from records.
"""

from __future__ import annotations

import pytest

from bot.distill.plan import DistillReport
from bot.gate import report as gate_report
from bot.gate.result import GateResult
from bot.gate.stats import SequentialTest
from bot.model import pricing, served

LABEL = "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (real local model)"
HINT = "replaybook model install local"


@pytest.fixture(autouse=True)
def no_local_server_yet(tmp_path, monkeypatch):
    """No server left from another test, and a cache with no model in it."""
    served.stop()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    yield
    served.stop()


@pytest.mark.parametrize("args", [
    ("replay", "run", "lint-disable", "--model", "local"),
    ("gate", "scenarios/lint-disable/rule.yaml", "--model", "local"),
    ("playbook", "retest", "--model", "local"),
    ("distill", "--model", "local"),
    ("demo", "--model", "local"),
])
def test_without_the_install_local_is_exit_2_naming_the_install_command(cli, root, args):
    (root / "scenarios" / "lint-disable").mkdir(parents=True)
    (root / "scenarios" / "lint-disable" / "rule.yaml").write_text("id: rule-0001\n")
    result = cli(*args)
    assert result.code == 2, result.out + result.err
    assert HINT in result.err
    assert "ANTHROPIC_API_KEY" not in result.err  # local needs no key


def test_a_hosted_model_without_a_key_still_says_so_and_offers_local(cli, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = cli("replay", "run", "lint-disable", "--model", "claude-sonnet-4-5")
    assert result.code == 2 and "ANTHROPIC_API_KEY" in result.err and "--model local" in result.err


def test_a_local_screen_model_goes_only_with_a_local_gate(cli, root):
    (root / "rule.yaml").write_text("id: rule-0001\n")
    result = cli("gate", str(root / "rule.yaml"), "--model", "scripted", "--screen-model", "local")
    assert result.code == 2 and "--screen-model local" in result.err


def test_the_local_model_costs_nothing_however_many_tokens():
    assert pricing.cost_usd("local", 10**6, 10**6, cache_read_input_tokens=10**6) == 0


def test_the_gate_report_says_real_local_model_and_never_simulated():
    result = GateResult("rule-0001", "Run the tests from the package folder.", "reject", "not discriminative",
                        model_label=LABEL, tokens=1234, replays=4)
    text = gate_report.markdown(result, SequentialTest())
    assert LABEL in text and "1234 tokens on the local model" in text and "$0" in text
    assert "SIMULATED" not in text and "simulated" not in text
    assert gate_report.as_json(result)["model_label"] == LABEL


def test_distill_says_which_real_local_model_answered():
    from bot.cli.distill import render

    text = render(DistillReport(model_label=LABEL))
    assert LABEL in text and "SIMULATED" not in text
    assert DistillReport(model_label=LABEL).as_json()["model_label"] == LABEL


def test_a_label_without_the_words_gets_them():
    class Found:
        label, name, quant = "", "Some Coder 1B", "Q8_0"

    assert served.label_of(Found()) == "Some Coder 1B Q8_0 (real local model)"
