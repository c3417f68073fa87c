"""A change to a repository's files, as a value: relative path -> new text, or ``None`` for a deletion.

Every playbook transition (admission, retirement, hits, maintenance, distill's
proposals) is planned as a :class:`Change` and written by exactly one of two
sinks: :func:`apply_local` (the journal, under the playbook's lock) or, on
GitHub, one commit on a branch (``bot.github.pulls.commit_change``). A local
``gate --admit`` and a merged rule PR therefore write the same files by
construction: the same planner made both values.

Readers take a :class:`Tree`, the files of a checkout or of a commit, so a
planner never needs a temporary copy of a folder to compute what it would do.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from bot._util import yamlfile
from bot.errors import BadInput


def _checked(path: str) -> str:
    """``path`` as a clean relative POSIX path; anything that could leave the root is refused."""
    text = str(path)
    pure = PurePosixPath(text)
    if (not text or "\0" in text or "\\" in text or pure.is_absolute() or ".." in pure.parts
            or pure.as_posix() != text or text in (".", "")):
        raise BadInput(f"{text!r}: a change may only name a relative path inside the repository "
                       "(no '..', no leading '/', no backslash)")
    return text


@dataclass(frozen=True)
class Change:
    """Files to write (path -> text) and to delete (path -> None), relative to a repository root."""

    files: Mapping[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked = {_checked(p): t for p, t in sorted(self.files.items())}
        object.__setattr__(self, "files", checked)

    @classmethod
    def of(cls, writes: Mapping[str, str] | None = None, deletes: Iterable[str] = ()) -> "Change":
        files: dict[str, str | None] = dict(writes or {})
        files.update({p: None for p in deletes if p not in files})
        return cls(files)

    def __bool__(self) -> bool:
        return bool(self.files)

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __or__(self, later: "Change") -> "Change":
        """Both changes; where both name a path, ``later`` wins."""
        return Change({**self.files, **later.files})

    @property
    def writes(self) -> dict[str, str]:
        return {p: t for p, t in self.files.items() if t is not None}

    @property
    def deletes(self) -> list[str]:
        return [p for p, t in self.files.items() if t is None]

    def only(self, *prefixes: str) -> "Change":
        """The part of this change under any of ``prefixes`` (folders end with '/')."""
        return Change({p: t for p, t in self.files.items() if p.startswith(prefixes)})

    def without(self, *prefixes: str) -> "Change":
        return Change({p: t for p, t in self.files.items() if not p.startswith(prefixes)})

    def against(self, tree: "Tree") -> "Change":
        """This change less what ``tree`` already holds (a write of the same text, a delete of a missing file)."""
        return Change({p: t for p, t in self.files.items() if tree.read(p) != t})


class Tree(Protocol):
    """The files of a repository at one point: a checkout, a commit, or a dict."""

    def read(self, path: str) -> str | None:
        """The text of ``path``, or None when there is no such file."""

    def list(self, folder: str) -> list[str]:
        """Every file under ``folder`` (recursively), as paths relative to the root, sorted."""


class DiskTree:
    """A checkout on disk. Hidden files and folders (``.name``) are never listed."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def read(self, path: str) -> str | None:
        target = self.root / _checked(path)
        try:
            # bytes, then decode: read_text would turn CRLF into LF and a change would rewrite every line
            return target.read_bytes().decode("utf-8") if target.is_file() else None
        except (OSError, UnicodeDecodeError):
            return None

    def list(self, folder: str) -> list[str]:
        top = self.root / folder.strip("/")
        if not top.is_dir():
            return []
        out = []
        for p in top.rglob("*"):
            rel = p.relative_to(self.root)
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(top).parts):
                out.append(rel.as_posix())
        return sorted(out)


class MemoryTree:
    """Files held in a dict: a fake repository, or a tree with a change applied."""

    def __init__(self, files: Mapping[str, str] | None = None):
        self.files = {_checked(p): t for p, t in (files or {}).items()}

    def read(self, path: str) -> str | None:
        return self.files.get(path)

    def list(self, folder: str) -> list[str]:
        prefix = folder.strip("/") + "/"
        return sorted(p for p in self.files
                      if p.startswith(prefix) and not any(x.startswith(".") for x in p[len(prefix):].split("/")))

    def applied(self, change: Change) -> "MemoryTree":
        files = dict(self.files)
        for path, text in change.files.items():
            if text is None:
                files.pop(path, None)
            else:
                files[path] = text
        return MemoryTree(files)

    @classmethod
    def copy_of(cls, tree: "Tree", *folders: str) -> "MemoryTree":
        return cls({p: t for f in folders for p in tree.list(f) if (t := tree.read(p)) is not None})


class OverlayTree:
    """``base`` as it reads once ``change`` is applied, without writing anything."""

    def __init__(self, base: Tree, change: Change):
        self.base, self.change = base, change

    def read(self, path: str) -> str | None:
        if path in self.change.files:
            return self.change.files[path]
        return self.base.read(path)

    def list(self, folder: str) -> list[str]:
        prefix = folder.strip("/") + "/"
        names = set(self.base.list(folder)) | {p for p in self.change.writes if p.startswith(prefix)}
        return sorted(names - set(self.change.deletes))


def apply_local(change: Change, root: Path) -> None:
    """The local sink: every write and delete of ``change`` in one journal commit (all or, after a crash, none).

    The caller holds the playbook's lock (:func:`bot.change.locked`).
    """

    if not change:
        return
    root = Path(root)
    for path in change:
        _inside(root, path)
    Journal(root).commit({root / p: t for p, t in change.writes.items()}, [root / p for p in change.deletes])


def _inside(root: Path, path: str) -> None:
    """Refuse a path a link carries out of ``root``, or that is a link itself: the sink writes plain files only."""
    target = root / path
    if not target.resolve().is_relative_to(root.resolve()):
        raise BadInput(f"{path}: resolves outside the repository; replace the symlink on its way with a folder")
    if target.is_symlink():
        raise BadInput(f"{path}: is a symlink; Replaybook writes only plain files")


def relative(path: Path, root: Path) -> str:
    """``path`` as a change path under ``root``."""
    return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()


# The journal: all-or-nothing changes to several files, and a lock for the playbook.
#
# ``Journal.commit`` first writes the whole change (every new file's content
# and every deletion) to one journal file, atomically, then applies it, then
# removes the journal. A crash in between leaves the journal behind, and the
# next ``recover`` applies it again: each step is idempotent, so the folder
# ends either before the change or after it, never in between.
JOURNAL = ".replaybook/journal.json"
LOCK = ".replaybook/playbook.lock"


class Journal:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / JOURNAL

    def commit(self, writes: dict[Path, str], deletes: list[Path] = ()) -> None:
        record = {
            "writes": {self._rel(p): text for p, text in writes.items()},
            "deletes": [self._rel(p) for p in deletes],
        }
        yamlfile.replace(self.path, json.dumps(record))
        self._apply(record)
        self.path.unlink()

    def recover(self) -> bool:
        """Finish a change a crash interrupted; return whether there was one."""
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return False
        self._apply(record)
        self.path.unlink()
        return True

    def _apply(self, record: dict) -> None:
        for rel, text in record["writes"].items():
            yamlfile.replace(self.root / rel, text)
        for rel in record["deletes"]:
            with contextlib.suppress(FileNotFoundError):
                (self.root / rel).unlink()

    def _rel(self, path: Path) -> str:
        return os.path.relpath(Path(path).resolve(), self.root.resolve())


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the playbook's lock: one admission or retirement at a time, across processes."""
    path = Path(root) / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
