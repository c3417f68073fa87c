"""Which events start a workflow: ``on:`` with its branch, path and type filters."""

from __future__ import annotations

import re

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
