"""A local simulator of our own GitHub Actions workflows, for tests.

It runs a workflow's jobs in ``needs`` order and their ``run:`` steps in real
shells, with a real event payload in ``GITHUB_EVENT_PATH``, against whatever
``api_url`` the caller gives (a ``FakeGitHub``), and returns what happened:

    with FakeGitHub("octo", "app") as gh:
        result = run_workflow(ws / ".github/workflows/replaybook-capture.yml", "issues", payload,
                              workspace=ws, api_url=gh.url, secrets={"GITHUB_TOKEN": "t"},
                              shims={"pip": 'echo "$@" >> "$RUNNER_TEMP/pip.log"'})
        assert result.jobs["capture"].result == "success", result.log()

Supported: triggers (types, workflows, branches/tags with ``*``/``**``/``!``,
dispatch inputs), ``needs``/``if:`` (status functions over all ancestors, as
GitHub does), expressions, static and dynamic matrices (include/exclude,
fail-fast), run steps (shell, working-directory, env, continue-on-error,
timeout-minutes), GITHUB_OUTPUT/ENV/PATH/STEP_SUMMARY, ``::error::``
annotations, local composite actions (nested), remote actions through
callables, with built-ins for checkout, setup-python/node, artifacts and app
tokens. Jobs and matrix legs run one after another. Anything else raises
NotImplementedError naming the feature, never a silent guess.

Our composite actions install Replaybook into a venv from the workspace: give
them ``stub_python(...)`` as setup-python's ``python-path`` (through ``uses=``,
which overrides the built-ins) and they run the code under test, offline.
``check_expressions(path)`` parses every expression of a workflow or action.

Not simulated (ignored): permissions, concurrency, environment, runs-on,
max-parallel, ``paths`` filters and cron (both reported in ``why``),
``::add-mask::`` (nothing is masked) and ``::stop-commands::``; ``cancelled()``
is always false and the fake GitHub does not check tokens.

Deviation kept on purpose: a step without ``shell`` runs ``bash -e`` (no
pipefail), as on GitHub; ``shell: bash`` adds ``-o pipefail``.
"""

from __future__ import annotations

import fnmatch
import glob as globmod
import hashlib
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# ----------------------------------------------------------------- results


@dataclass
class StepResult:
    name: str
    kind: str  # run | uses | skipped
    rc: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: dict = field(default_factory=dict)
    id: str | None = None
    outcome: str = "success"  # before continue-on-error
    conclusion: str = "success"  # after it
    errors: list[str] = field(default_factory=list)  # ::error:: messages
    inputs: dict = field(default_factory=dict)  # the evaluated `with:` of a uses step
    steps: list[StepResult] = field(default_factory=list)  # a composite action's own steps


@dataclass
class JobResult:
    name: str
    result: str  # success | failure | skipped | cancelled
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    summary: str = ""
    matrix: dict | None = None

    def step(self, key: str) -> StepResult:
        """A step by id or name."""
        for s in self.steps:
            if key in (s.id, s.name):
                return s
        raise KeyError(f"no step {key!r} in job {self.name!r}: {[s.id or s.name for s in self.steps]}")

    @property
    def errors(self) -> list[str]:
        return [e for s in _walk(self.steps) for e in s.errors]


@dataclass
class WorkflowResult:
    triggered: bool
    why: str
    jobs: dict[str, JobResult] = field(default_factory=dict)  # by job id; matrix legs as "id (a, b)"
    artifacts: dict[str, dict[str, bytes]] = field(default_factory=dict)  # name -> relative path -> bytes

    def legs(self, job_id: str) -> list[JobResult]:
        return [j for k, j in self.jobs.items() if k == job_id or k.startswith(job_id + " (")]

    @property
    def conclusion(self) -> str:
        results = {j.result for j in self.jobs.values()}
        return "failure" if results & {"failure", "cancelled"} else "success" if "success" in results else "skipped"

    def log(self) -> str:
        """Every step's output, for assertion messages."""
        lines = [f"triggered={self.triggered} ({self.why})"]
        for key, job in self.jobs.items():
            lines.append(f"== job {key}: {job.result}")
            for s in _walk(job.steps):
                lines.append(f"-- step {s.name} [{s.kind}] rc={s.rc} {s.outcome}/{s.conclusion}")
                if not s.steps:  # a composite action's output is its steps'
                    lines += [f"   {x}" for x in (s.stdout + s.stderr).splitlines()]
        return "\n".join(lines)


def _walk(steps: list[StepResult]):
    for s in steps:
        yield s
        yield from _walk(s.steps)


class ActionFailed(Exception):
    """Raised by a simulated remote action to fail its step (not the test)."""


@dataclass
class ActionContext:
    """What a simulated remote action (a Python callable) sees."""

    workspace: Path
    env: dict[str, str]
    github: dict
    artifacts: Path
    runner_temp: Path
    out: list[str] = field(default_factory=list)

    def print(self, text: str) -> None:
        self.out.append(text)


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


# ---------------------------------------------------------------- triggers

_FILTER_KEYS = {"types", "branches", "branches-ignore", "tags", "tags-ignore", "paths", "paths-ignore", "workflows",
                "inputs"}
_PR_DEFAULT_TYPES = ["opened", "synchronize", "reopened"]


def _glob_match(pattern: str, text: str) -> bool:
    if any(c in pattern for c in "?+["):
        raise NotImplementedError(f"filter pattern characters ? + [ ] (in {pattern!r})")
    rx = "".join(".*" if tok == "**" else "[^/]*" if tok == "*" else re.escape(tok)
                 for tok in re.split(r"(\*\*|\*)", pattern) if tok)
    return re.fullmatch(rx, text) is not None


def _filter(patterns, text) -> bool:
    ok = False
    for p in patterns:
        if p.startswith("!"):
            ok = ok and not _glob_match(p[1:], text)
        elif _glob_match(p, text):
            ok = True
    return ok


def match_trigger(on, event_name: str, payload: dict) -> tuple[bool, str]:
    if isinstance(on, str):
        on = {on: None}
    elif isinstance(on, list):
        on = {e: None for e in on}
    if event_name not in on:
        return False, f"event {event_name!r} is not in on: {sorted(on)}"
    spec = on[event_name] or {}
    if event_name == "schedule":
        return True, "schedule (cron not checked)"
    if event_name == "workflow_call":
        raise NotImplementedError("workflow_call (reusable workflows)")
    if not isinstance(spec, dict):
        raise ValueError(f"on.{event_name} must be a mapping, got {spec!r}")
    unknown = set(spec) - _FILTER_KEYS
    if unknown:
        raise NotImplementedError(f"on.{event_name} filters {sorted(unknown)}")
    action = payload.get("action")
    types = spec.get("types") or (_PR_DEFAULT_TYPES if event_name in ("pull_request", "pull_request_target") else None)
    if types is not None and action not in types:
        return False, f"{event_name} action {action!r} is not in types {types}"
    if event_name == "workflow_run":
        name = (payload.get("workflow_run") or {}).get("name")
        if name not in (spec.get("workflows") or []):
            return False, f"workflow_run of {name!r} is not in workflows {spec.get('workflows')}"
    ref = None
    if event_name == "push":
        ref = payload.get("ref", "")
    elif event_name in ("pull_request", "pull_request_target"):
        ref = "refs/heads/" + payload["pull_request"]["base"]["ref"]
    elif event_name == "workflow_run":
        ref = "refs/heads/" + ((payload.get("workflow_run") or {}).get("head_branch") or "")
    if ref is not None:
        kind, name = ("tags", ref[10:]) if ref.startswith("refs/tags/") else ("branches", re.sub(r"^refs/heads/", "", ref))
        has = {k: (k in spec or k + "-ignore" in spec) for k in ("branches", "tags")}
        if any(has.values()) and not has[kind]:
            return False, f"{kind[:-1]} {name!r}: only {[k for k, v in has.items() if v]} filters are set"
        if kind in spec and not _filter(spec[kind], name):
            return False, f"{kind[:-1]} {name!r} does not match {spec[kind]}"
        if kind + "-ignore" in spec and any(_glob_match(p, name) for p in spec[kind + "-ignore"]):
            return False, f"{kind[:-1]} {name!r} matches {kind}-ignore {spec[kind + '-ignore']}"
    why = f"{event_name}" + (f"/{action}" if action else "") + " matched"
    if "paths" in spec or "paths-ignore" in spec:
        why += " (paths filters ignored)"
    return True, why


# --------------------------------------------------------------- the runner

_WORKFLOW_KEYS = {"name", "run-name", "on", "env", "defaults", "jobs", "permissions", "concurrency"}
_JOB_KEYS = {"name", "runs-on", "needs", "if", "steps", "env", "outputs", "strategy", "timeout-minutes", "defaults",
             "permissions", "concurrency", "environment", "continue-on-error"}
_STEP_KEYS = {"id", "name", "if", "run", "uses", "with", "env", "shell", "working-directory", "continue-on-error",
              "timeout-minutes"}
_ACTION_KEYS = {"name", "description", "author", "inputs", "outputs", "runs", "branding"}
_SHELLS = {None: "bash --noprofile --norc -e {0}", "bash": "bash --noprofile --norc -eo pipefail {0}",
           "sh": "sh -e {0}", "python": "python {0}"}
_COMMAND = re.compile(r"^::(error|warning|notice|set-output|set-env|add-path|save-state)(?:\s[^:]*)?::(.*)$")


def _strs(d: dict | None) -> dict[str, str]:
    return {str(k): to_string(v) for k, v in (d or {}).items()}


class _Loader(yaml.SafeLoader):
    """Booleans as GitHub reads them (YAML 1.2): only true/false; yes/no/on/off stay strings."""


