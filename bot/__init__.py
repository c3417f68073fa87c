"""Replaybook: turn a coding agent's failures into a tested, capped playbook of rules.

The public API; everything else is private.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("replaybook")
except PackageNotFoundError:  # running from a checkout without an install
    __version__ = "0.0.0+checkout"

from bot.config import Config, Settings
from bot.hindsight import Hindsight, Reflection
from bot.lesson import Lesson, LessonStore
from bot.errors import BadInput, CheckFailed, ReplaybookError
from bot.incident import Incident, IncidentStore
from bot.playbook import Playbook
from bot.rule import Rule
from bot.scenario import Scenario

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
