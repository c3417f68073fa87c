"""The pytest fixtures shared across test modules, registered once in ``tests/conftest.py``."""

from __future__ import annotations

import json
import os

import pytest
from fakes.github import FakeGitHub

from bot.replay.gateway.answers import AnswerBook
from bot.replay.gateway.server import Gateway
from support.webhooks import CACHE, EXAMPLES_VERSION, fetch_examples

_ACTIONS_ENV = {"GITHUB_REPOSITORY": "octo/app", "GITHUB_TOKEN": "t", "REPLAYBOOK_GITHUB_BACKOFF": "0",
                "REPLAYBOOK_GITHUB_THROTTLE": "0"}


@pytest.fixture
def gh():
    """The fake GitHub (octo/app) served on 127.0.0.1."""
    with FakeGitHub("octo", "app") as fake:
        yield fake


@pytest.fixture
def event(gh, tmp_path, monkeypatch):
    """Point the CLI at ``gh``, as Actions would; returns a function that writes the event's payload."""
    path = tmp_path / "event.json"
    for name, value in {"GITHUB_EVENT_PATH": str(path), "GITHUB_API_URL": gh.url, **_ACTIONS_ENV}.items():
        monkeypatch.setenv(name, value)
    for name in ("GITHUB_STEP_SUMMARY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    def deliver(name: str, payload: dict) -> None:
        monkeypatch.setenv("GITHUB_EVENT_NAME", name)
        path.write_text(json.dumps(payload), encoding="utf-8")

    return deliver


@pytest.fixture
def model(monkeypatch):
    """A scripted model at ANTHROPIC_BASE_URL; ``model.book`` holds its answers."""
    book = AnswerBook()
    with Gateway(book) as gateway:
        monkeypatch.setenv("ANTHROPIC_API_KEY", gateway.token)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", gateway.url)
        gateway.book = book
        yield gateway


@pytest.fixture(scope="session")
def examples() -> dict[str, list[dict]]:
    """GitHub's example payloads by event name, fetched once into ~/.cache."""
    if os.environ.get("REPLAYBOOK_SKIP_WEBHOOK_EXAMPLES") == "1" and not (CACHE / "index.json").exists():
        pytest.skip("REPLAYBOOK_SKIP_WEBHOOK_EXAMPLES=1: skipping tests on GitHub's example payloads")
    try:
        path, error = fetch_examples(), None
    except Exception as exc:  # noqa: BLE001 - any failure gets the same advice
        path, error = None, exc
    if path is None:
        pytest.fail(
            f"could not fetch @octokit/webhooks-examples@{EXAMPLES_VERSION} with npm ({error}). "
            "Install npm (and allow registry access once; it is cached in ~/.cache/replaybook-tests), "
            "or set REPLAYBOOK_SKIP_WEBHOOK_EXAMPLES=1 to skip these tests.",
            pytrace=False,
        )
    return {entry["name"]: entry["examples"] for entry in json.loads(path.read_text(encoding="utf-8"))}
