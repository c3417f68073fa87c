"""The real local model for tests: found once, at collection (before the autouse fixture moves HOME), and served
once per session. Tests that need it take ``local_model`` or ``local_server``; with the model not installed they
skip, saying how to install it, unless ``REPLAYBOOK_REQUIRE_LOCAL_MODEL=1`` (CI sets it), which fails them."""

from __future__ import annotations

import os

import pytest

from bot.model.local import install

try:
    INSTALLED: install.LocalModel | None = install.locate()
    WHY = ""
except install.ModelNotInstalled as exc:
    INSTALLED, WHY = None, exc.message

REQUIRED = os.environ.get("REPLAYBOOK_REQUIRE_LOCAL_MODEL") == "1"


@pytest.fixture(scope="session")
def local_model() -> install.LocalModel:
    if INSTALLED is None:
        if REQUIRED:
            pytest.fail(f"REPLAYBOOK_REQUIRE_LOCAL_MODEL=1 but {WHY}")
        pytest.skip(WHY)
    return INSTALLED


@pytest.fixture(scope="session")
def local_server(local_model):
    """The local model served (sandboxed engine, seed 7) for the whole session; key "test-key"."""
    from bot.model.local.server import serve
    from bot.replay.sandbox.isolation import engine_jail

    with serve(local_model, jail=engine_jail, seed=7, api_key="test-key", context_size=4096) as running:
        yield running
