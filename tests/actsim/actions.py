"""Built-in stand-ins for the marketplace actions the workflows use."""

from __future__ import annotations

import fnmatch
import glob as globmod
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from .results import ActionContext, ActionFailed

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


def _cache(w: dict, ctx: ActionContext) -> dict:
    """actions/cache on a fresh runner: nothing is cached yet, so nothing is restored (its post step, which saves,
    is not simulated). A test that needs a warm cache passes ``uses={"actions/cache": ...}``."""
    if not w.get("key") or not _paths(w.get("path")):
        raise ActionFailed("cache: inputs 'key' and 'path' are required")
    return {"cache-hit": "false"}


_BUILTINS: dict[str, Callable] = {
    "actions/checkout": lambda w, ctx: {"ref": ctx.github["ref"], "commit": ctx.github["sha"]},
    "actions/setup-python": lambda w, ctx: {"python-version": str(w.get("python-version", "")),
                                            "python-path": sys.executable},
    "actions/setup-node": lambda w, ctx: {"node-version": str(w.get("node-version", ""))},
    "actions/upload-artifact": _upload_artifact,
    "actions/cache": _cache,
    "actions/download-artifact": _download_artifact,
    "actions/create-github-app-token": _app_token,
}
