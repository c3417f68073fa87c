"""GitHub Actions expressions: parsing and evaluating ``${{ }}`` and ``if:`` conditions."""

from __future__ import annotations

import glob as globmod
import hashlib
import json
import math
import os
import re
from pathlib import Path

# ------------------------------------------------------------- expressions


class ExpressionError(ValueError):
    pass


class _Strict(dict):
    """A context whose unknown keys are typos, not nulls."""

    label = "context"

    def __init__(self, label: str, *args, **kw):
        super().__init__(*args, **kw)
        self.label = label


class _Filtered(list):
    """The result of an object filter (``a.*.b``)."""


_TOKEN = re.compile(r"""\s*(?:
    (?P<num>0x[0-9a-fA-F]+|-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<str>'(?:[^']|'')*')
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,*])
  | (?P<id>[A-Za-z_][A-Za-z0-9_-]*)
)""", re.X)
_FUNCS = {"contains": (2, 2), "startswith": (2, 2), "endswith": (2, 2), "format": (1, 99), "join": (1, 2),
          "tojson": (1, 1), "fromjson": (1, 1), "hashfiles": (1, 99),
          "success": (0, 0), "failure": (0, 0), "always": (0, 0), "cancelled": (0, 0)}
_STATUS = {"success", "failure", "always", "cancelled"}
CONTEXTS = {"github", "env", "vars", "secrets", "inputs", "matrix", "needs", "steps", "job", "runner", "strategy"}


def parse_expression(text: str):
    """Parse one expression (without ``${{ }}``) into a tuple tree."""
    toks, pos = [], 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExpressionError(f"unexpected {text[pos:].strip()[:20]!r} in expression {text!r}")
        kind = m.lastgroup
        toks.append((kind, m.group(kind)))
        pos = m.end()
    toks.append(("end", ""))
    i = 0

    def take(op):
        nonlocal i
        if toks[i] != ("op", op):
            raise ExpressionError(f"expected {op!r} at {toks[i][1] or 'end'!r} in {text!r}")
        i += 1

    def binary(sub, ops, tag):
        def parse():
            nonlocal i
            left = sub()
            while toks[i][0] == "op" and toks[i][1] in ops:
                op = toks[i][1]
                i += 1
                left = (tag, op, left, sub()) if tag == "cmp" else (tag, left, sub())
            return left
        return parse

    def unary():
        nonlocal i
        if toks[i] == ("op", "!"):
            i += 1
            return ("not", unary())
        return postfix(primary())

    def primary():
        nonlocal i
        kind, val = toks[i]
        i += 1
        if kind == "num":
            return ("lit", int(val, 16) if val.startswith("0x") else int(val) if re.fullmatch(r"-?\d+", val) else float(val))
        if kind == "str":
            return ("lit", val[1:-1].replace("''", "'"))
        if (kind, val) == ("op", "("):
            node = orexpr()
            take(")")
            return node
        if kind == "id":
            if val in ("true", "false", "null"):
                return ("lit", {"true": True, "false": False, "null": None}[val])
            if toks[i] == ("op", "("):
                i += 1
                fname, args = val.lower(), []
                if fname not in _FUNCS:
                    raise ExpressionError(f"unknown function {val}() in {text!r}")
                while toks[i] != ("op", ")"):
                    args.append(orexpr())
                    if toks[i] != ("op", ")"):
                        take(",")
                take(")")
                lo, hi = _FUNCS[fname]
                if not lo <= len(args) <= hi:
                    raise ExpressionError(f"{val}() takes {lo}..{hi} arguments, got {len(args)} in {text!r}")
                return ("call", fname, args)
            if val.lower() not in CONTEXTS:
                raise ExpressionError(f"unknown context {val!r} in {text!r}")
            return ("ctx", val.lower())
        raise ExpressionError(f"unexpected {val or 'end'!r} in {text!r}")

    def postfix(node):
        nonlocal i
        while True:
            if toks[i] == ("op", "."):
                i += 1
                kind, val = toks[i]
                i += 1
                if (kind, val) == ("op", "*"):
                    node = ("star", node)
                elif kind == "id":
                    node = ("prop", node, ("lit", val))
                else:
                    raise ExpressionError(f"expected a property name after '.' in {text!r}")
            elif toks[i] == ("op", "["):
                i += 1
                if toks[i] == ("op", "*"):
                    i += 1
                    node = ("star", node)
                else:
                    node = ("prop", node, orexpr())
                take("]")
            else:
                return node

    cmp = binary(unary, ("<", ">", "<=", ">="), "cmp")
    eq = binary(cmp, ("==", "!="), "cmp")
    andexpr = binary(eq, ("&&",), "and")
    orexpr = binary(andexpr, ("||",), "or")
    tree = orexpr()
    if toks[i][0] != "end":
        raise ExpressionError(f"unexpected {toks[i][1]!r} in {text!r}")
    return tree


