"""The report a bug leaves behind, laid out as pre-commit's ``error_handler.py`` lays out its log.

Two markdown sections, ready to paste into an issue: *version information* (Replaybook's
version, ``sys.version``, the interpreter, ``os.name``, ``sys.platform``, the platform and the
command line) and *error information* (the one-line error and the traceback, each in a fence
it cannot close). Each crash gets a new file that only this user can read (``mkstemp``: mode
0600, a unique name, never a symlink another user planted) in the temporary folder.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from pathlib import Path

from bot._util.build_info import VERSION as __version__
from bot._util.text_safety import block


def report(exc: BaseException, formatted: str) -> str:
    """The report's text for ``exc`` and its formatted traceback."""
    version = [f"replaybook version: {__version__}", "sys.version:",
               *(f"    {line}" for line in sys.version.splitlines()),
               f"sys.executable: {sys.executable}", f"os.name: {os.name}", f"sys.platform: {sys.platform}",
               f"platform: {platform.platform()}", f"argv: {sys.argv!r}"]
    error = f"{type(exc).__name__}: {exc}"
    return "\n".join(["### version information", "", block("\n".join(version), ""), "",
                      "### error information", "", block(error, ""), "", block(formatted.rstrip(), ""), ""])


def write(exc: BaseException, formatted: str) -> Path:
    """Write the report to a new private file and return its path."""
    fd, name = tempfile.mkstemp(prefix="replaybook-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(report(exc, formatted))
    return Path(name)
