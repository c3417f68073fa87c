"""Sandbox folders a killed harness left behind: found by their owner's pid and start time, and removed."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

OWNER = ".owner"  # "<pid> <start time>" of the harness that made a sandbox folder
_STALE_UNOWNED_S = 86400


def start_time(pid: int) -> str:
    """A process's start time in clock ticks (field 22 of /proc/PID/stat): a pid reused later has another."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def remove_stale(tmp_root: str | Path) -> list[Path]:
    """Remove sandbox folders whose harness is gone (it was killed before it could clean up); returns them.

    A folder is stale when the process its ``.owner`` names is not running (or is
    another process with that pid), or, with no ``.owner``, when it is laid out as a
    sandbox and a day old. Anyone else's ``replaybook-*`` folder is left alone.
    """
    gone = []
    try:
        entries = [e for e in os.scandir(tmp_root) if e.name.startswith("replaybook-") and e.is_dir(follow_symlinks=False)]
    except OSError:
        return gone
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            owner = Path(entry.path, OWNER)
            if owner.exists():
                pid, _, started = owner.read_text().strip().partition(" ")
                stale = not pid.isdigit() or start_time(int(pid)) != started
            else:  # from before owners were recorded: only a folder laid out as a sandbox is ours
                ours = os.path.lexists(os.path.join(entry.path, "commands.log")) and os.path.isdir(
                    os.path.join(entry.path, "root"))
                stale = ours and time.time() - entry.stat(follow_symlinks=False).st_mtime > _STALE_UNOWNED_S
        except OSError:
            continue
        if stale:
            rmtree(Path(entry.path))
            gone.append(Path(entry.path))
    return gone


_cleaned: set[str] = set()


def remove_stale_once(tmp_root: str) -> None:
    if tmp_root not in _cleaned:
        _cleaned.add(tmp_root)
        remove_stale(tmp_root)


def rmtree(path: Path) -> None:
    """Remove everything, even read-only files and folders an agent left behind."""

    def retry(func, p, _exc):  # noqa: ANN001 - shutil's onerror signature
        for target in (os.path.dirname(p), p):
            if os.path.isdir(target) and not os.path.islink(target):
                try:
                    os.chmod(target, stat.S_IRWXU)
                except OSError:
                    pass
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)
    if os.path.lexists(path):  # a last pass, e.g. after a chmod 000 deep inside
        shutil.rmtree(path, ignore_errors=True)
