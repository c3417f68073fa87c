"""A JSON schema a grammar can enforce: the subset the local model's engine compiles to a grammar.

The local model (``bot.model.local``) can be made to answer only JSON of a given schema: node-llama-cpp
compiles the schema to a GBNF grammar and the sampler never picks a token the grammar refuses. That turns
"the answer holds no JSON object" and "cites an incident it was not given" from a small model's usual
failures into impossibilities. The engine reads a subset of JSON Schema (``type``, ``properties``,
``required``, ``additionalProperties``, ``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``,
``enum``, ``const``, ``oneOf``); ``for_grammar`` turns what pydantic writes into that subset:

- ``$ref`` is inlined from ``$defs`` (pydantic's models here are not recursive; a cycle is refused);
- ``anyOf`` becomes ``oneOf``;
- the grammar writes every property it lists (node-llama-cpp has no optional key), so a field that may be
  ``null`` is written, as its value or ``null``, and a field that is neither required nor nullable (it has a
  default) is left out, its default applying;
- annotations the grammar cannot use (``title``, ``default``, ``description``, ``minimum``, ``pattern``…)
  are dropped: the answer is validated against the full pydantic model afterwards, so a grammar only
  narrows what the model may say, it never widens what we accept;
- a value of any shape (``Any``, an empty schema) cannot be a grammar: ``Unsupported``.

Hosted models are not sent a grammar (``bot.model.llm``): they answer JSON well enough, and the Messages
API's own ``output_config.format`` has rules of its own.
"""

from __future__ import annotations

from typing import Any

KEEP = ("type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
        "maxLength", "enum", "const", "oneOf", "minProperties", "maxProperties")
TYPES = ("string", "number", "integer", "boolean", "null", "object", "array")
MAX_BYTES = 64 * 1024  # the local server refuses a larger schema (a grammar's size grows with it)


class Unsupported(ValueError):
    """The schema holds something a grammar cannot express (named in the message)."""


def for_grammar(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (as pydantic writes it) in the subset the local engine compiles; ``Unsupported`` otherwise."""
    return _convert(schema, schema.get("$defs", {}), (), "$")


def _convert(node: Any, defs: dict[str, Any], seen: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise Unsupported(f"{where}: a schema must be an object")
    if "$ref" in node:
        name = str(node["$ref"]).removeprefix("#/$defs/")
        if name in seen:
            raise Unsupported(f"{where}: {name} refers to itself; a grammar here is not recursive")
        if name not in defs:
            raise Unsupported(f"{where}: $ref {node['$ref']!r} is not in $defs")
        return _convert(defs[name], defs, (*seen, name), f"{where}->{name}")
    options = node.get("anyOf", node.get("oneOf"))
    if options is not None:
        if len(options) == 1:
            return _convert(options[0], defs, seen, where)
        return {"oneOf": [_convert(o, defs, seen, f"{where}|{i}") for i, o in enumerate(options)]}
    out: dict[str, Any] = {}
    for key in KEEP:
        if key not in node or key == "required":
            continue  # required: set with the properties
        value = node[key]
        if key == "properties":
            required = set(node.get("required", ()))
            props, must = {}, []
            for name, sub in value.items():
                if name in required or _nullable(sub):
                    props[name] = _convert(sub, defs, seen, f"{where}.{name}")
                    must.append(name)
            out[key], out["required"] = props, must
        elif key == "items":
            out[key] = _convert(value, defs, seen, f"{where}[]")
        elif key == "additionalProperties" and isinstance(value, dict):
            out[key] = _convert(value, defs, seen, f"{where}.*")
        elif key == "oneOf":
            continue  # handled above
        else:
            out[key] = value
    if not any(k in out for k in ("type", "enum", "const", "oneOf")):
        raise Unsupported(f"{where}: a value of any shape; a grammar needs its type")
    types = out.get("type")
    if types is not None and not all(t in TYPES for t in (types if isinstance(types, list) else [types])):
        raise Unsupported(f"{where}: type {types!r}")
    if out.get("type") == "array" and "items" not in out:
        raise Unsupported(f"{where}: an array of any values; a grammar needs its items' type")
    if out.get("type") == "object" and "properties" not in out and not isinstance(out.get("additionalProperties"), dict):
        raise Unsupported(f"{where}: an object of any keys; a grammar needs its properties")
    return out


def _nullable(node: Any) -> bool:
    options = node.get("anyOf", node.get("oneOf")) if isinstance(node, dict) else None
    return isinstance(options, list) and {"type": "null"} in options
