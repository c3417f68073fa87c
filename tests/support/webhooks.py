"""GitHub's own example webhook payloads (``@octokit/webhooks-examples``), fetched once with npm into ~/.cache."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

EXAMPLES_VERSION = "7.6.1"
# conftest points HOME at a temp folder per test; the cache lives in the real one (read when this is imported).
_REAL_HOME = Path(os.environ.get("HOME") or Path.home())
CACHE = _REAL_HOME / ".cache" / "replaybook-tests" / f"webhooks-examples-{EXAMPLES_VERSION}"


def fetch_examples() -> Path:
    """The examples' ``index.json`` in the cache, fetched with ``npm pack`` the first time."""
    target = CACHE / "index.json"
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        env = {**os.environ, "HOME": str(_REAL_HOME)}
        try:
            done = subprocess.run(
                ["npm", "pack", f"@octokit/webhooks-examples@{EXAMPLES_VERSION}", "--silent"],
                cwd=tmp, env=env, capture_output=True, text=True, timeout=180,
            )
        except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"npm could not run: {exc}") from None
        if done.returncode != 0:
            raise RuntimeError(f"npm pack failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        tarball = next(Path(tmp).glob("*.tgz"))
        with tarfile.open(tarball) as tar:
            member = tar.extractfile("package/api.github.com/index.json")
            data = member.read() if member else b""
        partial = Path(tmp) / "index.json"
        partial.write_bytes(data)
        json.loads(data)  # a broken download is never cached
        os.replace(partial, target)  # atomic: concurrent sessions see all or nothing
    return target


def example(examples, name: str, action: str | None = None, **where) -> dict:
    """A deep copy of the first example of ``name`` (with ``action``) whose fields match ``where``."""
    for payload in examples[name]:
        if action is not None and payload.get("action") != action:
            continue
        if all(get_path(payload, path.replace("__", ".")) == value for path, value in where.items()):
            return copy.deepcopy(payload)
    raise LookupError(f"no {name} example with action={action} {where}")


def get_path(payload, path: str):
    """The value at a dotted ``path`` (list indices as numbers) in ``payload``."""
    node = payload
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node
