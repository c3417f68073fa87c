"""Reach: whether a path-scoped rule can reach the agent in a suite scenario, read from its baseline trials.

A host that delivers a rule by scope does not put it in the prompt: it loads it when the agent does what triggers
that scope (``TRIGGERS``, from ``/work/shared/field-notes.md``): Claude Code when the agent *reads* a file the
rule's ``paths:`` match, Codex when the working folder is under the folder of a nested ``AGENTS.md``, Gemini CLI
(and Windsurf) when a tool touches the folder. Until the trigger, a trial with the rule is the same trial as one
without it: same prompt, same distribution. So if none of a scenario's *n* baseline trials did what triggers the
scope, the rule cannot have changed those runs, and the chance it changes a run at all is the chance of the
trigger, which is at most ``1 - 0.05 ** (1 / n)`` at 95% (exact, one-sided; about 3/*n*, the rule of three). That
is the bound on harm the gate reports for a scenario it skips (``harm_bound``).

The footprint each trial keeps (``bot.replay.footprint``): its reads (tool calls and reading commands' file
arguments, not the kernel: a lower bound), its writes (the sandbox diff), its working folders and commands (the
kernel's exec trace). A trial recorded before footprints (``footprint`` None) counts as a touch: it proves nothing.

Whether a host delivers by scope at all comes from the renderer's description of hosts (``host_scopes``); a host
that reads one whole file gets every rule everywhere, so nothing is skipped there.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Iterable, Literal

from bot.replay.engine import TrialResult

Trigger = Literal["read", "cwd", "touch"]
TRIGGERS: dict[str, Trigger] = {"claude-code": "read", "codex": "cwd", "gemini": "touch", "windsurf": "touch"}
TRIGGER_WORDS = {"read": "read a file the rule's paths match (Claude Code's trigger)",
                 "cwd": "ran in a folder under the rule's paths (Codex's nested AGENTS.md chain)",
                 "touch": "touched a file or folder under the rule's paths (Gemini's folder GEMINI.md)"}
CONFIDENCE = 0.95


def host_scopes(host: str) -> bool:
    """Whether ``host`` delivers a rule only within its scope (nested files, ``paths:``, ``applyTo``, globs).

    The hosts' descriptions belong to the renderer (``bot.playbook.render.hosts``, issue 54 item 1); until it says
    so, every host is taken to read one whole file: the fallback is global, so nothing is skipped."""
    try:
        from bot.playbook.render import hosts
    except ImportError:  # pragma: no cover - the renderer is part of the package
        return False
    described = getattr(hosts, "host_scopes", None)
    return bool(described(host)) if callable(described) else False


def trigger(host: str) -> Trigger | None:
    """What makes ``host`` load a path-scoped rule; None where it is not known (then path scopes skip nothing)."""
    return TRIGGERS.get(host)


def harm_bound(n: int, confidence: float = CONFIDENCE) -> float:
    """The most a rule can change a scenario's pass rate, at ``confidence``, when none of ``n`` trials triggered
    its delivery: the exact upper bound of a zero count, ``1 - (1 - confidence) ** (1 / n)`` (3/n, roughly)."""
    return 1.0 if n <= 0 else 1 - math.pow(1 - confidence, 1 / n)


def _folder(glob: str) -> str:
    """The literal folder a glob lies under (``web/**`` -> ``web``; ``*.py`` -> ``.``, the whole tree)."""
    parts = []
    for part in glob.strip("/").split("/"):
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    else:
        parts = parts[:-1]  # a file: its folder
    return "/".join(parts) or "."


def _under(path: str, folder: str) -> bool:
    path = posixpath.normpath(path)
    return folder == "." and not path.startswith("/") or path == folder or path.startswith(folder + "/")


def touches(footprint: dict | None, paths: Iterable[str], how: Trigger) -> bool:
    """Whether a trial with this footprint did what triggers delivery of a rule scoped to ``paths``."""
    if footprint is None:
        return True  # not recorded: no evidence it did not
    globs = list(paths)
    files = list(footprint.get("reads", ()))
    if how == "read":  # the agent's own reads: its tool calls (an edit or write tool's path included) and the
        # file arguments of reading commands; not the diff, where a test run's __pycache__ would count as a touch
        return any(fnmatchcase(f, g) for f in files for g in globs)
    folders = [_folder(g) for g in globs]
    cwds = list(footprint.get("cwds", ()))
    if how == "cwd":
        return any(_under(c, d) for c in cwds for d in folders)
    touched = files + list(footprint.get("writes", ())) + cwds
    touched += [a for argv in footprint.get("commands", ()) for a in argv[1:] if not a.startswith("-")]
    return any(_under(t, d) or fnmatchcase(t, g) for t in touched for d in folders for g in globs)


@dataclass
class Reach:
    """The verdict of a scenario's baseline trials on one path-scoped rule."""

    trials: int  # baseline trials read
    touched: int  # of them, those that did what triggers delivery
    how: Trigger

    @property
    def skip(self) -> bool:
        return self.trials > 0 and self.touched == 0

    @property
    def bound(self) -> float:
        return harm_bound(self.trials)

    def note(self) -> str:
        if not self.skip:
            return f"reached: {self.touched} of its {self.trials} baseline trial(s) {TRIGGER_WORDS[self.how]}"
        return (f"not replayed: none of its {self.trials} baseline trials {TRIGGER_WORDS[self.how]}, so the rule "
                f"would not have reached the agent; harm at most {self.bound:.1%} (95%, exact)")


def judge(trials: list[TrialResult], paths: Iterable[str], how: Trigger) -> Reach:
    scored = [t for t in trials if t.verdict != "unscored"]
    globs = list(paths)
    return Reach(len(scored), sum(touches(t.footprint, globs, how) for t in scored), how)