_Loader.yaml_implicit_resolvers = {k: [r for r in v if r[0] != "tag:yaml.org,2002:bool"]
                                   for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def load_yaml(path: Path) -> dict:
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a YAML mapping")
    return doc


def parse_kv_file(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT / GITHUB_ENV: ``name=value`` lines and ``name<<DELIM`` blocks."""
    lines, out, i = path.read_text(encoding="utf-8").splitlines(), {}, 0
    while i < len(lines):
        line, i = lines[i], i + 1
        if not line.strip():
            continue
        eq, heredoc = line.find("="), line.find("<<")
        if eq > 0 and (heredoc < 0 or eq < heredoc):
            out[line[:eq]] = line[eq + 1:]
        elif heredoc > 0:
            name, delim, body = line[:heredoc], line[heredoc + 2:], []
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"{path.name}: no closing delimiter {delim!r} for {name!r}")
            i += 1
            out[name] = "\n".join(body)
        else:
            raise ValueError(f"{path.name}: invalid line {line!r}")
    return out


@dataclass
class _Scope:
    """The steps of a job, or of one composite action."""

    contexts: dict
    base_env: dict[str, str]
    defaults: dict
    extra_env: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)
    failed: bool = False
    composite: bool = False
    depth: int = 0


@dataclass
class _Job:
    dir: Path
    deadline: float
    env: dict = field(default_factory=dict)  # from GITHUB_ENV
    paths: list = field(default_factory=list)  # from GITHUB_PATH, newest first
    summary: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    count: int = 0


class _Run:
    def __init__(self, doc, event_name, payload, *, workspace, env, secrets, vars, inputs, repository, api_url,
                 shims, uses, timeout, run_dir, run_id, ref, sha):
        self.doc, self.workspace, self.caller_env, self.uses = doc, Path(workspace).resolve(), dict(env or {}), uses or {}
        self.run_dir, self.deadline, self.job_count = run_dir, time.monotonic() + timeout, 0
        self.secrets = {"GITHUB_TOKEN": "ghs_fake_workflow_token", **(secrets or {})}
        self.vars = dict(vars or {})
        self.inputs = inputs
        self.artifacts = run_dir / "artifacts"
        self.home = run_dir / "home"
        self.shims = run_dir / "shims"
        for d in (self.artifacts, self.home, self.shims):
            d.mkdir(parents=True)
        for name, text in (shims or {}).items():
            p = self.shims / name
            p.write_text(text if text.startswith("#!") else "#!/usr/bin/env bash\n" + text)
            p.chmod(0o755)
        event_path = run_dir / "event.json"
        event_path.write_text(json.dumps(payload, indent=2))
        owner = repository.split("/")[0]
        pr = payload.get("pull_request") or {}
        default_branch = (payload.get("repository") or {}).get("default_branch") or "main"
        group = payload.get("merge_group") or {}
        if ref is None:
            ref = (payload.get("ref") or f"refs/heads/{default_branch}" if event_name == "push" else
                   f"refs/pull/{pr.get('number')}/merge" if event_name == "pull_request" else
                   f"refs/heads/{pr['base']['ref']}" if event_name == "pull_request_target" else
                   group.get("head_ref") or f"refs/heads/{default_branch}" if event_name == "merge_group" else
                   f"refs/heads/{default_branch}")
        if sha is None:
            # As GitHub sets GITHUB_SHA: the pushed commit; for pull_request the merge commit (the head stands in:
            # the fake has no merge commits); for pull_request_target the base branch's head, never the PR's code;
            # for merge_group the queue's commit. "c" * 40 is FakeGitHub's MAIN_SHA.
            sha = (payload.get("after") if event_name == "push" else
                   (pr.get("head") or {}).get("sha") if event_name == "pull_request" else
                   (pr.get("base") or {}).get("sha") if event_name == "pull_request_target" else
                   group.get("head_sha") if event_name == "merge_group" else None) or "c" * 40
        self.github = _Strict("github", {
            "event_name": event_name, "event": payload, "event_path": str(event_path), "repository": repository,
            "repository_owner": owner, "ref": ref, "ref_name": re.sub(r"^refs/(heads|tags)/", "", ref),
            "ref_type": "tag" if ref.startswith("refs/tags/") else "branch", "sha": sha,
            "head_ref": (pr.get("head") or {}).get("ref", ""), "base_ref": (pr.get("base") or {}).get("ref", ""),
            "run_id": str(run_id), "run_number": str(run_id), "run_attempt": "1",
            "workflow": doc.get("name") or "", "job": "", "action": "",
            "actor": (payload.get("sender") or {}).get("login", "octocat"),
            "triggering_actor": (payload.get("sender") or {}).get("login", "octocat"),
            "action_path": "", "action_ref": "", "action_repository": "",
            "server_url": "https://github.com", "api_url": api_url, "graphql_url": api_url + "/graphql",
            "token": self.secrets["GITHUB_TOKEN"], "workspace": str(self.workspace), "retention_days": "90",
        })

    # -- workflow

    def run(self) -> WorkflowResult:
        unknown = set(self.doc) - _WORKFLOW_KEYS
        if unknown:
            raise NotImplementedError(f"workflow keys {sorted(map(str, unknown))}")
        jobs = self.doc.get("jobs") or {}
        results: dict[str, JobResult] = {}
        agg, outs, ancestors = {}, {}, {}
        for jid in _topological(jobs):
            job = jobs[jid]
            unknown = set(job) - _JOB_KEYS
            if unknown:
                raise NotImplementedError(f"job {jid}: keys {sorted(unknown)} (uses/container/services are not simulated)")
            if job.get("continue-on-error") not in (None, False):
                raise NotImplementedError(f"job {jid}: job-level continue-on-error")
            needs = _as_list(job.get("needs"))
            ancestors[jid] = set(needs).union(*(ancestors[n] for n in needs))
            up = [agg[a] for a in ancestors[jid]]
            status = {"success": all(r == "success" for r in up), "failure": "failure" in up, "always": True,
                      "cancelled": False}
            needs_ctx = _Strict("needs", {n: {"result": agg[n], "outputs": outs[n]} for n in needs})
            contexts = {"github": self.github, "needs": needs_ctx, "vars": self.vars, "inputs": self.inputs}
            ev = Evaluator(contexts, status, self.workspace, f"in job {jid}'s if")
            if not ev.condition(job.get("if")):
                results[jid] = JobResult(str(job.get("name", jid)), "skipped")
                agg[jid], outs[jid] = "skipped", {}
                continue
            strategy = job.get("strategy") or {}
            if set(strategy) - {"matrix", "fail-fast", "max-parallel"}:
                raise NotImplementedError(f"job {jid}: strategy keys {sorted(strategy)}")
            legs = self._matrix(jid, strategy["matrix"], Evaluator({**contexts, "secrets": self.secrets}, None,
                                self.workspace)) if "matrix" in strategy else [None]
            fail_fast = _truthy(strategy.get("fail-fast", True))
            leg_results, outs[jid] = [], {}
            for index, combo in enumerate(legs):
                key = jid if combo is None else f"{jid} ({', '.join(_label(v) for v in combo.values())})"
                if fail_fast and "failure" in leg_results:
                    results[key] = JobResult(key, "cancelled", matrix=combo)
                    leg_results.append("cancelled")
                    continue
                strat = {"fail-fast": fail_fast, "job-index": index, "job-total": len(legs),
                         "max-parallel": strategy.get("max-parallel", len(legs))}
                res = self._job(jid, key, job, combo, {**contexts, "secrets": self.secrets, "strategy": strat})
                results[key] = res
                leg_results.append(res.result)
                outs[jid].update({k: v for k, v in res.outputs.items() if v != ""})
            agg[jid] = ("failure" if {"failure", "cancelled"} & set(leg_results) else
                        "success" if "success" in leg_results else "skipped")
        artifacts = {d.name: {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}
                     for d in sorted(self.artifacts.iterdir())}
        return WorkflowResult(True, "", results, artifacts)

    def _matrix(self, jid, spec, ev) -> list[dict]:
        spec = ev.template(spec)
        if not isinstance(spec, dict):
            raise ValueError(f"job {jid}: strategy.matrix is not a mapping: {spec!r}")
        include, exclude = spec.get("include") or [], spec.get("exclude") or []
        base = {k: v for k, v in spec.items() if k not in ("include", "exclude")}
        for k, v in base.items():
            if not isinstance(v, list):
                raise ValueError(f"job {jid}: matrix.{k} must be a list, got {v!r}")
        combos = [dict(zip(base, vals)) for vals in itertools.product(*base.values())] if base else []
        combos = [c for c in combos if not any(all(c.get(k) == v for k, v in ex.items()) for ex in exclude)]
        originals, extra = [dict(c) for c in combos], []
        for inc in include:
            fits = [c for c, o in zip(combos, originals) if all(k not in o or o[k] == v for k, v in inc.items())]
            for c in fits:
                c.update(inc)
            if not fits:
                extra.append(dict(inc))
        combos += extra
        if not combos or len(combos) > 256:
            raise ValueError(f"job {jid}: the matrix gives {len(combos)} jobs (GitHub needs 1..256)")
        return combos

    # -- jobs and steps

    def _job(self, jid, key, job, combo, contexts) -> JobResult:
        self.job_count += 1
        js = _Job(self.run_dir / "jobs" / str(self.job_count), self.deadline)
        (js.dir / "temp").mkdir(parents=True)
        contexts = {**contexts, "github": _Strict("github", {**self.github, "job": jid}), "matrix": combo or {},
                    "runner": {"os": "Linux", "arch": "X64", "name": "actsim", "temp": str(js.dir / "temp"),
                               "tool_cache": str(js.dir / "temp"), "environment": "github-hosted"},
                    "job": {"status": "success", "container": {}, "services": {}}}
        ev = Evaluator({**contexts, "env": {}}, None, self.workspace, f"in job {jid}")
        name = to_string(ev.template(job.get("name", key)))
        js.deadline = min(self.deadline, time.monotonic() + float(ev.template(job.get("timeout-minutes", 360))) * 60)
        wf_env = _strs(ev.template(self.doc.get("env")))
        job_env = {**wf_env, **_strs(Evaluator({**contexts, "env": wf_env}, None, self.workspace).template(job.get("env")))}
        defaults = {**(self.doc.get("defaults") or {}).get("run", {}), **(job.get("defaults") or {}).get("run", {})}
        scope = _Scope(contexts, job_env, defaults)
        steps = [self._step(s, scope, js) for s in job.get("steps") or []]
        ev = Evaluator({**contexts, "env": {**job_env, **js.env}, "steps": scope.steps}, None, self.workspace)
        outputs = {k: to_string(ev.template(v)) for k, v in (job.get("outputs") or {}).items()}
        for pgid in js.groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return JobResult(name, "failure" if scope.failed else "success", steps, outputs, "".join(js.summary), combo)

    def _step(self, step, scope: _Scope, js: _Job) -> StepResult:
        where = "in a composite action" if scope.composite else "in a job"
        unknown = set(step) - _STEP_KEYS
        if unknown:
            raise NotImplementedError(f"step keys {sorted(unknown)} {where}")
        if ("run" in step) == ("uses" in step):
            raise ValueError(f"a step needs exactly one of run: or uses: ({step})")
        sid = step.get("id")
        status = {"success": not scope.failed, "failure": scope.failed, "always": True, "cancelled": False}
        env_ctx = {**scope.base_env, **js.env}
        job_ctx = {**scope.contexts.get("job", {}), "status": "failure" if scope.failed else "success"}
        ctx = {**scope.contexts, "env": env_ctx, "steps": scope.steps, "job": job_ctx}
        ev = Evaluator(ctx, status, self.workspace, where)
        default_name = ("Run " + str(step["run"]).strip().splitlines()[0]) if "run" in step else str(step["uses"])
        name = to_string(ev.template(step["name"])) if "name" in step else default_name
        if not ev.condition(step.get("if")):
            if sid:
                scope.steps[sid] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            return StepResult(name, "skipped", id=sid, outcome="skipped", conclusion="skipped")
        step_env = {**env_ctx, **_strs(ev.template(step.get("env")))}
        ev = Evaluator({**ctx, "env": step_env}, None, self.workspace, where)
        continue_on_error = _truthy(ev.template(step.get("continue-on-error", False)))
        limit = max(0.0, js.deadline - time.monotonic())
        if "timeout-minutes" in step:
            limit = min(limit, float(ev.template(step["timeout-minutes"])) * 60)
        js.count += 1
        files = js.dir / f"step{js.count}"
        files.mkdir()
        if "run" in step:
            res = self._run_step(step, name, ev, scope, js, step_env, files, limit)
        else:
            res = self._uses_step(step, name, ev, scope, js, step_env, files)
        res.id = sid
        for line in [] if res.steps else (res.stdout + "\n" + res.stderr).splitlines():  # composites: done per step
            m = _COMMAND.match(line)
            if m and m.group(1) in ("set-output", "set-env", "add-path", "save-state"):
                raise NotImplementedError(f"workflow command ::{m.group(1)}:: (use GITHUB_OUTPUT / GITHUB_ENV / GITHUB_PATH)")
            if m and m.group(1) == "error":
                res.errors.append(m.group(2))
        res.outcome = "success" if res.rc == 0 else "failure"
        res.conclusion = "success" if continue_on_error else res.outcome
        scope.failed = scope.failed or res.conclusion == "failure"
        if sid:
            scope.steps[sid] = {"outputs": res.outputs, "outcome": res.outcome, "conclusion": res.conclusion}
        return res

    def _files_env(self, files: Path) -> dict[str, str]:
        names = {"GITHUB_OUTPUT": "output", "GITHUB_ENV": "env", "GITHUB_PATH": "path",
                 "GITHUB_STEP_SUMMARY": "summary", "GITHUB_STATE": "state"}
        for f in names.values():
            (files / f).touch()
        return {k: str(files / f) for k, f in names.items()}

    def _collect_files(self, files: Path, js: _Job) -> dict[str, str]:
        js.env.update(parse_kv_file(files / "env"))
        for line in (files / "path").read_text().splitlines():
            if line.strip():
                js.paths.insert(0, line.strip())
        js.summary.append((files / "summary").read_text())
        return parse_kv_file(files / "output")

    def _process_env(self, scope: _Scope, js: _Job, step_env: dict, files: Path) -> dict[str, str]:
        g = scope.contexts["github"]
        merged = {"HOME": str(self.home), "LANG": "C.UTF-8", **self.caller_env, **step_env}
        base_path = merged.get("PATH") or os.environ.get("PATH", "/usr/bin:/bin")
        merged["PATH"] = os.pathsep.join([str(self.shims), *js.paths, os.path.dirname(sys.executable), base_path])
        merged.update({
            "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": g["event_name"],
            "GITHUB_EVENT_PATH": g["event_path"], "GITHUB_REPOSITORY": g["repository"],
            "GITHUB_REPOSITORY_OWNER": g["repository_owner"], "GITHUB_WORKSPACE": g["workspace"],
            "GITHUB_SHA": g["sha"], "GITHUB_REF": g["ref"], "GITHUB_REF_NAME": g["ref_name"],
            "GITHUB_REF_TYPE": g["ref_type"], "GITHUB_HEAD_REF": g["head_ref"], "GITHUB_BASE_REF": g["base_ref"],
            "GITHUB_RUN_ID": g["run_id"], "GITHUB_RUN_NUMBER": g["run_number"], "GITHUB_RUN_ATTEMPT": g["run_attempt"],
            "GITHUB_WORKFLOW": g["workflow"], "GITHUB_JOB": g["job"], "GITHUB_ACTOR": g["actor"],
            "GITHUB_TRIGGERING_ACTOR": g["triggering_actor"], "GITHUB_API_URL": g["api_url"],
            "GITHUB_SERVER_URL": g["server_url"], "GITHUB_GRAPHQL_URL": g["graphql_url"],
            "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "RUNNER_TEMP": str(js.dir / "temp"),
            "RUNNER_TOOL_CACHE": str(js.dir / "temp"), **scope.extra_env, **self._files_env(files),
        })
        return merged

    def _run_step(self, step, name, ev, scope, js, step_env, files, limit) -> StepResult:
        shell = step.get("shell") or scope.defaults.get("shell")
        if scope.composite and not step.get("shell"):
            raise ValueError(f"composite action step {name!r}: run steps need shell:")
        if shell in ("pwsh", "powershell", "cmd"):
            raise NotImplementedError(f"shell: {shell}")
        template = _SHELLS.get(shell, shell)
        if "{0}" not in template:
            raise ValueError(f"shell: {shell!r} must be bash, sh, python or a command with {{0}}")
        script = files / ("script.py" if template.split()[0] == "python" else "script.sh")
        script.write_text(to_string(ev.template(step["run"])))
        argv = [a.replace("{0}", str(script)) for a in shlex.split(template)]
        cwd = ev.template(step.get("working-directory") or scope.defaults.get("working-directory") or ".")
        env = self._process_env(scope, js, step_env, files)
        out, err = files / "stdout", files / "stderr"
        try:
            with out.open("wb") as o, err.open("wb") as e:
                proc = subprocess.Popen(argv, cwd=self.workspace / cwd, env=env, stdin=subprocess.DEVNULL,
                                        stdout=o, stderr=e, start_new_session=True)
                js.groups.append(proc.pid)
                try:
                    rc = proc.wait(timeout=limit)
                    timed_out = ""
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc, timed_out = proc.wait(), f"\nactsim: step {name!r} timed out after {limit:.1f}s\n"
        except FileNotFoundError as exc:
            return StepResult(name, "run", 1, "", f"actsim: {exc}\n")
        outputs = self._collect_files(files, js)
        return StepResult(name, "run", rc, out.read_text(errors="replace"), err.read_text(errors="replace") + timed_out,
                          outputs)

    def _uses_step(self, step, name, ev, scope, js, step_env, files) -> StepResult:
        ref = str(step["uses"])
        with_inputs = ev.template(step.get("with") or {})
        res = StepResult(name, "uses", inputs=dict(with_inputs))
        if ref.startswith("docker://"):
            raise NotImplementedError(f"docker actions ({ref})")
        if ref.startswith("./"):
            return self._composite(self.workspace / ref, ref, with_inputs, scope, js, step_env, res)
        key, _, version = ref.partition("@")
        if not version:
            raise ValueError(f"uses: {ref!r} needs @ref")
        target = self.uses.get(key) or _BUILTINS.get(key)
        if target is None:
            raise NotImplementedError(f"remote action {key!r}: pass uses={{{key!r}: callable}} (or a path) to simulate it")
        if isinstance(target, (str, Path)):
            return self._composite(Path(target), ref, with_inputs, scope, js, step_env, res)
        self._files_env(files)
        ctx = ActionContext(self.workspace, self._process_env(scope, js, step_env, files),
                            dict(scope.contexts["github"]), self.artifacts, js.dir / "temp")
        try:
            res.outputs = _strs(target(dict(with_inputs), ctx))
        except ActionFailed as exc:
            res.rc, res.stderr = 1, f"{exc}\n"
            res.errors.append(str(exc))
        res.outputs.update(self._collect_files(files, js))
        res.stdout = "".join(line + "\n" for line in ctx.out)
        return res

    def _composite(self, folder: Path, ref, with_inputs, scope, js, step_env, res) -> StepResult:
        if scope.depth >= 9:
            raise ValueError(f"composite actions nested deeper than 10 ({ref})")
        path = next((p for p in (folder / "action.yml", folder / "action.yaml") if p.exists()), None)
        if path is None:
            raise FileNotFoundError(f"uses: {ref}: no action.yml in {folder}")
        doc = load_yaml(path)
        if set(doc) - _ACTION_KEYS:
            raise NotImplementedError(f"{ref}: action keys {sorted(set(doc) - _ACTION_KEYS)}")
        using = (doc.get("runs") or {}).get("using")
        if using != "composite":
            raise NotImplementedError(f"{ref}: runs.using {using!r} (only composite actions are simulated)")
        declared = doc.get("inputs") or {}
        unexpected = set(with_inputs) - set(declared)
        if unexpected:
            raise ValueError(f"{ref}: unexpected inputs {sorted(unexpected)} (declared: {sorted(declared)})")
        repo, _, action_ref = ref.partition("@")
        github = _Strict("github", {**scope.contexts["github"], "action_path": str(folder.resolve()), "action_ref": action_ref,
                                    "action_repository": "/".join(repo.split("/")[:2]) if action_ref else ""})
        keep = {k: v for k, v in scope.contexts.items() if k in ("job", "runner", "strategy", "matrix")}
        ev = Evaluator({**keep, "github": github, "env": step_env}, None, self.workspace, f"in {ref}")
        inputs = _Strict(f"{ref} inputs")
        for key, spec in declared.items():
            spec = spec or {}
            if key in with_inputs:
                inputs[key] = to_string(with_inputs[key])
            elif "default" in spec:
                inputs[key] = to_string(ev.template(spec["default"]))
            elif spec.get("required"):
                raise ValueError(f"{ref}: required input {key!r} is missing")
            else:
                inputs[key] = ""
        inner = _Scope({**keep, "github": github, "inputs": inputs}, step_env, {}, composite=True, depth=scope.depth + 1,
                       extra_env={"GITHUB_ACTION_PATH": str(folder.resolve())})
        res.steps = [self._step(s, inner, js) for s in doc["runs"].get("steps") or []]
        ev = Evaluator({**inner.contexts, "env": step_env, "steps": inner.steps}, None, self.workspace, f"in {ref}")
        res.outputs = {k: to_string(ev.template((v or {}).get("value"))) for k, v in (doc.get("outputs") or {}).items()}
        res.rc = 1 if inner.failed else 0
        res.stdout = "".join(s.stdout for s in res.steps)
        res.stderr = "".join(s.stderr for s in res.steps)
        return res


def _label(v) -> str:
    return to_string(v) if _kind(v) != "obj" else json.dumps(v, separators=(",", ":"))


def _as_list(v) -> list:
    return [] if v is None else [v] if isinstance(v, str) else list(v)


def _topological(jobs: dict) -> list[str]:
    done: list[str] = []
    for jid, job in jobs.items():
        for n in _as_list(job.get("needs")):
            if n not in jobs:
                raise ValueError(f"job {jid} needs unknown job {n!r}")
    while len(done) < len(jobs):
        ready = [j for j in jobs if j not in done and all(n in done for n in _as_list(jobs[j].get("needs")))]
        if not ready:
            raise ValueError(f"needs cycle among {sorted(set(jobs) - set(done))}")
        done.append(ready[0])
    return done


# -------------------------------------------------------- built-in actions


def _paths(value) -> list[str]:
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def _upload_artifact(w: dict, ctx: ActionContext) -> dict:
    name, patterns = w.get("name") or "artifact", _paths(w.get("path"))
    if not patterns:
        raise ActionFailed("upload-artifact: input 'path' is required")
    dest = ctx.artifacts / name
    if dest.exists() and str(w.get("overwrite")).lower() != "true":
        raise ActionFailed(f"upload-artifact: an artifact named {name!r} already exists")
    files, roots = set(), []
    for pat in (p for p in patterns if not p.startswith("!")):
        full = pat if os.path.isabs(pat) else str(ctx.workspace / pat)
        if any(c in pat for c in "*?["):
            roots.append(re.split(r"[*?\[]", full)[0].rpartition("/")[0] or "/")
            found = globmod.glob(full, recursive=True)
        else:
            roots.append(full if os.path.isdir(full) else os.path.dirname(full))
            found = [full] if os.path.exists(full) else []
        for f in found:
            files.update(str(p) for p in Path(f).rglob("*") if p.is_file()) if os.path.isdir(f) else files.add(f)
    excludes = [p[1:] if os.path.isabs(p[1:]) else str(ctx.workspace / p[1:]) for p in patterns if p.startswith("!")]
    root = os.path.commonpath(roots)
    hidden = str(w.get("include-hidden-files")).lower() != "true"  # v4.4+: dot files under the root are left out
    files = sorted(f for f in files if not any(fnmatch.fnmatch(f, x) for x in excludes)
                   and not (hidden and any(part.startswith(".") for part in Path(os.path.relpath(f, root)).parts)))
    if not files:
        mode = w.get("if-no-files-found") or "warn"
        if mode == "error":
            raise ActionFailed(f"upload-artifact: no files were found with the provided path: {patterns}")
        if mode == "warn":
            ctx.print(f"::warning::No files were found with the provided path: {patterns}. No artifacts will be uploaded.")
        return {}
    shutil.rmtree(dest, ignore_errors=True)
    for f in files:
        target = dest / os.path.relpath(f, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return {"artifact-id": str(len(list(ctx.artifacts.iterdir()))), "artifact-url": f"artifact://{name}"}


def _download_artifact(w: dict, ctx: ActionContext) -> dict:
    if w.get("artifact-ids") or w.get("github-token"):
        raise NotImplementedError("download-artifact: artifact-ids / github-token (other runs)")
    path = ctx.workspace / str(w.get("path") or ".")
    if w.get("name"):
        src = ctx.artifacts / str(w["name"])
        if not src.is_dir():
            raise ActionFailed(f"download-artifact: Artifact not found for name: {w['name']}")
        shutil.copytree(src, path, dirs_exist_ok=True)
    else:
        merge = str(w.get("merge-multiple")).lower() == "true"
        for d in sorted(ctx.artifacts.iterdir()):
            if not w.get("pattern") or fnmatch.fnmatch(d.name, str(w["pattern"])):
                shutil.copytree(d, path if merge else path / d.name, dirs_exist_ok=True)
    return {"download-path": str(path)}


def _app_token(w: dict, ctx: ActionContext) -> dict:
    if not (w.get("app-id") or w.get("client-id")) or not w.get("private-key"):
        raise ActionFailed("create-github-app-token: app-id (or client-id) and private-key are required")
    return {"token": "app-token", "installation-id": "1", "app-slug": "replaybook"}


_BUILTINS: dict[str, Callable] = {
    "actions/checkout": lambda w, ctx: {"ref": ctx.github["ref"], "commit": ctx.github["sha"]},
    "actions/setup-python": lambda w, ctx: {"python-version": str(w.get("python-version", "")),
                                            "python-path": sys.executable},
    "actions/setup-node": lambda w, ctx: {"node-version": str(w.get("node-version", ""))},
    "actions/upload-artifact": _upload_artifact,
    "actions/download-artifact": _download_artifact,
    "actions/create-github-app-token": _app_token,
}


# ---------------------------------------------------------------- entry


def _dispatch_inputs(on, event_name, payload, inputs):
    """The inputs context: workflow_dispatch defaults, then payload["inputs"], then ``inputs``."""
    spec = on.get("workflow_dispatch") if isinstance(on, dict) else None
    declared = (spec or {}).get("inputs") or {}
    ctx = _Strict("inputs", {k: None for k in declared})
    if event_name == "workflow_dispatch":
        given = {**(payload.get("inputs") or {}), **(inputs or {})}
        for key, d in declared.items():
            d = d or {}
            value = given.get(key, d.get("default"))
            if value is None and d.get("required"):
                raise ValueError(f"workflow_dispatch input {key!r} is required")
            kind = d.get("type", "string")
            if kind == "boolean":
                value = value if isinstance(value, bool) else str(value).lower() == "true"
            elif kind == "number" and value is not None:
                value = _number(value)
            elif kind == "choice" and value is not None and value not in (d.get("options") or []):
                raise ValueError(f"workflow_dispatch input {key!r}: {value!r} is not one of {d.get('options')}")
            elif kind not in ("string", "choice", "environment", "number"):
                raise NotImplementedError(f"workflow_dispatch input type {kind!r}")
            ctx[key] = value
        payload["inputs"] = {k: to_string(v) for k, v in ctx.items()}
    elif inputs:
        ctx.update(inputs)
    return ctx


def run_workflow(workflow: Path, event_name: str, payload: dict, *, workspace: Path, env: dict[str, str] | None = None,
                 secrets: dict[str, str] | None = None, vars: dict[str, str] | None = None, inputs: dict | None = None,
                 repository: str = "octo/app", api_url: str | None = None, shims: dict[str, str] | None = None,
                 uses: dict[str, Callable | str | Path] | None = None, timeout: float = 300, run_id: int = 1,
                 ref: str | None = None, sha: str | None = None) -> WorkflowResult:
    """Run ``workflow`` for one event. See the module docstring.

    ``api_url`` defaults to a closed port on 127.0.0.1, so a step that calls GitHub without a fake fails fast.
    ``uses`` maps "owner/repo" (or "owner/repo/path") to a callable(with_inputs, ActionContext) -> outputs,
    or to the folder of a composite action; it overrides the built-ins (e.g. to make setup-python's
    ``python-path`` output a stub). A callable fails its step by raising ActionFailed.
    """
    doc = load_yaml(Path(workflow))
    on = doc.get("on")
    if not on:
        raise ValueError(f"{workflow}: no on:")
    payload = json.loads(json.dumps(payload))
    ok, why = match_trigger(on, event_name, payload)
    if not ok:
        return WorkflowResult(False, why)
    ctx_inputs = _dispatch_inputs(on, event_name, payload, inputs)
    with tempfile.TemporaryDirectory(prefix="actsim-") as tmp:
        run = _Run(doc, event_name, payload, workspace=workspace, env=env, secrets=secrets, vars=vars, inputs=ctx_inputs,
                   repository=repository, api_url=(api_url or "http://127.0.0.1:9").rstrip("/"), shims=shims,
                   uses=uses, timeout=timeout, run_dir=Path(tmp), run_id=run_id, ref=ref, sha=sha)
        result = run.run()
    result.why = why
    return result


def stub_python(folder: Path, pip_log: Path, scripts: tuple[str, ...] = ("replaybook",)) -> Path:
    """An interpreter to hand out as setup-python's ``python-path`` output, for actions that install us into a venv.

    It is this interpreter, except that ``-m pip ...`` only appends its arguments to ``pip_log``, and
    ``-m venv [opts] DIR`` makes DIR/bin/python (the stub again) and DIR/bin/<script> for each console script of
    this install. So the action runs the code under test, offline::

        py = stub_python(tmp_path / "py", tmp_path / "pip.log")
        run_workflow(..., uses={"actions/setup-python": lambda w, ctx: {"python-path": str(py)}})
    """
    folder.mkdir(parents=True, exist_ok=True)
    stub, q = folder / "python", shlex.quote
    links = "".join(f'  ln -sf {q(shutil.which(s, path=os.path.dirname(sys.executable)) or s)} "$dir/bin/{s}"\n'
                    for s in scripts)
    stub.write_text(f"""#!/usr/bin/env bash
if [ "${{1:-}} ${{2:-}}" = "-m pip" ]; then shift 2; echo "pip $*" >> {q(str(pip_log))}; exit 0; fi
if [ "${{1:-}} ${{2:-}}" = "-m venv" ]; then
  dir="${{@: -1}}"; mkdir -p "$dir/bin"; ln -sf {q(str(stub))} "$dir/bin/python"
{links}  exit 0
fi
exec {q(sys.executable)} "$@"
""")
    stub.chmod(0o755)
    for s in scripts:
        if not shutil.which(s, path=os.path.dirname(sys.executable)):
            raise FileNotFoundError(f"stub_python: no {s!r} next to {sys.executable}")
    return stub


def evaluate(expression: str, contexts: dict | None = None, status: dict | None = None):
    """Evaluate one expression (bare, or a template with ``${{ }}``) against plain dict contexts."""
    ev = Evaluator(contexts or {}, status)
    return ev.template(expression) if "${{" in expression else ev.eval(parse_expression(expression))


def check_expressions(path: Path) -> int:
    """Parse every ``${{ }}`` and ``if:`` in a workflow or action file (unknown contexts and
    functions are errors); return how many expressions there were."""
    count = 0

    def walk(node, key=None):
        nonlocal count
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif key == "if":
            parse_condition(node)
            count += 1
        elif isinstance(node, str) and "${{" in node:
            count += len(split_template(node)) // 2

    walk(load_yaml(Path(path)))
    return count
