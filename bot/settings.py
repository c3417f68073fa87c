"""The environment, read once at the edge, and what is built from it with the config.

As llm's ``get_key()`` does, a command reads the variables here, once, and passes the values
down: the core never looks at ``os.environ`` for a key or a URL.

| variable | what |
|---|---|
| ``ANTHROPIC_API_KEY`` | the key for a real model (capture, distill, reflection, upstream replays) |
| ``ANTHROPIC_BASE_URL`` | a proxy in front of the Messages API: the adapter's base URL and the replay gateway's upstream (default ``https://api.anthropic.com``) |
| ``REPLAYBOOK_UPSTREAM_URL`` | deprecated alias of ``ANTHROPIC_BASE_URL`` for replays, read only when that is unset |
| ``OPENAI_API_KEY`` | the key for a real model behind an agent that speaks the OpenAI Responses API (Codex) |
| ``OPENAI_BASE_URL`` | that agent's upstream (default ``https://api.openai.com``) |

The config (``.replaybook.yml``, :mod:`bot.config`) gives the rest of :func:`replay_options`:
the runs folder, the sandbox and how many runs are kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.model.llm import LLM
    from bot.replay.engine import ReplayOptions

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEPRECATED_UPSTREAM_ENV = "REPLAYBOOK_UPSTREAM_URL"
DEFAULT_UPSTREAM = "https://api.anthropic.com"


@dataclass(frozen=True)
class Environment:
    """What the process environment says about models, read once (:meth:`read`)."""

    api_key: str | None = None
    base_url: str | None = None  # None: Anthropic's own
    deprecated: tuple[str, ...] = ()  # deprecated variable names that were used
    openai_api_key: str | None = None  # for agents that speak the Responses API (Codex)
    openai_base_url: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> "Environment":
        env = os.environ if environ is None else environ
        base_url = env.get(BASE_URL_ENV) or None
        deprecated: tuple[str, ...] = ()
        if base_url is None and env.get(DEPRECATED_UPSTREAM_ENV):
            base_url, deprecated = env[DEPRECATED_UPSTREAM_ENV], (DEPRECATED_UPSTREAM_ENV,)
        return cls(api_key=env.get(API_KEY_ENV) or None, base_url=base_url, deprecated=deprecated,
                   openai_api_key=env.get("OPENAI_API_KEY") or None, openai_base_url=env.get("OPENAI_BASE_URL") or None)

    def for_agent(self, agent: str) -> tuple[str, str | None, str]:
        """(the key's variable name, the key, the upstream URL) for the API shape ``agent`` speaks."""
        from bot.replay.agents import upstream_env

        key_var, default = upstream_env(agent)
        if key_var == "OPENAI_API_KEY":
            return key_var, self.openai_api_key, self.openai_base_url or default
        return key_var, self.api_key, self.upstream_url

    @property
    def upstream_url(self) -> str:
        """Where the replay gateway forwards a real model's calls."""
        return self.base_url or DEFAULT_UPSTREAM

    def warnings(self) -> list[str]:
        return [f"{name} is deprecated; set {BASE_URL_ENV} instead (it is the same URL)" for name in self.deprecated]

    def llm(self, model: str, **options: Any) -> "LLM":
        """The adapter for ``model`` with this key and base URL (imports the anthropic SDK)."""
        from bot.model.llm import LLM

        return LLM.connect(model, api_key=self.api_key, base_url=self.base_url, **options)


def replay_options(settings: "Settings", env: Environment, *, model: str, runs_dir: Path | None = None,
                   sandbox: str | None = None, **given: Any) -> "ReplayOptions":
    """How to replay, from the command line (``given``, ``runs_dir``, ``sandbox``), the config and ``env``.

    The key goes to a real model only unless ``api_key`` is given (the gate's screen model may be
    real when the agent's is not); runs are kept under
    ``paths.traces`` and the sandbox is ``replay.sandbox`` unless given.
    """
    from bot.replay.engine import SCRIPTED, ReplayOptions

    cfg = settings.config.replay
    _, key, upstream = env.for_agent(given.get("agent") or "builtin")
    given.setdefault("api_key", key if model != SCRIPTED else None)
    return ReplayOptions(model=model, upstream_url=upstream, runs_dir=runs_dir or settings.path("traces"),
                         sandbox=sandbox or cfg.sandbox, keep_runs=cfg.keep_runs, keep_runs_days=cfg.keep_runs_days,
                         **given)
