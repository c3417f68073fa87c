"""The programs the harness itself runs, found once, from its own PATH, before any scenario is read.

A scenario's toolchain puts its ``bin`` first on the agent's PATH, and a wheel
can ship a ``bin/git`` or ``bin/bash``. Had the harness looked its own tools
up on that PATH, the wheel's ``git`` would run on the host, beside the key.
So ``git``, ``bash``, ``socat``, ``bwrap``, ``strace`` and ``docker`` are resolved from the
PATH the process started with (captured when this module is imported, which
``bot.cli.main`` does first), never from a folder the scenario can fill (the cache's
toolchains and shims, a sandbox's temp folder), and then always used by
absolute path.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile

from bot import settings

_STARTUP_PATH = settings.STARTUP_PATH
# Every code path git could take from a tree or a config the harness did not write, turned off, for each
# git the harness runs. Command-line config outranks a repository's and reaches every git git starts
# (GIT_CONFIG_PARAMETERS).
GIT_HARDENED = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false",
                "-c", "core.excludesFile=/dev/null", "-c", "core.attributesFile=/dev/null",
                "-c", "submodule.recurse=false", "-c", "core.sshCommand=false")


def _untrusted_roots() -> tuple[str, ...]:
    """Folders the scenario can fill: the replay cache (toolchains, shims) and the sandboxes' temp folders."""
    from bot.replay.trace.shims import default_cache_dir

    roots = [str(default_cache_dir()), settings.get("REPLAYBOOK_TMPDIR") or "", "/dev/shm",
             os.path.join(tempfile.gettempdir(), "replaybook-")]
    return tuple(os.path.realpath(r) for r in roots if r)


def trusted_path(path: str | None = None) -> str:
    """``path`` (default: the PATH at start) without relative entries or folders the scenario can fill."""
    bad = _untrusted_roots()
    out: list[str] = []
    for d in (path if path is not None else _STARTUP_PATH).split(os.pathsep):
        if not d or not os.path.isabs(d) or d in out:
            continue
        real = os.path.realpath(d)
        if any(real == r or real.startswith(r.rstrip("/") + "/") or (r.endswith("-") and real.startswith(r))
               for r in bad):
            continue
        out.append(d)
    return os.pathsep.join(out)


@functools.lru_cache(maxsize=None)
def find(name: str) -> str | None:
    """The absolute path of the harness's own ``name``, or None when it has none."""
    found = shutil.which(name, path=trusted_path())
    return found  # absolute (every trusted entry is); not resolved: a multi-call binary needs its name


def require(name: str, why: str) -> str:
    from bot.errors import BadInput

    found = find(name)
    if found is None:
        raise BadInput(f"{name} is not on PATH; {why}")
    return found


def start_from(path: str) -> None:
    """Take ``path`` as the PATH the harness started with (a machine's PATH, for tests of a missing tool)."""
    global _STARTUP_PATH
    _STARTUP_PATH = path
    find.cache_clear()
