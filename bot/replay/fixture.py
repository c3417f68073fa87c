"""The scenario's fixture: checked before it is copied (no link out of it, no nested repository), then copied."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from bot.errors import BadInput


def check(fixture: Path) -> None:
    """Refuse links that leave the fixture, nested repositories, and special files copying would hang on."""
    top = os.path.realpath(fixture)
    for dirpath, dirnames, filenames in os.walk(fixture):
        if os.path.relpath(dirpath, fixture) == "." and ".git" in dirnames:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if name == ".git":
                raise BadInput(f"{fixture}: {os.path.relpath(full, fixture)} makes a nested repository, and its "
                               "config could name commands the harness would run; remove it (a `setup` step "
                               "may make a repository inside the sandbox instead)")
            if stat.S_ISLNK(st.st_mode):
                check_link(fixture, top, full)
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise BadInput(f"{full}: fixtures may hold only files, folders and symlinks; remove it")


def check_link(fixture: Path, top: str, link: str) -> None:
    target = os.readlink(link)
    rel_dir = os.path.relpath(os.path.dirname(link), fixture)
    lexical = os.path.normpath(os.path.join(rel_dir, target))
    try:
        real = os.path.realpath(link, strict=True)
    except FileNotFoundError:
        real = os.path.realpath(link)  # a dangling link inside the fixture is still a link inside it
    except OSError as exc:  # ELOOP: a link that points, in the end, back to itself
        raise BadInput(f"{fixture}: symlink {os.path.relpath(link, fixture)} is a loop ({exc.strerror}); "
                       "remove it, or point it at a file") from None
    inside = real == top or real.startswith(top + os.sep)
    if os.path.isabs(target) or lexical == ".." or lexical.startswith("../") or not inside:
        raise BadInput(
            f"{fixture}: symlink {os.path.relpath(link, fixture)} -> {target} points outside the "
            "fixture; make it a relative link to a path inside the fixture, or copy the file in"
        )


def copy(src: Path, dst: Path) -> None:
    # The fixture's own .git (if any) is not part of the scenario; the sandbox makes its own.
    shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: [".git"] if Path(d) == src else [])




