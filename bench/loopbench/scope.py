"""Where a rule can reach in the noisy preset (SIMULATED): the repository's areas, each scenario's files, the
scope distill proposes, and which rules a host delivers into a run.

The simulated repository has top-level areas (``AREAS``, each a path glob ``area/**``). Every mode (a scenario of
the stream or of the suite) has a home area, where its task's files are; its fixture also holds files of a few
other areas, each touched by a run only sometimes. Drawn per (seed, mode): the same in every policy.

Distill proposes the narrowest scope its incidents' evidence supports (issue 54, item 4): the task type they came
from, and, for a mode whose incidents cite files (``p_path`` of the modes, drawn once per mode), the path glob of
their home area; a lesson about a command or a habit cites no file and gets no path.

Delivery (``ScopeConfig.delivery``):

* ``scoped``: a host that honours scope (nested AGENTS.md, ``paths:``, ``applyTo``, ...). A rule reaches a
  scenario's prompt only if its task types include the scenario's and its path glob matches a file of the
  scenario's fixture (the product's ``suite_check.reaches``); within one run it is delivered only if the run
  touches a file of that area (the host's trigger: a read, a tool touching the folder).
* ``whole-file``: every rule reaches every prompt and is delivered in every run.
* ``mix``: each simulated project (seed) has one host, whole-file with chance ``whole_file_share``.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

AREAS = ("api", "web", "cli", "worker", "infra", "db", "docs", "tools")
DELIVERIES = ("scoped", "whole-file", "mix")


@dataclass(frozen=True)
class ScopeConfig:
    delivery: str = "scoped"
    # mix: the share of projects whose host reads the rules whole. 2 of the 6 hosts shared/field-notes.md lists have
    # no dependable scoped form for an agent (Copilot attaches instructions regardless of applyTo, vscode#258378;
    # Cursor attaches glob rules for files open in tabs, not for files read through tools); hosts weighted equally
    # (an assumption).
    whole_file_share: float = round(2 / 6, 4)
    # a mode's incidents cite files of one area: 25 of 39 human-written scoped-rule files in field-notes' small
    # sample were narrower than the whole repository (20 of 29 Copilot applyTo, 5 of 10 Cursor globs)
    p_path: float = round(25 / 39, 4)
    p_other_area: float = 0.2  # a fixture holds files of each other area with this chance (assumed)
    touch_min: float = 0.05  # ... and a run touches such an area with chance U(touch_min, touch_max) (assumed)
    touch_max: float = 0.5
    harm_near: float = 0.5  # a harmful rule's victim is drawn among the scenarios its scope reaches (assumed)
    task_types: bool = True  # a scoped host knows the task's type (the harness's agents do; assumed for hosts)

    def as_dict(self) -> dict:
        return asdict(self)


def _rng(seed: int, *key) -> random.Random:
    return random.Random("scope:" + ":".join(str(k) for k in (seed, *key)))


class Scopes:
    """The areas of one seed's modes. Pure functions of (seed, mode): call them in any order."""

    def __init__(self, config: ScopeConfig, seed: int, modes: dict):
        self.config, self.seed, self.modes = config, seed, modes
        self.whole_file = config.delivery == "whole-file" or (
            config.delivery == "mix" and _rng(seed, "host").random() < config.whole_file_share)
        self._home: dict[str, str] = {}
        self._touch: dict[str, dict[str, float]] = {}

    def home(self, mode: str) -> str:
        got = self._home.get(mode)
        if got is None:
            got = self._home[mode] = AREAS[_rng(self.seed, "home", mode).randrange(len(AREAS))]
        return got

    def touch(self, mode: str) -> dict[str, float]:
        """area -> the chance a run of ``mode`` touches it (its home 1; the areas its fixture holds files of)."""
        got = self._touch.get(mode)
        if got is None:
            c, home = self.config, self.home(mode)
            got = {home: 1.0}
            for area in AREAS:
                rng = _rng(self.seed, "fixture", mode, area)
                if area != home and rng.random() < c.p_other_area:
                    got[area] = round(rng.uniform(c.touch_min, c.touch_max), 4)
            self._touch[mode] = got
        return got

    def proposed(self, mode: str) -> tuple[str, str]:
        """(task type, area) distill scopes a rule for ``mode`` to: the narrowest its incidents support."""
        m = self.modes[mode]
        cites_files = m.kind == "oneoff" or _rng(self.seed, "cites", mode).random() < self.config.p_path
        return m.task_type, self.home(mode) if cites_files else ""

    def reaches(self, scope: str, area: str, sid: str) -> bool:
        """Whether a rule scoped (``scope``: task type, ``area``) reaches ``sid``'s prompt at all."""
        if self.whole_file:
            return True
        if scope and self.config.task_types and self.modes[sid].task_type != scope:
            return False
        return not area or area in self.touch(sid)

    def reach_chance(self, scope: str, area: str, sid: str) -> float:
        """The chance a run of ``sid`` gets the rule: 0 if it cannot reach it, else the chance the run touches its
        area (1 with no area, or whole-file)."""
        if not self.reaches(scope, area, sid):
            return 0.0
        return 1.0 if self.whole_file or not area else self.touch(sid)[area]

    def near(self, scope: str, area: str, others: list[str]) -> list[str]:
        """Of ``others``, the scenarios a rule of this scope reaches under scoped delivery."""
        c = self.config
        return [s for s in others if (not scope or not c.task_types or self.modes[s].task_type == scope)
                and (not area or area in self.touch(s))]
