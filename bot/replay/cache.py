"""A content-addressed cache of replay results.

The key hashes everything that can change a result: the fixture tree, the
task, checks, services and budget, the simulated model's policy, the playbook
text (which holds the candidate), the agent and its version, the model id,
the noise and seed, the environment it lets through, and the trial index.
A before-run depends only on the
current playbook, so every candidate shares it. Only scored results are
kept: an unscored trial is retried, never replayed from the cache.

Entries are written atomically (temp file + rename) and never edited, so
any number of gates can share one cache folder at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from bot import scenario as sc
from bot.replay import checks as checks_mod
from bot.replay.engine import ReplayOptions, TrialResult

FORMAT = 2  # bump when TrialResult, the key or how checks decide changes (2: attribution, new check forms)


@lru_cache(maxsize=256)
def _tree_hash(folder: str, stamp: tuple) -> str:
    digest = hashlib.sha256()
    root = Path(folder)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} {os.readlink(path)}\n".encode())
        elif path.is_file():
            digest.update(f"F {rel} {path.stat().st_mode & 0o111}\n".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def tree_hash(folder: Path) -> str:
    """Hash of every path, mode bit and byte under ``folder``."""
    stamp = tuple(sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size)
                         for p in Path(folder).rglob("*") if p.is_file()))
    return _tree_hash(str(folder), stamp)


def trial_key(loaded: sc.LoadedScenario, playbook_text: str, opts: ReplayOptions, trial: int,
              agent_version: str) -> str:
    policy = loaded.folder / "policy.yaml"
    parts = {
        "format": FORMAT,
        "fixture": tree_hash(loaded.fixture),
        "scenario": loaded.scenario.model_dump(mode="json"),
        "policy": hashlib.sha256(policy.read_bytes()).hexdigest() if opts.simulated and policy.exists() else None,
        "playbook": playbook_text,
        "agent": opts.agent, "agent_version": agent_version, "command": opts.command,
        "model": opts.model, "noise": opts.noise if opts.simulated else None,
        "seed": opts.seed if opts.simulated else None,
        "env": {name: os.environ.get(name) for name in sorted(opts.env_allow)},
        "trial": trial,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class ReplayCache:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> TrialResult | None:
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.misses += 1
            return None
        checks = [checks_mod.CheckResult(**c) for c in data.pop("checks", [])]
        self.hits += 1
        return TrialResult(**data, checks=checks)

    def put(self, key: str, result: TrialResult) -> None:
        if result.verdict == "unscored":
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(result.to_dict(), handle)
        os.replace(tmp, path)  # same key, same content: the last writer wins harmlessly
