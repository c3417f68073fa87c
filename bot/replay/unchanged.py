"""``unchanged``: whether a path is byte-identical in the fixture and the result, caches aside, nothing followed."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat
from pathlib import Path

# What running code leaves behind: `unchanged` on a folder does not count these.
CACHE_NAMES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox", ".nox",
               "*.pyc", "*.pyo", ".coverage", ".coverage.*", ".DS_Store")


def is_cache(name: str) -> bool:
    """Whether a file or folder name is bytecode or a tool's cache (see ``CACHE_NAMES``)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in CACHE_NAMES)


def unchanged(pristine: Path, root: Path, path: str) -> bool:
    """Whether ``path`` is byte-identical in ``root`` and ``pristine`` (both absent counts as unchanged).

    Inside a folder, bytecode and caches (``CACHE_NAMES``) are not compared:
    running the tests writes ``__pycache__``, and that is not a change to the code.
    Nothing is followed on the host: a link on the way is resolved inside its
    own tree, and one that leaves it names nothing (``in_tree``).
    """
    rel = _inside(path)
    a, b = in_tree(Path(pristine), rel), in_tree(Path(root), rel)
    if a is None or b is None:
        return a is None and b is None and _same_link_text(Path(pristine), Path(root), rel)
    return _same(a, b)


def names_nothing(pristine: Path, root: Path, path: str) -> bool:
    """Whether ``path`` is in neither ``pristine`` nor ``root``: an ``unchanged`` on it would prove nothing."""
    rel = _inside(path)
    a, b = in_tree(Path(pristine), rel), in_tree(Path(root), rel)
    return not ((a is not None and os.path.lexists(a)) or (b is not None and os.path.lexists(b)))


def _inside(path: str) -> str:
    norm = posixpath.normpath(path)
    if posixpath.isabs(path) or norm == ".." or norm.startswith("../"):
        raise ValueError(f"{path!r}: paths in checks are relative to the repo root and stay inside it")
    return norm


_MAX_HOPS = 40


def in_tree(tree: Path, rel: str) -> Path | None:
    """The entry ``rel`` names in ``tree``, each link on the way resolved inside ``tree``, never on the host.

    The last component is not followed (it is compared as a link). None when a
    link on the way is absolute, climbs out of ``tree``, or loops.
    """
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    cur: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if not cur:
                return None
            cur.pop()
            continue
        cur.append(part)
        full = tree.joinpath(*cur)
        if parts and os.path.islink(full):
            hops += 1
            target = os.readlink(full)
            if hops > _MAX_HOPS or os.path.isabs(target):
                return None
            cur.pop()
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
    return tree.joinpath(*cur)


def _same_link_text(a_tree: Path, b_tree: Path, rel: str) -> bool:
    """Both trees leave themselves at the same link with the same text: the agent changed nothing there."""
    parts = rel.split("/")
    for i in range(1, len(parts)):
        a, b = a_tree.joinpath(*parts[:i]), b_tree.joinpath(*parts[:i])
        if os.path.islink(a) or os.path.islink(b):
            return os.path.islink(a) and os.path.islink(b) and os.readlink(a) == os.readlink(b)
    return False


def _same(a: Path, b: Path) -> bool:
    la, lb = os.path.lexists(a), os.path.lexists(b)
    if not (la and lb):
        return la == lb
    sa, sb = os.lstat(a), os.lstat(b)
    if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
        return False
    if stat.S_ISLNK(sa.st_mode):
        return os.readlink(a) == os.readlink(b)
    if stat.S_ISDIR(sa.st_mode):
        names = {n for n in set(os.listdir(a)) | set(os.listdir(b)) if not is_cache(n)}
        names.discard(".git")  # the agent's repo is harness state, not fixture content
        return all(_same(a / n, b / n) for n in names)
    if not stat.S_ISREG(sa.st_mode) or sa.st_size != sb.st_size:
        return False
    return _same_bytes(a, b)


def _same_bytes(a: Path, b: Path, chunk: int = 1 << 20) -> bool:
    """Compared a chunk at a time, never following a link (O_NOFOLLOW): a file may be as large as max_disk_mb."""
    try:
        fa = os.open(a, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            fb = os.open(b, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            os.close(fa)
            raise
    except OSError:
        return False
    try:
        while True:
            x, y = os.read(fa, chunk), os.read(fb, chunk)
            if x != y:
                return False
            if not x:
                return True
    finally:
        os.close(fa)
        os.close(fb)


