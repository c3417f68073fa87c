"""Replay test helpers: tiny scenarios written from dicts, and the real Claude Code CLI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.errors import BadInput
from bot.replay.agents import claude_code, install
from bot.replay.trace import exec_notify
from bot.scenario import spec as sc

# The autouse fixture in tests/conftest.py gives every test its own HOME, so the
# user's real cache is found from the environment as it was at import time.
_ORIGINAL_ENV = dict(os.environ)
SKIP_CLAUDE_CODE = "REPLAYBOOK_SKIP_CLAUDE_CODE"


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


@pytest.fixture(scope="session")
def shim_cache(tmp_path_factory) -> Path:
    # The folder test_sandbox and test_services use, so one session builds the shims once.
    return tmp_path_factory.getbasetemp() / "shim-cache"


@pytest.fixture(autouse=True)
def _private_shim_cache(shim_cache, monkeypatch):
    monkeypatch.setenv("REPLAYBOOK_CACHE_DIR", str(shim_cache))


def write_scenario(
    base: Path,
    *,
    pass_if: list[dict[str, Any]],
    with_rule: list[dict[str, Any]] | None = None,
    without_rule: list[dict[str, Any]] | None = None,
    files: dict[str, str] | None = None,
    scenario_id: str = "tiny",
    branch_on: str = "MAGIC RULE",
    **fields: Any,
) -> sc.LoadedScenario:
    """Write ``base/scenarios/<id>/`` (scenario.yaml, policy.yaml, repo/) and load it.

    ``fields`` go into scenario.yaml as they are (``budget``, ``services``, ``task`` …).
    ``without_rule`` defaults to ``with_rule``.
    """
    folder = base / "scenarios" / scenario_id
    repo = folder / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {"README.md": "tiny fixture\n"}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    data = {"id": scenario_id, "task": "Do the tiny task.", "repo": "repo", "pass_if": pass_if, **fields}
    (folder / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    steps = with_rule if with_rule is not None else [{"say": "done"}]
    policy = {"branch_on": branch_on, "with_rule": steps,
              "without_rule": without_rule if without_rule is not None else steps}
    # a step shared or repeated (`[step] * 3`) is written out each time: the one YAML loader refuses aliases
    (folder / "policy.yaml").write_text(yaml.dump(policy, Dumper=_NoAliases, sort_keys=False), encoding="utf-8")
    return sc.load(folder)


@pytest.fixture
def make_scenario(tmp_path):
    """``make_scenario(pass_if=[...], with_rule=[...], ...)``: a tiny scenario in tmp_path."""

    def make(**kw: Any) -> sc.LoadedScenario:
        return write_scenario(tmp_path, **kw)

    return make


@pytest.fixture
def opts(tmp_path):
    """``opts(agent=..., noise=...)``: ReplayOptions keeping runs in tmp_path/runs."""
    from bot.replay.engine import ReplayOptions

    def make(**kw) -> ReplayOptions:
        kw.setdefault("runs_dir", tmp_path / "runs")
        return ReplayOptions(**kw)

    return make


@pytest.fixture
def sandbox_tmp(tmp_path, monkeypatch) -> Path:
    """Where this test's sandboxes go, so a test can see that they were removed."""
    folder = tmp_path / "sandboxes"
    folder.mkdir()
    monkeypatch.setenv("REPLAYBOOK_TMPDIR", str(folder))
    return folder


# -- the engine that records a trial's commands (tests/support/trials.py) -------------------------------------


@pytest.fixture(params=["notify", "strace"])
def engine(request, monkeypatch) -> str:
    """Each engine of the trial's sandbox in turn: seccomp user notification (where the kernel has it), then
    strace. ``pytestmark = pytest.mark.usefixtures("engine")`` runs a module's every test under both."""
    if request.param == "notify" and not exec_notify.available():
        pytest.skip("this kernel has no seccomp user notification")
    monkeypatch.setenv("REPLAYBOOK_KERNEL_TRACE", "auto" if request.param == "notify" else "strace")
    return request.param


