"""Scenario toolchains: the Python environment a scenario declares, built once.

A scenario that declares ``requirements`` (in ``scenario.yaml``, or a
``requirements_file`` in its fixture) gets a virtual environment holding
exactly those packages, put first on the PATH of the agent and of the checks,
so ``python -m pytest`` means the same thing on every host. The environment
is built once into a cache keyed by its content (the requirements, the
interpreter and this module's version), as pre-commit and nox key theirs.

It is built with ``uv`` (a dependency: a cold venv with pytest takes about
a third of venv+pip's time, and a warm one comes from uv's cache), and with
``venv`` + ``pip`` when uv cannot run.

A scenario that declares nothing gets the host's PATH, and its replay carries
a warning that the verdict depends on the host.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from bot import settings
from bot.errors import BadInput, InfrastructureError
from bot.scenario.spec import REQUIREMENT

_VERSION = "rb-env-1"  # bump when the layout of an environment changes: part of the key
_DONE = ".replaybook-env"
_MAX_REQUIREMENTS_BYTES = 64 << 10
_USERINFO = re.compile(r"://[^/@\s]+@")  # an index URL's user:token, as uv may quote it
_INSTALLER_ENV = ("PATH", "HOME", "XDG_CACHE_HOME", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
                  "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "LANG")
HOST_WARNING = ("declares no `requirements`, so its commands and checks use whatever the host's PATH holds "
                "and its verdict depends on the host; declare them (e.g. `requirements: [pytest==8.3.4]`)")


@dataclass(frozen=True)
class Toolchain:
    """What a sandbox needs to use the environment: its bin folder and the folders it reads."""

    bin_dir: str | None = None
    reads: tuple[str, ...] = ()  # host folders the environment needs, for read-only binds
    key: str = "host"

    @property
    def hermetic(self) -> bool:
        return self.bin_dir is not None


HOST = Toolchain()


def base_interpreter() -> str:
    """The real interpreter behind this one (never a venv's or a pyenv shim's)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def key_of(requirements: Sequence[str], interpreter: str) -> str:
    blob = json.dumps([_VERSION, interpreter, sys.version_info[:3], sorted(r.strip() for r in requirements)])
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def prepare(requirements: Sequence[str], *, cache_dir: Path, where: str = "scenario") -> Toolchain:
    """The environment for ``requirements``, from the cache or built now (under a lock)."""
    reqs = [r.strip() for r in requirements if r.strip()]
    if not reqs:
        return HOST
    interpreter = base_interpreter()
    key = key_of(reqs, interpreter)
    env_dir = cache_dir / "envs" / key
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(env_dir.parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two replays of one scenario build it once
        if not (env_dir / _DONE).exists():
            _build(env_dir, reqs, interpreter, where)
    try:
        os.utime(env_dir)
    except OSError:
        pass
    prefix = os.path.realpath(sys.base_prefix)
    return Toolchain(bin_dir=str(env_dir / "bin"), reads=(str(env_dir), prefix), key=key)


def _build(env_dir: Path, reqs: list[str], interpreter: str, where: str) -> None:
    shutil.rmtree(env_dir, ignore_errors=True)  # a build that died half-way
    reqs_file = env_dir.parent / f".{env_dir.name}.txt"
    reqs_file.write_text("\n".join(reqs) + "\n", encoding="utf-8")
    # Built on the host, so it must run no code of the scenario's: wheels only (an sdist
    # runs its setup.py), names and versions only (no URLs or paths), and no secret
    # in the installer's environment.
    env = {k: v for k, v in settings.environ().items() if k in _INSTALLER_ENV or k.startswith(("UV_", "PIP_"))}
    uv = _uv()
    try:
        steps = build_steps(uv, _uv_version(uv, env) if uv else None, env_dir, interpreter, reqs_file)
        for argv in steps:
            # In the harness's own folder, Python isolated (-I): no uv.toml, pip.conf or module of whatever
            # folder the gate was started in (a checkout under test) is read or imported.
            done = subprocess.run(argv, env=env, cwd=env_dir.parent, capture_output=True, text=True, timeout=900)
            if done.returncode != 0 and uv and argv[1:3] == ["pip", "install"]:
                # No index (no network, or it is down): what uv's cache holds is the same wheels.
                offline = subprocess.run([*argv, "--offline"], env=env, cwd=env_dir.parent, capture_output=True,
                                         text=True, timeout=900)
                done = offline if offline.returncode == 0 else done
            if done.returncode != 0:
                raise InfrastructureError(
                    f"{where}: could not build its environment ({' '.join(reqs)}): "
                    f"{_USERINFO.sub('://***@', (done.stderr or done.stdout).strip()[-400:])}; check the "
                    "`requirements` (pip requirement syntax) and that the package index is reachable")
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(env_dir, ignore_errors=True)
        raise InfrastructureError(f"{where}: could not build its environment: {type(exc).__name__}") from None
    except InfrastructureError:
        shutil.rmtree(env_dir, ignore_errors=True)
        raise
    finally:
        reqs_file.unlink(missing_ok=True)
    (env_dir / _DONE).write_text(json.dumps({"requirements": reqs, "interpreter": interpreter}) + "\n")


def build_steps(uv: str | None, uv_version: tuple[int, ...] | None, env_dir: Path, interpreter: str,
                reqs_file: Path) -> list[list[str]]:
    """The command lines that build the environment: uv's when there is one, else venv + pip.

    uv is told to trust the system certificate store (``--system-certs``; its
    name before uv 0.11 was ``--native-tls``), as pip does, so that a build
    behind a TLS-inspecting proxy whose CA is installed on the machine works
    where pip works; uv's default is its own bundled roots.
    """
    if uv is None:
        return [[interpreter, "-I", "-m", "venv", str(env_dir)],
                [str(env_dir / "bin" / "python"), "-I", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 "--only-binary=:all:", "-r", str(reqs_file)]]
    trust = "--system-certs" if uv_version is None or uv_version >= (0, 11) else "--native-tls"
    return [[uv, "venv", trust, "-q", "--python", interpreter, str(env_dir)],
            [uv, "pip", "install", trust, "-q", "--only-binary", ":all:", "--python", str(env_dir / "bin" / "python"),
             "-r", str(reqs_file)]]


def _uv_version(uv: str, env: dict[str, str]) -> tuple[int, ...] | None:
    """``uv --version`` as numbers (``uv 0.13.9 (…)``); None when it does not say."""
    try:
        out = subprocess.run([uv, "--version"], env=env, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\buv (\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(n) for n in match.groups(default="0")) if match else None


def _uv() -> str | None:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def read_requirements_file(path: Path, where: str) -> list[str]:
    """The lines of a requirements file that name a package (no options, no includes).

    Errors name the file and the line, never its text: the file is the
    scenario's, and the message may reach a PR comment.
    """
    name = f"requirements_file {path.name}"
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{where}: {name} is not a regular file; name a file inside the fixture")
        if st.st_size > _MAX_REQUIREMENTS_BYTES:
            raise BadInput(f"{where}: {name} is over {_MAX_REQUIREMENTS_BYTES >> 10} KiB; list only package requirements")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{where}: {name} does not exist in the fixture; add it, or list `requirements`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{where}: cannot read {name} ({type(exc).__name__}); make it a UTF-8 text file") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if not re.match(REQUIREMENT, line):
            raise BadInput(f"{path.name}:{n}: line {n} of the scenario's requirements_file is not a package "
                           "requirement; write a name and versions (e.g. pytest==8.3.4): options, includes, URLs "
                           "and paths are not allowed")
        out.append(line)
    return out
