"""The environment is read once, at the edge (bot/settings.py), and ReplayOptions built in one place."""

from bot import config
from bot.config import replay_options
from bot.replay.engine import SCRIPTED
from bot.settings import DEFAULT_UPSTREAM, Environment


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


# ------------------------------------------------ the environment is read in bot/settings.py, nowhere else

import ast  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

import bot  # noqa: E402
from bot import settings  # noqa: E402

ROOT = Path(bot.__file__).parent
DOC = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def _environment_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                and node.attr in ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"):
            found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" \
                and {a.name for a in node.names} & {"environ", "environb", "getenv", "getenvb"}:
            found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: from os import …")
    return found


def test_no_module_but_settings_reads_the_environment():
    reads = [r for p in sorted(ROOT.rglob("*.py")) if p != ROOT / "settings.py" for r in _environment_reads(p)]
    assert not reads, reads


def test_the_check_sees_a_read_however_it_is_spelled(tmp_path):
    sneaky = tmp_path / "m.py"
    sneaky.write_text("import os\nfrom os import getenv\nx = os.environ.get('A') or os.getenv('B')\n")
    assert len(_environment_reads_outside(sneaky)) == 3


def _environment_reads_outside(path: Path) -> list[str]:
    global ROOT
    saved, ROOT = ROOT, path.parent / "bot"
    try:
        return _environment_reads(path)
    finally:
        ROOT = saved


def test_every_variable_named_in_the_code_is_in_the_table():
    """A quoted ``REPLAYBOOK_*`` name anywhere in bot/ is a variable the program reads or sets: it is listed."""
    listed = set(settings.VARIABLES) | set(settings.SANDBOX_VARIABLES) | set(settings.SECRETS)
    named = {m for p in ROOT.rglob("*.py") for m in re.findall(r"\bREPLAYBOOK_[A-Z_]+\b", p.read_text(encoding="utf-8"))}
    assert named <= listed, sorted(named - listed)


def test_a_name_outside_the_table_is_a_bug_not_a_silent_none():
    with pytest.raises(KeyError, match="not in bot.settings.VARIABLES"):
        settings.get("REPLAYBOOK_NO_SUCH_THING")


def test_empty_counts_as_unset(monkeypatch):
    monkeypatch.setenv("REPLAYBOOK_SANDBOX", "")
    assert settings.get("REPLAYBOOK_SANDBOX", "bwrap") == "bwrap"


def test_docs_list_every_variable_as_the_table_says():
    assert DOC.read_text(encoding="utf-8") == settings.markdown(), "run: python -m bot.settings > docs/settings.md"
