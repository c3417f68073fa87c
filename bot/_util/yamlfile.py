"""Reading and writing the YAML files users review by hand.

Reading is defensive: a size cap checked before any byte is parsed, strict
UTF-8, no tabs in indentation, no anchors or aliases (they buy nothing in our
formats and make alias bombs possible), no duplicate keys. Every problem is a
``BadInput`` that names the file and the line.

Writing is atomic: a temp file in the same folder, fsynced, then linked into
place (create, never clobbers) or renamed over (replace).
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.errors import BadInput

MAX_BYTES = 1 << 20  # 1 MiB: our largest real file is a few KB

SCHEMA_URL = "https://raw.githubusercontent.com/replaybook/replaybook/main/schemas/{kind}.schema.json"
#: The schema of one version: the files this Replaybook writes are validated against its own, not main's.
SCHEMA_AT = "https://raw.githubusercontent.com/replaybook/replaybook/{ref}/schemas/{kind}.schema.json"


@functools.lru_cache(maxsize=1)
def schema_ref() -> str:
    """The installed build's tag, else its commit, else ``v<version>`` (bot/_util/build_info.py)."""
    from bot._util.build_info import VERSION, build_commit

    built = build_commit()
    return (built.tag or built.commit) if built is not None else f"v{VERSION}"


def schema_comment(kind: str) -> str:
    """The first line of every file the bot writes, so editors validate it against this version's schema."""
    return f"# yaml-language-server: $schema={SCHEMA_AT.format(ref=schema_ref(), kind=kind)}\n"


@dataclass
class Document:
    """A parsed YAML mapping plus the line of every key path (1-based)."""

    path: Path
    data: dict[str, Any]
    text: str
    lines: dict[tuple, int] = field(default_factory=dict)

    def line_of(self, loc: tuple) -> int | None:
        """The line of the deepest known prefix of ``loc``."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return None


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and duplicate keys."""

    def compose_node(self, parent, index):  # type: ignore[override]
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(event.start_mark.line + 1, "YAML aliases (*name) are not allowed; write the value out")
        if getattr(event, "anchor", None):
            raise _Refused(event.start_mark.line + 1, "YAML anchors (&name) are not allowed; write the value out")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                raise _Refused(key_node.start_mark.line + 1, "a mapping key must be a plain value")
            if key in seen:
                raise _Refused(
                    key_node.start_mark.line + 1,
                    f"duplicate key `{key}` (first on line {seen[key]}); keep one",
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


    def construct_yaml_timestamp(self, node):  # type: ignore[override]
        # A timestamp-shaped value that is no real date (2026-02-30, T25:00:00Z) would raise a bare
        # ValueError out of the loader; kept as text, the model names the field and says how to fix it.
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError:
            return self.construct_scalar(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _StrictLoader.construct_yaml_timestamp)


class _Refused(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


def read_text(path: Path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> str:
    """Read a small UTF-8 text file or raise ``BadInput``; big files are refused unread."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise BadInput(f"{path}: no such {what}") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    if path.is_dir():
        raise BadInput(f"{path}: is a folder; expected a YAML {what}")
    if size > max_bytes:
        raise BadInput(
            f"{path}: {size:,} bytes is too large (limit {max_bytes:,}); "
            f"a {what} is a few KB — move logs and evidence out of it"
        )
    raw = path.read_bytes()[: max_bytes + 1]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BadInput(
            f"{path}:{line}: byte 0x{raw[exc.start]:02x} is not UTF-8; save the file as UTF-8"
        ) from None


def parse(path: Path, text: str, *, what: str = "file") -> Document:
    """Parse ``text`` (the content of ``path``) into a mapping with key lines."""
    if not text.strip():
        raise BadInput(f"{path}: the {what} is empty; expected a YAML mapping of fields")
    for number, line in enumerate(text.splitlines(), 1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            raise BadInput(f"{path}:{number}: a tab is used for indentation; YAML needs spaces")
    try:
        loader = _StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise BadInput(f"{path}: the {what} holds no YAML value; expected a mapping of fields")
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except _Refused as exc:
        raise BadInput(f"{path}:{exc.line}: {exc.message}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}" if mark else ""
        hint = ""
        if mark and mark.line < len(text.splitlines()) and re.search(r"[\w-]\[", text.splitlines()[mark.line]):
            hint = ('; a value holding [ ] (e.g. copilot-swe-agent[bot]) must be quoted: '
                    '["copilot-swe-agent[bot]"]')
        raise BadInput(f"{path}{where}: not valid YAML: {exc.problem or exc.context}{hint}") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise BadInput(
            f"{path}: expected a YAML mapping of fields (`key: value`), got {type(data).__name__}"
        )
    lines: dict[tuple, int] = {}
    _index_lines(node, (), lines)
    return Document(path=path, data=data, text=text, lines=lines)


def load(path: Path, *, what: str = "file", max_bytes: int = MAX_BYTES) -> Document:
    return parse(path, read_text(path, max_bytes=max_bytes, what=what), what=what)


def _index_lines(node: yaml.Node, prefix: tuple, out: dict[tuple, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            loc = prefix + (key_node.value,)
            out[loc] = key_node.start_mark.line + 1
            _index_lines(value_node, loc, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            loc = prefix + (i,)
            out[loc] = item.start_mark.line + 1
            _index_lines(item, loc, out)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (evidence, log excerpts) as literal blocks people can read in a diff; a value that
    appears twice is written out twice, never as an anchor and alias, which the loader refuses."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value.strip("\n") and all(line == line.rstrip() for line in value.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump(data: dict[str, Any], *, kind: str) -> str:
    """YAML text for a record the bot writes, headed by the schema comment."""
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=88, default_flow_style=None)
    return schema_comment(kind) + body


def set_top_level(text: str, key: str, value: str) -> str:
    """Set a top-level scalar ``key: value`` in YAML text, keeping every other byte.

    Editing the line instead of re-dumping keeps the comments and layout of a
    file a person wrote.
    """
    pattern = re.compile(rf"^{re.escape(key)}:[^\n]*$", re.MULTILINE)
    line = f"{key}: {value}"
    if pattern.search(text):
        return pattern.sub(lambda _: line, text, count=1)
    return text + ("" if text.endswith("\n") or not text else "\n") + line + "\n"


def write_new(path: Path, text: str | bytes) -> None:
    """Create ``path`` atomically; raise ``FileExistsError`` if it exists."""
    tmp = _write_temp(path, text)
    try:
        os.link(tmp, path)  # atomic, and fails if path exists: never clobbers
    finally:
        os.unlink(tmp)


def replace(path: Path, text: str | bytes) -> None:
    """Replace ``path`` atomically: readers see the old or the new file, never half."""
    tmp = _write_temp(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _write_temp(path: Path, text: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp
