"""The shared base of our file records, and loading them with clear errors.

A record is a pydantic model of one YAML file. Loading turns pydantic's
errors into one line per problem that names the file, the line, the field
and what was expected. Unknown keys are kept (so rewriting a file never loses
them) and reported as warnings.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from bot._util import yamlfile
from bot._util.text_safety import shown
from bot.errors import BadInput

SLUG = r"^[a-z0-9][a-z0-9._-]{0,79}$"


class Record(BaseModel):
    """Base of Incident, Rule and Scenario: extra keys are kept, not dropped."""

    model_config = ConfigDict(extra="allow", str_strip_whitespace=True)

    #: "incident", "rule" or "scenario": names the schema and messages.
    kind: ClassVar[str] = ""

    def unknown_keys(self) -> list[str]:
        return sorted((self.model_extra or {}).keys())

    def to_yaml_data(self) -> dict[str, Any]:
        """The mapping to write back: declared fields in order, then extras."""
        return self.model_dump(mode="json", exclude_none=True)


R = TypeVar("R", bound=Record)
M = TypeVar("M", bound=BaseModel)


def describe_errors(exc: ValidationError, doc: yamlfile.Document, model: type[BaseModel] | None = None) -> list[str]:
    """One line per pydantic error: `file:line: field `x`: message`."""
    out = []
    for err in exc.errors(include_url=False):
        # Tagged unions repeat the tag in the location: (pass_if, 0, ran, ran, cwd).
        loc = tuple(p for i, p in enumerate(err["loc"]) if i == 0 or p != err["loc"][i - 1])
        field = ".".join(str(p) for p in loc) or "(top level)"
        line = doc.line_of(loc)
        where = f"{doc.path}:{line}" if line else str(doc.path)
        message = error_message(err)
        if err["type"] == "extra_forbidden":
            message = _unknown_key(model, loc)
        out.append(f"{where}: field `{field}`: {message}")
    return out


_DATE_KINDS = frozenset({"date_parsing", "date_from_datetime_parsing", "date_from_datetime_inexact", "date_type",
                         "datetime_parsing", "datetime_from_date_parsing", "datetime_type", "time_parsing"})


def error_message(err: dict) -> str:
    kind = err["type"]
    msg = err["msg"]
    if kind == "missing":
        return "is required but missing"
    if (known := err.get("ctx", {}).get("known")) and isinstance(err.get("input"), dict):
        return _unknown_tag(err["input"], known.split(", "), msg)
    if kind == "extra_forbidden":
        return "is not a known field; remove it or check its spelling"
    if kind in ("literal_error", "enum"):
        expected = err.get("ctx", {}).get("expected", "")
        return f"got {shown(err['input'])}; expected one of {expected}"
    if kind in _DATE_KINDS:
        return (f"{shown(err.get('input'))} is not a real date or time ({msg}); write one such as "
                "2026-07-14 or 2026-07-14T09:32:00Z")
    msg = re.sub(r"^(Value error|Assertion failed), ", "", msg)
    if "input" in err and kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{msg} (got {shown(err['input'])})"
    return msg


def _known_keys(model: type[BaseModel] | None, loc: tuple) -> list[str]:
    """The field names allowed where ``loc`` points: the fields of the (nested) model the key sits in,
    or, when the path passes through a union, of every model the union may hold."""
    models = [model] if model else []
    for part in loc[:-1]:
        nxt: list[type[BaseModel]] = []
        for m in models:
            if isinstance(part, str) and part in m.model_fields:
                nxt += _models_in(m.model_fields[part].annotation)
            elif isinstance(part, str):  # a union's tag in the location names the member model
                nxt += [m2 for m2 in _models_in(m) if part in m2.model_fields] or [m]
            else:
                nxt.append(m)
        models = nxt
    return sorted({name for m in models for name in m.model_fields})


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in get_args(tp) for m in _models_in(arg)]


def _unknown_key(model: type[BaseModel] | None, loc: tuple) -> str:
    key = str(loc[-1]) if loc else "?"
    known = _known_keys(model, loc)
    near = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean `{near[0]}`?" if near else (f"; known here: {', '.join(known)}" if known else "")
    return f"is not a known field; remove it or check its spelling{hint}"


def _unknown_tag(value: dict, known: list[str], msg: str) -> str:
    """A tagged mapping (a scenario check) whose key is not a known tag: name the key and the nearest tag."""
    keys = [str(k) for k in value]
    if len(keys) != 1:
        return f"has keys {', '.join(f'`{k}`' for k in keys) or '(none)'}; {msg}"
    near = difflib.get_close_matches(keys[0], known, n=1)
    hint = f" (did you mean `{near[0]}`?)" if near else ""
    return f"`{keys[0]}` is not a known key{hint}; {msg}"


def from_document(model: type[M], doc: yamlfile.Document, *, what: str) -> M:
    try:
        record = model.model_validate(doc.data)
    except ValidationError as exc:
        problems = describe_errors(exc, doc, model)
        raise BadInput(f"{doc.path}: invalid {what} ({len(problems)} problem(s))", problems=problems) from None
    return record


def load(model: type[R], path: Path, *, what: str) -> R:
    return from_document(model, yamlfile.load(Path(path), what=what), what=what)


def warnings_for(record: Record, path: Path) -> list[str]:
    return [
        f"{path}: unknown field `{key}` kept as is; check its spelling if it was meant to be a known one"
        for key in record.unknown_keys()
    ]
