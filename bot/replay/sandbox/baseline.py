"""The baseline commit, built once per fixture content and shared by every sandbox of it.

A trial's diff is taken against a baseline commit of the fixture. Building
it costs three git processes (``init``, ``add``, ``commit``) and a loose
object per file; every trial of a fixture builds the same commit (fixed
identity and dates), so it is built once into the cache, keyed by the
fixture's content, and each sandbox gets a small git folder of its own that
borrows the template's objects through ``objects/info/alternates``. The
template is written once (to a temp folder, then renamed) and never
changed: sandboxes bind it read-only, and their own new objects go to their
own folder. A fixture whose scenario runs ``setup`` commands is not cached
(setup may make history or depend on the clock).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from bot.errors import InfrastructureError
from bot.replay.sandbox.host_tools import GIT_HARDENED
from bot.replay.trace.shims import touch

_VERSION = "rb-baseline-1"  # bump when the layout changes: part of the key
_KEEP = 32
_INDEX = "replaybook.index"
_SHA = "replaybook.sha"


@dataclass(frozen=True)
class Template:
    gitdir: Path  # a bare repository holding the baseline commit
    sha: str

    @property
    def objects(self) -> Path:
        return self.gitdir / "objects"

    @property
    def index(self) -> Path:
        return self.gitdir / _INDEX


def fixture_key(fixture: Path) -> str:
    """A hash of every path, mode bit, link and byte of the fixture (its own top-level .git left out)."""
    stamps = []
    for dirpath, dirnames, filenames in os.walk(fixture):
        if dirpath == str(fixture) and ".git" in dirnames:
            dirnames.remove(".git")
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            stamps.append((os.path.relpath(full, fixture), st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino))
    return _content_key(str(fixture), tuple(stamps))


@functools.lru_cache(maxsize=256)
def _content_key(fixture: str, stamps: tuple) -> str:
    digest = hashlib.sha256(_VERSION.encode())
    for rel, mode, _size, _mtime, _ino in stamps:
        full = os.path.join(fixture, rel)
        if os.path.islink(full):
            digest.update(f"L\0{rel}\0{os.readlink(full)}\0".encode("utf-8", "surrogateescape"))
        else:
            digest.update(f"F\0{rel}\0{mode & 0o111 != 0}\0".encode("utf-8", "surrogateescape"))
            with open(full, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:32]


def template(fixture: Path, cache_dir: Path, *, git: str, env: Mapping[str, str],
             copy: Callable[[Path, Path], None]) -> Template:
    """The baseline of ``fixture`` from the cache, built now if missing (``env``: git's identity and config)."""
    root = cache_dir / "baselines"
    final = root / f"{fixture_key(fixture)}.git"
    try:
        sha = _read(final / _SHA)
    except FileNotFoundError:
        _build(final, fixture, git=git, env=env, copy=copy)
        _prune(root, keep=final)
        sha = _read(final / _SHA)
    touch(final)
    return Template(final, sha.decode().strip())


def _build(final: Path, fixture: Path, *, git: str, env: Mapping[str, str], copy) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    try:
        work, gitdir = tmp / "work", tmp / "git"
        copy(fixture, work)
        base = {k: v for k, v in env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
        run = functools.partial(_git, git)
        run(["init", "-q", "--bare", "--template=", "--initial-branch=main", str(gitdir)], base, tmp)
        env = {**base, "GIT_DIR": str(gitdir), "GIT_WORK_TREE": str(work), "GIT_INDEX_FILE": str(gitdir / _INDEX)}
        # -f: a file the fixture's .gitignore hides is still part of the fixture.
        run(["add", "-A", "-f", "--", "."], env, work)
        run(["commit", "-q", "--no-verify", "--no-gpg-sign", "--allow-empty", "-m", "replaybook baseline"], env, work)
        sha = (gitdir / "refs" / "heads" / "main").read_text().strip()
        (gitdir / _SHA).write_text(sha + "\n")
        try:
            os.rename(gitdir, final)  # atomic: readers see a whole template or none
        except OSError:
            if not (final / _SHA).exists():
                raise
            # Another trial built the same key first; theirs is identical.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _git(git: str, args: list[str], env: Mapping[str, str], cwd: Path) -> None:
    done = subprocess.run([git, *GIT_HARDENED, *args], env=dict(env), cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        raise InfrastructureError(f"git {' '.join(args[:2])} failed building the baseline: "
                           f"{done.stderr.decode(errors='replace').strip()}")


def borrow(tpl: Template, gitdir: Path, index: Path) -> None:
    """Make ``gitdir`` a bare repository at the baseline commit whose objects are the template's.

    Made with bare system calls (a handful of small files a trial: pathlib's and shutil's layers cost more
    than the files)."""
    for folder in ("", "objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"):
        os.mkdir(os.path.join(gitdir, folder), 0o777)
    _write(gitdir / "objects" / "info" / "alternates", f"{tpl.objects}\n".encode())
    for name in ("HEAD", "config"):
        _write(gitdir / name, _read(tpl.gitdir / name))
    _write(gitdir / "refs" / "heads" / "main", f"{tpl.sha}\n".encode())
    _write(index, _read(tpl.index))


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _prune(root: Path, *, keep: Path) -> None:
    """Drop the least recently used templates beyond a few (never one touched in the last hour)."""
    try:
        entries = [p for p in root.iterdir() if p.suffix == ".git" and p != keep]
    except OSError:
        return
    entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[_KEEP - 1:]:
        if time.time() - old.stat().st_mtime > 3600:
            shutil.rmtree(old, ignore_errors=True)