@pytest.fixture
def notify_engine(monkeypatch) -> None:
    """The seccomp-notification engine, which reads the program from the new image; skipped where the kernel
    lacks it (strace records the name the caller passed: docs/security.md)."""
    if not exec_notify.available():
        pytest.skip("this kernel has no seccomp user notification: the program is the name the caller passed "
                    "(docs/security.md)")
    monkeypatch.setenv("REPLAYBOOK_KERNEL_TRACE", "auto")


# -- the real Claude Code CLI -------------------------------------------------


def _claude_cache() -> Path:
    base = _ORIGINAL_ENV.get("XDG_CACHE_HOME") or os.path.join(_ORIGINAL_ENV.get("HOME", "~"), ".cache")
    return Path(os.path.expanduser(base)) / "replaybook" / f"claude-code-{claude_code.PINNED_VERSION}"


def _find_or_install() -> str:
    explicit = _ORIGINAL_ENV.get(claude_code.ENV_BINARY)
    if explicit:
        return explicit
    cache = _claude_cache()
    cached = install.cached_binary("claude-code", cache)
    if cached.exists():
        return str(cached)
    if shutil.which("npm", path=_ORIGINAL_ENV.get("PATH")) is None:
        on_path = shutil.which("claude", path=_ORIGINAL_ENV.get("PATH"))
        if on_path:
            return on_path
        pytest.fail(
            f"the Claude Code tests need the CLI: install node and npm (the pinned "
            f"{claude_code.PACKAGE}@{claude_code.PINNED_VERSION} is then installed into {cache} once), "
            f"or set {claude_code.ENV_BINARY}=/path/to/claude, or set {SKIP_CLAUDE_CODE}=1 to skip them",
            pytrace=False,
        )
    try:
        return claude_code.install_cli(dest=cache)
    except BadInput as exc:
        pytest.fail(f"installing the Claude Code CLI failed: {exc}; set {SKIP_CLAUDE_CODE}=1 to skip these tests",
                    pytrace=False)


@pytest.fixture(scope="session")
def claude_cli() -> str:
    """The pinned Claude Code CLI: $REPLAYBOOK_CLAUDE_CODE, the user's cache, or installed there now."""
    if _ORIGINAL_ENV.get(SKIP_CLAUDE_CODE) == "1":
        pytest.skip(f"{SKIP_CLAUDE_CODE}=1")
    return _find_or_install()


@pytest.fixture
def claude_code_agent(claude_cli, monkeypatch) -> str:
    """Makes ``agent="claude-code"`` use the session's CLI."""
    monkeypatch.setenv(claude_code.ENV_BINARY, claude_cli)
    return claude_cli


# -- the other pinned agent CLIs (Codex, mini-swe-agent, opencode) ------------------------------

def _installed(agent: str) -> str:
    base = _ORIGINAL_ENV.get("XDG_CACHE_HOME") or os.path.join(_ORIGINAL_ENV.get("HOME") or "~", ".cache")
    p = install.pin(agent)
    dest = Path(os.path.expanduser(base)) / "replaybook" / f"{p.agent}-{p.version}"
    try:
        return install.install(agent, dest)
    except BadInput as exc:
        pytest.fail(f"`replaybook agent install {agent}` failed: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def codex_cli() -> str:
    return _installed("codex")


@pytest.fixture(scope="session")
def mini_cli() -> str:
    return _installed("mini-swe-agent")


@pytest.fixture(scope="session")
def opencode_cli() -> str:
    return _installed("opencode")


@pytest.fixture
def agent_bin(request, monkeypatch):
    def use(agent: str) -> None:
        binary = request.getfixturevalue({"codex": "codex_cli", "mini-swe-agent": "mini_cli", "opencode": "opencode_cli"}[agent])
        monkeypatch.setenv(install.pin(agent).env, binary)

    return use
