"""Interpreter launchers resolved before a replay, so the shims trace the interpreter, not the launcher.

Under pyenv, ``python`` on PATH is a launcher script: each start runs about
twenty commands (``pyenv``, ``pyenv-exec``, ``pyenv-version-name``, ``cat``,
``head`` …), and each would go through a recording shim. The version pyenv
would pick is known before the replay (``$PYENV_VERSION``, else the root's
``version`` file), so that version's ``bin`` folder is put on PATH just before
the launcher folder: ``python`` is then the interpreter itself, the trace
records ``python``, and anything that version lacks still falls through to
pyenv. A fixture with its own ``.python-version`` keeps the launcher (pyenv
would choose by it), and so does pyenv's ``system``. No process is started:
only files are read.
"""

from __future__ import annotations

import os
from pathlib import Path

from bot import settings


def resolve_path(path: str, fixture: Path | None = None, environ: dict[str, str] | None = None) -> str:
    """``path`` with each pyenv shims folder preceded by the bin folders of the versions it selects."""
    environ = settings.environ() if environ is None else environ
    if fixture is not None and (Path(fixture) / ".python-version").exists():
        return path
    out: list[str] = []
    for d in path.split(os.pathsep):
        out += [b for b in _pyenv_bins(d, environ) if b not in out]
        out.append(d)
    return os.pathsep.join(out)


def _pyenv_bins(d: str, environ) -> list[str]:
    shims = Path(d)
    root = shims.parent
    if shims.name != "shims" or not (root / "versions").is_dir() or not (root / "libexec" / "pyenv").exists():
        return []
    names = _selected(root, environ)
    bins = [root / "versions" / name / "bin" for name in names if name != "system"]
    return [str(b) for b in bins if b.is_dir()]


def _selected(root: Path, environ) -> list[str]:
    raw = environ.get("PYENV_VERSION")
    if raw is None:
        try:
            raw = " ".join(line.split("#")[0] for line in (root / "version").read_text(encoding="utf-8").splitlines())
        except (OSError, UnicodeDecodeError):
            return []
    names = [n for chunk in raw.split(":") for n in chunk.split()]
    return [n for n in names if n and "/" not in n and n not in (".", "..")]
