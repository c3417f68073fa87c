"""Replaybook: turn a coding agent's failures into a tested, capped playbook of rules.

The public API; everything else is private.
"""

from bot._util.build_info import VERSION as __version__
from bot.config import Config, Settings
from bot.errors import BadInput, CheckFailed, ReplaybookError
from bot.hindsight.lesson import Lesson, LessonStore
from bot.hindsight.reflection import Hindsight, Reflection
from bot.incident.store import Incident, IncidentStore
from bot.playbook.rule import Rule
from bot.playbook.store import Playbook
from bot.scenario.spec import Scenario

__all__ = [
    "BadInput",
    "CheckFailed",
    "Config",
    "Hindsight",
    "Incident",
    "IncidentStore",
    "Lesson",
    "LessonStore",
    "Playbook",
    "Reflection",
    "ReplaybookError",
    "Rule",
    "Scenario",
    "Settings",
    "__version__",
]