def _uses_status(node) -> bool:
    if isinstance(node, list):
        return any(_uses_status(x) for x in node)
    if not isinstance(node, tuple):
        return False
    return (node[0] == "call" and node[1] in _STATUS) or any(_uses_status(x) for x in node[1:])


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num"
    return "str" if isinstance(v, str) else "obj"


def _number(v) -> float:
    k = _kind(v)
    if k in ("null", "bool", "num"):
        return float(v or 0)
    if k == "str":
        s = v.strip()
        if not s:
            return 0.0
        try:
            return float(int(s, 16)) if s.lower().startswith("0x") else float(s)
        except ValueError:
            return math.nan
    return math.nan


def _truthy(v) -> bool:
    if isinstance(v, float) and math.isnan(v):
        return False
    return v not in (None, False, 0, "") or isinstance(v, (list, dict))


def _eq(a, b) -> bool:
    ka, kb = _kind(a), _kind(b)
    if ka == kb == "str":
        return a.casefold() == b.casefold()
    if ka == kb == "obj":
        return a is b
    if ka == kb:
        return a == b
    return _number(a) == _number(b)


def _compare(op, a, b) -> bool:
    if op == "==":
        return _eq(a, b)
    if op == "!=":
        return not _eq(a, b)
    if _kind(a) == _kind(b) == "str":
        a, b = a.casefold(), b.casefold()
    else:
        a, b = _number(a), _number(b)
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


def to_string(v) -> str:
    k = _kind(v)
    if k == "null":
        return ""
    if k == "bool":
        return "true" if v else "false"
    if k == "num":
        return str(int(v)) if float(v).is_integer() else repr(v)
    return v if k == "str" else json.dumps(v, indent=2, ensure_ascii=False)


def _prop(obj, key):
    if isinstance(obj, list) and _kind(key) == "num":
        n = int(key)
        return obj[n] if 0 <= n < len(obj) else None
    if isinstance(obj, _Filtered):
        return _Filtered(v for v in (_prop(x, key) for x in obj) if v is not None)
    if isinstance(obj, dict) and isinstance(key, str):
        if key in obj:
            return obj[key]
        for k, v in obj.items():
            if isinstance(k, str) and k.lower() == key.lower():
                return v
        if isinstance(obj, _Strict):
            raise ExpressionError(f"{obj.label} has no {key!r} (known: {sorted(obj)})")
    return None


class Evaluator:
    """Evaluates parsed expressions against contexts. ``status`` maps success/failure/... to bools."""

    def __init__(self, contexts: dict, status: dict | None = None, workspace: Path | None = None, where: str = ""):
        self.contexts, self.status, self.workspace, self.where = contexts, status, workspace, where

    def eval(self, node):
        tag = node[0]
        if tag == "lit":
            return node[1]
        if tag == "ctx":
            if node[1] not in self.contexts:
                raise ExpressionError(f"context {node[1]!r} is not available {self.where}".rstrip())
            return self.contexts[node[1]]
        if tag == "prop":
            return _prop(self.eval(node[1]), self.eval(node[2]))
        if tag == "star":
            obj = self.eval(node[1])
            items = obj if isinstance(obj, _Filtered) else [obj]
            out = _Filtered()
            for x in items:
                out.extend(x if isinstance(x, list) else x.values() if isinstance(x, dict) else [])
            return out
        if tag == "not":
            return not _truthy(self.eval(node[1]))
        if tag == "and":
            left = self.eval(node[1])
            return self.eval(node[2]) if _truthy(left) else left
        if tag == "or":
            left = self.eval(node[1])
            return left if _truthy(left) else self.eval(node[2])
        if tag == "cmp":
            return _compare(node[1], self.eval(node[2]), self.eval(node[3]))
        return self.call(node[1], [self.eval(a) for a in node[2]])

    def call(self, name, args):
        if name in _STATUS:
            if self.status is None:
                raise ExpressionError(f"{name}() is only allowed in if: conditions")
            return self.status[name]
        if name == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(_eq(x, needle) for x in hay)
            return to_string(needle).casefold() in to_string(hay).casefold()
        if name in ("startswith", "endswith"):
            s, part = to_string(args[0]).casefold(), to_string(args[1]).casefold()
            return s.startswith(part) if name == "startswith" else s.endswith(part)
        if name == "format":
            def sub(m):
                if m.group(1) is None:
                    return m.group(0)[0]
                n = int(m.group(1))
                if n + 1 >= len(args):
                    raise ExpressionError(f"format() has no argument {{{n}}}")
                return to_string(args[n + 1])
            return re.sub(r"\{\{|\}\}|\{(\d+)\}", sub, to_string(args[0]))
        if name == "join":
            if not isinstance(args[0], list):
                return to_string(args[0])
            return (to_string(args[1]) if len(args) > 1 else ",").join(to_string(x) for x in args[0])
        if name == "tojson":
            return json.dumps(args[0], indent=2, ensure_ascii=False)
        if name == "fromjson":
            try:
                return json.loads(to_string(args[0]))
            except json.JSONDecodeError as e:
                raise ExpressionError(f"fromJSON: not JSON: {to_string(args[0])[:80]!r} ({e})") from None
        return self._hash_files([to_string(a) for a in args])

    def _hash_files(self, patterns):
        if self.workspace is None:
            raise ExpressionError("hashFiles() needs a workspace")
        files = sorted({p for pat in patterns for p in globmod.glob(str(self.workspace / pat), recursive=True)
                        if os.path.isfile(p)})
        if not files:
            return ""
        outer = hashlib.sha256()
        for f in files:
            outer.update(hashlib.sha256(Path(f).read_bytes()).digest())
        return outer.hexdigest()

    def template(self, value):
        """Interpolate ``${{ }}`` in strings (recursively in lists/dicts). A lone expression keeps its type."""
        if isinstance(value, dict):
            return {k: self.template(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.template(v) for v in value]
        if not isinstance(value, str) or "${{" not in value:
            return value
        parts = split_template(value)
        if len(parts) == 3 and parts[0].strip() == parts[2].strip() == "":
            return self.eval(parts[1])
        return "".join(p if isinstance(p, str) else to_string(self.eval(p)) for p in parts)

    def condition(self, cond) -> bool:
        return _truthy(self.eval(parse_condition(cond)))


def parse_condition(cond):
    """An ``if:``: bare or wrapped in ``${{ }}``; without a status function it means ``success() && (...)``."""
    if cond is None or cond == "":
        return ("call", "success", [])
    if isinstance(cond, bool):
        node = ("lit", cond)
    else:
        text = str(cond).strip()
        if "${{" in text:
            parts = split_template(text)
            if len(parts) != 3 or parts[0] or parts[2]:
                raise ExpressionError(f"if: {text!r} mixes text and ${{{{ }}}}: on GitHub it is always true")
            node = parts[1]
        else:
            node = parse_expression(text)
    return node if _uses_status(node) else ("and", ("call", "success", []), node)


def split_template(text: str) -> list:
    """``a ${{ x }} b`` -> ['a ', <tree of x>, ' b']: strings at even positions."""
    parts, i = [], 0
    while (j := text.find("${{", i)) != -1:
        parts.append(text[i:j])
        k, quoted = j + 3, False
        while k < len(text) and (quoted or not text.startswith("}}", k)):
            quoted ^= text[k] == "'"
            k += 1
        if k >= len(text):
            raise ExpressionError(f"unterminated ${{{{ in {text!r}")
        parts.append(parse_expression(text[j + 3:k]))
        i = k + 2
    parts.append(text[i:])
    return parts
