"""Which commit this Replaybook was built from, so ``init`` can pin the actions to it.

A wheel or sdist records it at build time (``hatch_build.py`` writes ``bot/_build_info.json``); an
editable install in a checkout reads git live. Nothing recorded and no checkout: ``None``.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    VERSION = version("replaybook")
except PackageNotFoundError:  # running from a checkout without an install
    VERSION = "0.0.0+checkout"

INFO_FILE = Path(__file__).resolve().parents[1] / "_build_info.json"  # bot/_build_info.json


@dataclass(frozen=True)
class BuildCommit:
    commit: str
    dirty: bool  # tracked files differed from the commit: the actions there are not what this build runs
    tag: str | None
    source: str  # "recorded at build time" or "read from the checkout"


def build_commit() -> BuildCommit | None:
    if INFO_FILE.is_file():
        try:
            data = json.loads(INFO_FILE.read_text(encoding="utf-8"))
            return BuildCommit(str(data["commit"]), bool(data.get("dirty")), data.get("tag"), "recorded at build time")
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return checkout_commit(Path(__file__).resolve().parents[2])


def describe(built: BuildCommit | None = None, *, version: str = VERSION) -> str:
    """``0.1.0 (fd0a01d, untagged)``: the version and the commit the build records, as ``--version`` prints it."""
    built = built if built is not None else build_commit()
    if built is None:
        return f"{version} (commit unknown: not built from a git checkout)"
    notes = [built.commit[:7], built.tag or "untagged"]
    if built.dirty:
        notes.append("with uncommitted changes")
    return f"{version} ({', '.join(notes)})"


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def checkout_commit(root: Path) -> BuildCommit | None:
    """The checkout at ``root`` (only if ``bot/`` is tracked there): an editable install's, or the one
    ``hatch_build.py`` builds a wheel or sdist from. Standard library only, so the build hook can load it."""
    if not (root / "pyproject.toml").is_file() or _git(root, "ls-files", "--error-unmatch", "bot/__init__.py") is None:
        return None
    commit = _git(root, "rev-parse", "HEAD")
    if not commit:
        return None
    dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    tag = _git(root, "describe", "--tags", "--exact-match", "HEAD") or None
    return BuildCommit(commit, dirty, tag, "read from the checkout")
