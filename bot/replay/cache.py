"""A content-addressed cache of replay results.

The key hashes everything that can change a result: the fixture tree, the
task, checks, services and budget, the simulated model's policy, the exact
instructions delivered to the agent (the rendered text of the rules that reach
that scenario, the candidate among them where it does: not the playbook's
version, so a trial survives changes in scopes that never reach its scenario),
the agent and its version, the model id,
the noise and seed, the environment it lets through, the trial index, and
the arm: a trial with a rule under test is keyed apart from one with the
playbook as it is, so an admitted rule's trials (selected by its admission)
never become the next gate's baseline. A before-run depends only on the
current playbook, so every candidate shares it. Only scored results are
kept: an unscored trial is retried, never replayed from the cache.

Entries are written atomically (temp file + rename) and never edited, so
any number of gates can share one cache folder at once.

Entries are checked, not trusted: each carries an HMAC of its key and
content under a secret that never lives in the repository (the user's
``~/.config/replaybook/cache.key``, made on first use, or
``$REPLAYBOOK_CACHE_SECRET`` in CI). A result committed into the cache folder
by a pull request, or copied from another key, is a miss and is replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path

from bot import settings
from bot.replay import checks as checks_mod
from bot.replay.engine import ReplayOptions, TrialResult
from bot.replay.sandbox import isolation
from bot.scenario import spec as sc

FORMAT = 4  # bump when TrialResult, the key, the entry or how checks decide changes (3: attribution, sandbox, signed
# entries; 4: the arm, so no trial run with a candidate is read as a baseline)
ARMS = ("baseline", "candidate")


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
              agent_version: str, arm: str = "baseline") -> str:
    """The trial's key. ``playbook_text``: the instructions the agent is given in this scenario, as delivered
    (``bot.gate.suite_check.scoped_prompts`` where the host delivers by scope). ``arm``: 'baseline' for a trial with the playbook as it is (a before-run, a suite baseline,
    a task), 'candidate' for one with a rule under test. They are keyed apart because an admitted candidate's text
    becomes the next baseline's: its trials were selected by the admission, so they must not be read as that
    baseline's independent trials (docs/gate.md, "Cache")."""
    if arm not in ARMS:
        raise ValueError(f"arm {arm!r}: one of {ARMS}")
    host = settings.environ()
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
        "env": {name: host.get(name) for name in sorted(opts.env_allow)},
        "trial": trial,
        "arm": arm,
        # Only when set, so that every existing entry keeps its key.
        **({"follow": opts.follow} if opts.simulated and opts.follow != 1.0 else {}),
        # The local model by name and quantisation: another install's verdicts are not this one's.
        **({"model_label": opts.model_label} if opts.model_label else {}),
        **({"max_turns": opts.max_turns} if opts.max_turns else {}),
        **({"max_seconds": opts.max_seconds} if opts.max_seconds else {}),
        # Where the playbook was put (``bot.replay.delivery``): files change the tree the agent gets.
        **({"deliver": opts.deliver, "rule_paths": list(opts.rule_paths)} if opts.deliver != "prompt" else {}),
        # A path-scoped rule under test that builtin or mini-swe-agent get by their host's trigger, not whole in the
        # prompt (``agents.scoped_delivery``): the same text, other instructions delivered. A baseline has no rule
        # under test (``Runner._attempt`` drops it), so its key never holds one.
        **({"rule_paths": list(opts.rule_paths)} if arm == "candidate" and opts.deliver == "prompt" and opts.rule
           and opts.rule_paths else {}),
        # A verdict from an unisolated replay never stands in for an isolated one.
        "sandbox": isolation.backend(opts.sandbox).name,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


SECRET_ENV = "REPLAYBOOK_CACHE_SECRET"


def _secret() -> bytes:
    """The key entries are signed with: $REPLAYBOOK_CACHE_SECRET, else a private file in the user's config."""
    if secret := settings.get(SECRET_ENV):
        return secret.encode("utf-8")
    base = Path(settings.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    path = base / "replaybook" / "cache.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another gate made it first
            return path.read_bytes()
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_hex(32).encode())
        return path.read_bytes()


def _mac(secret: bytes, key: str, payload: str) -> str:
    return hmac.new(secret, f"{key}\n{payload}".encode("utf-8"), hashlib.sha256).hexdigest()


class ReplayCache:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.hits = 0
        self.misses = 0
        self.refused = 0  # entries whose signature did not check: never used
        self._key = _secret()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> TrialResult | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            payload, mac = entry["result"], entry["mac"]
            if not hmac.compare_digest(str(mac), _mac(self._key, key, str(payload))):
                self.refused += 1
                raise ValueError("signature")
            data = json.loads(payload)
            checks = [checks_mod.CheckResult(**c) for c in data.pop("checks", [])]
            result = TrialResult(**data, checks=checks)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self.misses += 1
            return None
        self.hits += 1
        return result

    def put(self, key: str, result: TrialResult) -> None:
        if result.verdict == "unscored":
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
        payload = json.dumps(result.to_dict())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"result": payload, "mac": _mac(self._key, key, payload)}, handle)
        os.replace(tmp, path)  # same key, same content: the last writer wins harmlessly
