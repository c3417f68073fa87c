"""The environment is read once, at the edge (bot/settings.py), and ReplayOptions built in one place."""

from bot import config
from bot.replay.engine import SCRIPTED
from bot.settings import DEFAULT_UPSTREAM, Environment, replay_options


def test_the_base_url_is_the_upstream_and_the_old_name_is_a_deprecated_alias():
    assert Environment.read({}).upstream_url == DEFAULT_UPSTREAM
    env = Environment.read({"ANTHROPIC_BASE_URL": "http://proxy", "REPLAYBOOK_UPSTREAM_URL": "http://old"})
    assert (env.upstream_url, env.warnings()) == ("http://proxy", [])
    old = Environment.read({"REPLAYBOOK_UPSTREAM_URL": "http://old", "ANTHROPIC_API_KEY": "k"})
    assert (old.upstream_url, old.base_url, old.api_key) == ("http://old", "http://old", "k")
    assert old.warnings() == ["REPLAYBOOK_UPSTREAM_URL is deprecated; set ANTHROPIC_BASE_URL instead (it is the same URL)"]
    assert Environment.read({"ANTHROPIC_API_KEY": ""}).api_key is None


def test_replay_options_take_the_config_unless_the_command_line_says_otherwise(tmp_path):
    (tmp_path / ".replaybook.yml").write_text("replay:\n  sandbox: docker\n  keep_runs: 7\n", encoding="utf-8")
    settings = config.load(tmp_path)
    env = Environment(api_key="k", base_url="http://proxy")
    real = replay_options(settings, env, model="claude-sonnet-5-5")
    assert (real.api_key, real.upstream_url, real.sandbox, real.keep_runs) == ("k", "http://proxy", "docker", 7)
    assert real.runs_dir == settings.path("traces")
    simulated = replay_options(settings, env, model=SCRIPTED, sandbox="none", runs_dir=tmp_path / "runs", seed=3)
    assert (simulated.api_key, simulated.sandbox, simulated.runs_dir, simulated.seed) == (None, "none", tmp_path / "runs", 3)
    assert replay_options(settings, env, model=SCRIPTED, api_key="k").api_key == "k"  # the gate's screen model
