"""The gate's options, built in one place (bot/gate/options.py) for the command line and for GitHub.

The two front doors differ only in what they pass: GitHub's default agent is ``builtin`` whatever
``replay.agents`` lists (a re-gate names another), the command line's is the first it is given, else the
first of ``replay.agents``. Both get the own test ``gate.own_test`` names and the rest of ``gate:``.
"""

from __future__ import annotations

from pathlib import Path

from bot import config as config_mod
from bot.gate import options as gate_options
from bot.gate.stats import PairedTest, SequentialTest
from bot.settings import Environment


def _settings(root: Path, text: str):
    (root / ".replaybook.yml").write_text(text, encoding="utf-8")
    return config_mod.load(root)


def test_the_default_agent_is_a_parameter_and_the_rest_is_the_same(tmp_path):
    settings = _settings(tmp_path, "replay: {agents: [claude-code, builtin]}\ngate: {own_test: sequential}\n")
    env = Environment()
    assert gate_options.agents(settings) == ["claude-code", "builtin"]
    assert gate_options.agents(settings, ("codex", "codex")) == ["codex"]
    github = gate_options.options(settings, env, default_agent=gate_options.DEFAULT_AGENT, model="scripted")
    cli = gate_options.options(settings, env, default_agent=gate_options.agents(settings)[0], model="scripted")
    assert (github.replay.agent, cli.replay.agent) == ("builtin", "claude-code")
    assert github.test == cli.test == SequentialTest()
    assert {k: v for k, v in vars(github).items() if k != "replay"} == {k: v for k, v in vars(cli).items() if k != "replay"}


def test_a_regate_caps_the_own_test_and_names_the_agent(tmp_path):
    settings = _settings(tmp_path, "gate: {own_test: sequential}\n")
    opts = gate_options.options(settings, Environment(), default_agent="builtin", agent="codex", model="scripted",
                                own_trials=2)
    assert opts.replay.agent == "codex" and opts.test == gate_options.gate_test(2, "sequential")
    assert (opts.test.after_n, opts.test.after_min_pass) == (2, 2)
    paired = gate_options.options(_settings(tmp_path, "gate: {own_test: paired}\n"), Environment(),
                                  default_agent="builtin", model="scripted", own_trials=2)
    assert paired.test == PairedTest()  # the paired test takes no trial count
