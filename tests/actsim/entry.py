"""Running a workflow file, and the helpers tests use around it."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .expressions import (
    Evaluator,
    _number,
    _Strict,
    parse_condition,
    parse_expression,
    split_template,
    to_string,
)
from .results import WorkflowResult
from .runner import _Run, load_yaml
from .triggers import match_trigger

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


SAFETY_NET_S = 1800.0  # see run_workflow's docstring


def run_workflow(workflow: Path, event_name: str, payload: dict, *, workspace: Path, env: dict[str, str] | None = None,
                 secrets: dict[str, str] | None = None, vars: dict[str, str] | None = None, inputs: dict | None = None,
                 repository: str = "octo/app", api_url: str | None = None, shims: dict[str, str] | None = None,
                 uses: dict[str, Callable | str | Path] | None = None, timeout: float = SAFETY_NET_S, run_id: int = 1,
                 ref: str | None = None, sha: str | None = None,
                 environments: dict[str, dict] | None = None) -> WorkflowResult:
    """Run ``workflow`` for one event. See the module docstring.

    ``timeout`` is a safety net against a hung step, never a speed test: a workflow here takes seconds to a
    minute on an idle machine and several times that at load 10 to 20, so the default (30 minutes, as far
    from a slow run as from a fast one) is one no loaded machine reaches (a run once failed at 120 s).
    The workflow's own ``timeout-minutes`` apply too, as on GitHub.

    ``api_url`` defaults to a closed port on 127.0.0.1, so a step that calls GitHub without a fake fails fast.
    ``uses`` maps "owner/repo" (or "owner/repo/path") to a callable(with_inputs, ActionContext) -> outputs,
    or to the folder of a composite action; it overrides the built-ins (e.g. to make setup-python's
    ``python-path`` output a stub). A callable fails its step by raising ActionFailed.
    ``environments`` maps a deployment environment's name to ``{"branches": [patterns] or None (every branch),
    "secrets": {...}}``: a job naming one runs only on a ref its branch policy lets in (else it fails, never
    started), and only such a job sees its secrets, as on GitHub. A job naming an environment not given gets
    none of its own (GitHub makes it, empty and open, on first use).
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
                   uses=uses, timeout=timeout, run_dir=Path(tmp), run_id=run_id, ref=ref, sha=sha,
                   environments=environments)
        result = run.run()
    result.why = why
    return result


# Run by the stub as ``python [flags] -c PROBE MODULE ARGS...`` in the caller's folder and with its flags, so the
# module named MODULE is found exactly as ``python [flags] -m MODULE`` would find it. When that is not the
# interpreter's own (a folder on sys.path, the working folder first without -I/-P, holds one of that name), it
# runs, as -m would run it. Else the real module is imported (whatever it imports is found the same way, so a
# shadowing ``shutil.py`` runs too) and the probe exits 97: the stub then does its offline stand-in.
_PROBE = """
import importlib, importlib.util, os, runpy, sys, sysconfig
mod = sys.argv[1]
own = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
spec = importlib.util.find_spec(mod)
origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
if not any(origin.startswith(folder + os.sep) for folder in own):
    sys.argv = [origin or mod, *sys.argv[2:]]
    runpy.run_module(mod, run_name="__main__", alter_sys=True)
    sys.exit(0)
importlib.import_module("pip._internal.cli.main" if mod == "pip" else mod)
sys.exit(97)
"""


def stub_python(folder: Path, pip_log: Path, scripts: tuple[str, ...] = ("replaybook",)) -> Path:
    """An interpreter to hand out as setup-python's ``python-path`` output, for actions that install us into a venv.

    It is this interpreter, except that ``-m pip ...`` only appends its arguments to ``pip_log``, and
    ``-m venv [opts] DIR`` makes DIR/bin/python (the stub again) and DIR/bin/<script> for each console script of
    this install. So the action runs the code under test, offline::

        py = stub_python(tmp_path / "py", tmp_path / "pip.log")
        run_workflow(..., uses={"actions/setup-python": lambda w, ctx: {"python-path": str(py)}})

    Both stand-ins first look the module up as the real interpreter would, with the caller's interpreter flags
    (``-I``, ``-P``, ...) and in the caller's working folder (``_PROBE``): a ``venv``, ``pip`` or ``shutil`` there
    that would shadow the standard one runs, as it would on a runner. The pip log's lines then say which flags
    each call had (``pip [-I] install ...``).
    """
    folder.mkdir(parents=True, exist_ok=True)
    stub, q = folder / "python", shlex.quote
    links = "".join(f'  ln -sf {q(shutil.which(s, path=os.path.dirname(sys.executable)) or s)} "$dir/bin/{s}"\n'
                    for s in scripts)
    stub.write_text(f"""#!/usr/bin/env bash
flags=()
while [ $# -gt 0 ]; do case "$1" in -[IPEsSBqu]|-[IPEsSBqu][IPEsSBqu]*) flags+=("$1"); shift ;; *) break ;; esac; done
if [ "${{1:-}}" = -m ] && {{ [ "${{2:-}}" = pip ] || [ "${{2:-}}" = venv ]; }}; then
  mod="$2"; shift 2
  status=0; {q(sys.executable)} "${{flags[@]}}" -c {q(_PROBE)} "$mod" "$@" || status=$?
  [ "$status" -eq 97 ] || exit "$status"
  if [ "$mod" = pip ]; then echo "pip ${{flags[*]}}${{flags[*]:+ }}$*" >> {q(str(pip_log))}; exit 0; fi
  dir="${{@: -1}}"; mkdir -p "$dir/bin"; ln -sf {q(str(stub))} "$dir/bin/python"
{links}  exit 0
fi
exec {q(sys.executable)} "${{flags[@]}}" "$@"
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
