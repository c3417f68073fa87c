"""The narrowest scope a proposal's incidents support, and why, when it must be global.

A rule reaches the agent only where its scope lets it (``bot.playbook.scope``), and the gate replays the suite only
where it can reach, so a narrow scope is cheap and safe to judge. Distill proposes one from what the cited
incidents show, never from what the distiller claims:

- ``paths``: each incident's evidence names repository files (``packages/api/pytest.ini``; a runner's absolute
  ``/home/runner/work/R/R/…`` prefix is cut; URLs, ``site-packages``, ``node_modules`` and system paths are not the
  repository's). An incident's files give the folder they share (``packages/api/**``), or the one file when they
  share none. The rule's globs are those of every incident. One incident whose evidence names no file makes the
  rule global: nothing shows where else the mistake would happen.
- ``task_types``: the incidents' own task types, when every one has one.

The distiller may narrow further (a re-proposal after a regression names ``paths``): its globs are kept when every
file the evidence names matches them (or it names none), else the evidence's replace them. ``scope_reason`` says which, in one line.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from bot.playbook.rule import GLOB, MAX_GLOBS
from bot.playbook.scope import matches

REASON_MAX = 300  # the rule's `scope_reason` field holds at most this much
_PATH = re.compile(r"(?<![\w./-])((?:/?[A-Za-z0-9_.@+-]+/)*[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*\.[A-Za-z0-9]{1,10})(?![\w/])")
_RUNNER = re.compile(r"^/(?:home/runner|__w|github/workspace|Users/runner)/(?:work/)?(?:[^/]+/){0,2}")
_NOT_REPO = ("site-packages/", "dist-packages/", "node_modules/", ".venv/", "venv/", "/usr/", "/opt/", "/tmp/",
             "/etc/", "/proc/", "/lib/", "/root/", ".cache/")
_FILE_EXT = re.compile(r"\.(py|js|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sql|sh|toml|yaml|yml|"
                       r"json|ini|cfg|md|txt|lock|mod|sum|gradle|xml|html|css|scss|vue|svelte|proto|tf)$")


@dataclass
class Scope:
    """A proposal's scope and the reason for it."""

    paths: list[str] = field(default_factory=list)
    task_types: list[str] = field(default_factory=list)
    reason: str = ""


def files_in(text: str | None) -> list[str]:
    """Repository files named in ``text`` (relative, normalised), in order, without repeats."""
    out: list[str] = []
    for raw in _PATH.findall(text or ""):
        path = _RUNNER.sub("", raw)
        if any(mark in ("/" + path if not path.startswith("/") else path) for mark in _NOT_REPO):
            continue
        if path.startswith("/") or "://" in path or not _FILE_EXT.search(path):
            continue
        path = posixpath.normpath(path)
        if path.startswith("..") or not GLOB.match(path):
            continue
        out.append(path)
    return list(dict.fromkeys(out))


def incident_glob(files: list[str]) -> str | None:
    """The narrowest glob covering one incident's ``files``: their shared folder, or the file when only one."""
    folders = [posixpath.dirname(f).split("/") for f in files]
    shared: list[str] = []
    for parts in zip(*folders):
        if len(set(parts)) != 1 or not parts[0]:
            break
        shared.append(parts[0])
    if shared:
        return "/".join(shared) + "/**"
    return files[0] if len(set(files)) == 1 else None


def propose(incidents: list[Any], given_paths: list[str] = (), given_types: list[str] = ()) -> Scope:
    """The scope for a rule citing ``incidents`` (records with ``id``, ``evidence``, ``task_type``), with the
    distiller's ``given_paths`` / ``given_types`` kept where the evidence supports them."""
    types, why_types = _task_types(incidents, list(given_types))
    per: dict[str, list[str]] = {i.id: files_in(getattr(i, "evidence", None)) for i in incidents}
    blind = [iid for iid, files in per.items() if not files]
    if given_paths and len(blind) == len(per):
        return Scope(list(given_paths), types, f"the distiller's paths; the evidence names no file to check them "
                                               f"against{why_types}")
    if blind:
        return Scope([], types, f"global: the evidence of {', '.join(blind)} names no repository file{why_types}")
    named = [f for files in per.values() for f in files]
    if given_paths and all(matches(f, list(given_paths)) for f in named):
        return Scope(list(given_paths), types, f"the distiller's paths cover every file the evidence names{why_types}")
    globs: list[str] = []
    for iid, files in per.items():
        glob = incident_glob(files)
        if glob is None:
            return Scope([], types, f"global: the files {iid}'s evidence names share no folder "
                                    f"({', '.join(files[:3])}){why_types}")
        globs.append(glob)
    globs = _narrowest(globs)
    if len(globs) > MAX_GLOBS:
        return Scope([], types, f"global: the evidence names more than {MAX_GLOBS} folders{why_types}")
    replaced = " (the distiller's paths did not cover them)" if given_paths else ""
    return Scope(globs, types, f"paths from the files the evidence of {', '.join(per)} names{replaced}{why_types}")


def _narrowest(globs: list[str]) -> list[str]:
    """``globs`` without repeats and without one another covers (``a/**`` covers ``a/b/**``)."""
    unique = sorted(set(globs))
    return [g for g in unique if not any(o != g and o.endswith("/**") and g.startswith(o[:-2]) for o in unique)]


def _task_types(incidents: list[Any], given: list[str]) -> tuple[list[str], str]:
    """(the task types, a note for the reason when the rule must apply to every one)."""
    if given:
        return list(given), ""
    own = [getattr(i, "task_type", None) for i in incidents]
    if own and all(own):
        return sorted(set(own)), ""
    missing = [i.id for i, t in zip(incidents, own) if not t]
    return [], f"; every task type ({', '.join(missing)} recorded none)" if missing else ""


def narrowest(incidents: list[Any], answer: Any) -> tuple[Any, str]:
    """``answer`` (a ``RuleAnswer``) with the scope :func:`propose` gives for the incidents it cites, and why."""
    cited = [i for i in incidents if i.id in answer.cites] or list(incidents)
    scope = propose(cited, answer.paths, answer.task_types)
    reason = scope.reason if len(scope.reason) <= REASON_MAX else scope.reason[:REASON_MAX - 1] + "…"
    return answer.model_copy(update={"paths": scope.paths, "task_types": scope.task_types}), reason
