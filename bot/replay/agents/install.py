"""Pinned agent CLIs in the cache: what `replaybook agent install` / `list` manage.

Each real agent is pinned to one version of one package (npm or PyPI). It is
installed into ``$XDG_CACHE_HOME/replaybook/NAME-VERSION`` from the registry
with the ordinary client (npm; a venv's pip), never from anywhere else, and
found there first, so users and ``.ci/run`` replay the same version.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot import settings
from bot.errors import BadInput


@dataclass(frozen=True)
class Pin:
    agent: str      # the --agent name
    registry: str   # "npm" or "pypi"
    package: str
    version: str
    binary: str     # the executable the package installs
    env: str        # an env var that names another binary instead
    # An npm CLI whose `bin` is a placeholder its postinstall script replaces with a platform package's executable:
    # that executable, under node_modules ({platform}: linux-x64, darwin-arm64, ...). No install script runs
    # (docs/security.md), so the binary is the platform package's own file, as the script would have linked it.
    native: str = ""

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}" if self.registry == "npm" else f"{self.package}=={self.version}"


PINS: dict[str, Pin] = {p.agent: p for p in (
    Pin("claude-code", "npm", "@anthropic-ai/claude-code", "2.1.328", "claude", "REPLAYBOOK_CLAUDE_CODE",
        native="@anthropic-ai/claude-code-{platform}/claude"),
    Pin("codex", "npm", "@openai/codex", "0.169.0", "codex", "REPLAYBOOK_CODEX"),
    Pin("mini-swe-agent", "pypi", "mini-swe-agent", "2.4.6", "mini", "REPLAYBOOK_MINI_SWE_AGENT"),
    Pin("opencode", "npm", "opencode-ai", "1.18.33", "opencode", "REPLAYBOOK_OPENCODE",
        native="opencode-{platform}/bin/opencode"),
)}


def pin(agent: str) -> Pin:
    found = PINS.get(agent)
    if found is None:
        raise BadInput(f"agent {agent!r} has no pinned package; installable: {', '.join(PINS)}")
    return found


def cache_dir(agent: str) -> Path:
    p = pin(agent)
    base = settings.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "replaybook" / f"{p.agent}-{p.version}"


def platforms() -> list[str]:
    """This machine's names in npm platform packages, best first (an x64 CPU without AVX2 takes a "baseline" build
    first where a package ships one, as opencode's postinstall does)."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(machine, machine)
    base = f"{'darwin' if sys.platform == 'darwin' else sys.platform}-{arch}"
    if arch != "x64":
        return [base]
    try:
        avx2 = " avx2" in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").replace("\t", " ")
    except OSError:
        avx2 = True
    return [base, f"{base}-baseline"] if avx2 else [f"{base}-baseline", base]


def cached_binary(agent: str, dest: Path | None = None) -> Path:
    p, dest = pin(agent), dest or cache_dir(agent)
    if p.native:
        candidates = [dest / "node_modules" / p.native.format(platform=name) for name in platforms()]
        return next((c for c in candidates if c.exists()), candidates[0])
    return dest / ("node_modules/.bin" if p.registry == "npm" else "venv/bin") / p.binary


def find(agent: str) -> str | None:
    """``$ENV`` override, the pinned copy in the cache, or the binary on PATH."""
    p = pin(agent)
    explicit = settings.get(p.env)
    if explicit:
        return explicit
    cached = cached_binary(agent)
    if cached.exists():
        return str(cached)
    return shutil.which(p.binary)


def install(agent: str, dest: Path | None = None) -> str:
    """Install the pinned version into ``dest`` (default: the cache); return its binary. Idempotent."""
    p, dest = pin(agent), dest or cache_dir(agent)
    binary = cached_binary(agent, dest)
    if binary.exists():
        return str(binary)
    dest.mkdir(parents=True, exist_ok=True)
    if p.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise BadInput(f"npm is not installed; it is needed to install {p.spec}")
        # Its own folder as the project (no checkout's .npmrc or package.json), and no package's install script.
        steps = [[npm, "install", "--silent", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", str(dest),
                  p.spec]]
    else:
        venv = dest / "venv"
        # -I: no `venv`, `pip` or module they import is found in the working folder (docs/security.md).
        steps = [[sys.executable, "-I", "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-I", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                  p.spec]]
    for argv in steps:
        done = subprocess.run(argv, cwd=dest, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise BadInput(f"could not install {p.spec} into {dest}: {(done.stderr or done.stdout).strip()[-400:]}")
    if not binary.exists():
        raise BadInput(f"installed {p.spec} into {dest}, but {binary} is missing")
    return str(binary)


def installed_version(agent: str) -> str | None:
    """The version of the cached install, or None when it is not installed."""
    p = pin(agent)
    dest = cache_dir(agent)
    if not cached_binary(agent).exists():
        return None
    if p.registry == "npm":
        manifest = dest / "node_modules" / p.package / "package.json"
        try:
            import json

            return str(json.loads(manifest.read_text()).get("version"))
        except (OSError, ValueError):
            return "?"
    found = list((dest / "venv" / "lib").glob(f"python*/site-packages/{p.package.replace('-', '_')}-*.dist-info"))
    return found[0].name.removesuffix(".dist-info").split("-")[-1] if found else "?"


def package_root(binary: str | None) -> tuple[str, ...]:
    """What a sandbox must let an npm-installed CLI read: its package (the part of its real path above
    ``node_modules``), or the folder of a binary installed otherwise."""
    if not binary:
        return ()
    real = os.path.realpath(binary)
    marker = f"{os.sep}node_modules{os.sep}"
    return (real.split(marker)[0],) if marker in real else (os.path.dirname(real),)


class PinnedCLI:
    """An agent CLI at its pinned version: found where ``agent install`` puts it (or its variable says), read in
    place by the sandbox, and named with the way to install it when it is missing."""

    name: str   # the --agent name, the key of its pin
    title: str  # how a message names it

    def __init__(self, binary: str | None = None):
        self.pin = pin(self.name)
        self.binary = binary or find(self.name)
        self.version = self.pin.version

    def reads(self) -> tuple[str, ...]:
        """What the sandbox must let the CLI read: its installed package."""
        return package_root(self.binary)

    def require_binary(self) -> str:
        if not self.binary:
            raise BadInput(f"{self.title} was not found; run `replaybook agent install {self.name}` "
                           f"({self.pin.spec}) or set {self.pin.env}")
        return self.binary


def json_lines(raw: str) -> Iterator[dict]:
    """Each line of a CLI's JSON-lines output that is a JSON object; anything else (a log line) is skipped."""
    for line in raw.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event
