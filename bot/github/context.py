"""What every action handler shares: the run's context, an action's outcome, and safe markdown.

Text from payloads, logs and model answers is untrusted. It reaches GitHub
only through :func:`code` (one inline code span) or :func:`fenced` (a fence it
cannot close), both of which :func:`~bot._util.text_safety.neutralise` it first: no
@mention, link, image, closing keyword or hidden marker from a log survives.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

from bot._util.text_safety import code, fenced  # noqa: F401 (the handlers import them from here)
from bot.gate.verdict import GateRunner, GateVerdict  # noqa: F401 (the handlers import them from here)
from bot.github.port import GitHubPort
from bot.incident import capture as capture_mod

Status = Literal["done", "unchanged", "skipped", "failed", "not_implemented"]
MAX_OPEN_RULE_PRS = 5


@dataclass(frozen=True)
class Outcome:
    """What one action did. ``status`` is ``failed`` or ``not_implemented`` when nobody should rely on it."""

    kind: str
    status: Status
    summary: str
    url: str | None = None
    verdict: str | None = None  # a gate's commit status: success | failure | error


@dataclass
class RunContext:
    """One run of the bot: the port, the checkout, the settings and models, and what the run has done so far."""

    port: GitHubPort
    root: Path
    settings: Any  # bot.config.Settings
    llm: capture_mod.Analyst | None = None
    payload: dict | None = None
    gate: GateRunner | None = None
    step_summary: Path | None = None
    run_url: str | None = None
    gate_pages: Path | None = None  # where each judged rule's gate JSON goes, for the page the workflow uploads
    distiller: Any = None  # bot.distill.answers.AsksJson; None when no model is configured
    max_open_rule_prs: int = MAX_OPEN_RULE_PRS
    open_prs: bool = True
    today: date | None = None
    config: Any = None  # bot.config.Config in effect (flags applied); None: the settings' own
    check_runs: bool = False  # the token is a GitHub App's: the gate is a check run, not a commit status
    new_incidents: int = 0  # incident issues this run filed (or made valid): the distill threshold counts them

    @property
    def effective(self) -> Any:
        return self.config if self.config is not None else self.settings.config

    @property
    def labels(self) -> Any:
        return self.effective.labels

    @property
    def github(self) -> Any:
        """The ``github:`` section in effect: agent and bot accounts, the threshold."""
        return self.effective.github
