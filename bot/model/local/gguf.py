"""The GGUF header, read in Python before the engine ever sees the file: magic, version and metadata.

A GGUF is untrusted input to a C++ parser, so the installer reads the part it checks here, bounded (counts and
lengths are capped, the tensor data is never read), and refuses a file whose metadata is not the pinned model's.
Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (little endian: magic ``GGUF``, uint32 version,
uint64 tensor count, uint64 key/value count, then the key/value pairs).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_KEYS = 4096
_MAX_STRING = 16 << 20  # a chat template is a few KB; a token a few bytes
_MAX_ITEMS = 1 << 22  # Qwen2.5's vocabulary is 151,936 tokens
_KEEP_ITEMS = 8  # arrays (the vocabulary) are skipped past, keeping only their first items and length


class GGUFError(ValueError):
    """The file is not a GGUF this reader accepts; the message says what is wrong."""


@dataclass(frozen=True)
class Header:
    version: int
    tensor_count: int
    metadata: dict[str, Any] = field(default_factory=dict)  # arrays: {"length": n, "head": [...]}

    @property
    def name(self) -> str | None:
        value = self.metadata.get("general.name")
        return value if isinstance(value, str) else None

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) else None


def read_header(stream: BinaryIO) -> Header:
    """The header of the GGUF ``stream`` (positioned at its start); :class:`GGUFError` when it is not one."""
    reader = _Reader(stream)
    if reader.take(4) != b"GGUF":
        raise GGUFError("it does not start with the GGUF magic bytes")
    version = reader.scalar("<I")
    if version not in (2, 3):
        raise GGUFError(f"GGUF version {version} (this reader knows 2 and 3)")
    tensors, keys = reader.scalar("<Q"), reader.scalar("<Q")
    if keys > _MAX_KEYS:
        raise GGUFError(f"{keys} metadata keys (at most {_MAX_KEYS})")
    metadata: dict[str, Any] = {}
    for _ in range(keys):
        key = reader.string()
        metadata[key] = reader.value(reader.scalar("<I"))
    return Header(version=version, tensor_count=tensors, metadata=metadata)


def read_file(path: str) -> Header:
    with open(path, "rb") as stream:
        return read_header(stream)


class _Reader:
    def __init__(self, stream: BinaryIO):
        self.stream = stream

    def take(self, n: int) -> bytes:
        data = self.stream.read(n)
        if len(data) != n:
            raise GGUFError("the header ends before its metadata does (the file is truncated)")
        return data

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        length = self.scalar("<Q")
        if length > _MAX_STRING:
            raise GGUFError(f"a metadata string of {length} bytes (at most {_MAX_STRING})")
        return self.take(length).decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.scalar("<I"), self.scalar("<Q")
            if count > _MAX_ITEMS:
                raise GGUFError(f"a metadata array of {count} items (at most {_MAX_ITEMS})")
            if item_kind == _ARRAY:
                raise GGUFError("a metadata array of arrays (not used by any model this reader accepts)")
            head = []
            for i in range(count):
                item = self.value(item_kind)
                if i < _KEEP_ITEMS:
                    head.append(item)
            return {"length": count, "head": head}
        raise GGUFError(f"unknown metadata value type {kind}")
