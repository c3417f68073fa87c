"""Build hook: record the git commit a wheel or sdist is built from, as ``bot/_build_info.json``.

Why a hook of our own rather than hatch-vcs or setuptools-scm: both derive the *version* from the
tags (0.1.0 becomes 0.1.1.dev3+g1a2b3c4 between releases), which would change every managed file's
header and the docs links; and both add a build dependency that the README's ``pip install .``
would have to fetch. We only need the commit (and the tag, when there is one) next to a fixed
version, and ``git`` is already there whenever there is a checkout to build from.

An sdist carries the file, so a wheel built from the sdist (no ``.git`` any more) keeps it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

INFO = "bot/_build_info.json"
BUILD_INFO_CODE = "bot/_util/build_info.py"


def git_info(root: str) -> dict | None:
    """The checkout's commit, whether tracked files differ from it, and its tag; None outside a checkout.

    Read by the same code an editable install uses (``bot/_util/build_info.py``, standard library only),
    loaded by path: the build environment has none of the package's dependencies.
    """
    spec = importlib.util.spec_from_file_location("_replaybook_build_info", os.path.join(root, BUILD_INFO_CODE))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
        found = module.checkout_commit(Path(root))
    finally:
        del sys.modules[spec.name]
    return None if found is None else {"commit": found.commit, "dirty": found.dirty, "tag": found.tag}


class BuildInfoHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if version == "editable":  # an editable install reads git live (bot/_util/build_info.py)
            return
        info = git_info(self.root)
        if info is None:  # a build from an sdist: keep the sdist's own file (.gitignore would leave it out)
            if os.path.isfile(os.path.join(self.root, INFO)):
                build_data.setdefault("force_include", {})[os.path.join(self.root, INFO)] = INFO
            return
        fd, path = tempfile.mkstemp(prefix="replaybook-build-info-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(info, f)
        build_data.setdefault("force_include", {})[path] = INFO
        self._written = path  # removed in finalize, once the archive holds it

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        """Leave nothing in the temporary folder: the record is inside the archive now."""
        path = getattr(self, "_written", None)
        if path:
            self._written = None
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
