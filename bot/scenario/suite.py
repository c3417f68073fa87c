"""The suite: every scenario folder under ``scenarios/``, found and loaded one way for every command.

A scenario is a folder ``<id>/scenario.yaml`` (hidden folders are not
scenarios). The one rule for a broken scenario: it is never skipped
silently. :func:`load` returns the scenarios that load and, by folder, why
each other one does not; ``replay --suite`` refuses to run a suite with a
broken scenario (:meth:`Suite.require_sound`), and the gate judges a broken
scenario as a broken suite entry (it cannot admit past one), so both say which one and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import BadInput
from bot.scenario import spec as sc


def folders(suite: Path) -> list[Path]:
    """The scenario folders of a suite, sorted by name."""
    suite = Path(suite)
    if not suite.is_dir():
        return []
    return sorted(p.parent for p in suite.glob("*/scenario.yaml") if not p.parent.name.startswith("."))


@dataclass
class Suite:
    folder: Path
    scenarios: list[sc.LoadedScenario] = field(default_factory=list)  # sorted by id
    broken: dict[Path, str] = field(default_factory=dict)  # folder -> why it does not load

    def require_sound(self) -> list[sc.LoadedScenario]:
        """The scenarios, or ``BadInput`` naming every one that does not load."""
        if self.broken:
            raise BadInput(f"{self.folder}: {len(self.broken)} scenario(s) do not load; fix them before replaying "
                           "the suite", problems=list(self.broken.values()))
        return self.scenarios


def load(suite: Path) -> Suite:
    """Every scenario of ``suite`` that loads, and why each other one does not."""
    out = Suite(Path(suite))
    for folder in folders(suite):
        try:
            out.scenarios.append(sc.load(folder))
        except BadInput as exc:
            out.broken[folder] = exc.render()
    out.scenarios.sort(key=lambda s: s.scenario.id)
    return out
