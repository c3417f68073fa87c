"""All-or-nothing changes to several files, and a lock for the playbook.

``Journal.commit`` first writes the whole change (every new file's content
and every deletion) to one journal file, atomically, then applies it, then
removes the journal. A crash in between leaves the journal behind, and the
next ``recover`` applies it again: each step is idempotent, so the folder
ends either before the change or after it, never in between.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Iterator

from bot import yamlfile

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
