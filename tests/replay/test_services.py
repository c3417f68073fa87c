"""Scenario services over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bot.errors import BadInput
from bot.replay.sandbox.workspace import Sandbox
from bot.replay.sandbox.services import (
    HttpService,
    HttpServiceConfig,
    service_env,
    start_services,
)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("REPLAYBOOK_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "shim-cache"))


def get(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_fail_first_then_succeed_with_body():
    with HttpService(HttpServiceConfig(env="FLAKY_URL", fail_first=2, body={"rate": 7})) as svc:
        statuses = [get(svc.url + "/v1/limits")[0] for _ in range(4)]
        assert get(svc.url)[1] == {"rate": 7}
        assert svc.request_count == 5
    assert statuses == [503, 503, 200, 200]


def test_fail_always_with_status():
    with start_services([{"kind": "http", "env": "DOWN_URL", "fail_always": True, "status": 500}]) as svcs:
        svc = svcs["DOWN_URL"]
        assert [get(svc.url)[0] for _ in range(3)] == [500, 500, 500]
        req = urllib.request.Request(svc.url, data=b'{"x": 1}', method="POST")
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(req, timeout=5)
        assert svc.request_count == 4


def test_counter_is_safe_under_concurrency():
    with HttpService(HttpServiceConfig(env="X_URL")) as svc:
        def hammer():
            for _ in range(12):
                get(svc.url)

        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert svc.request_count == 96


def test_shutdown_is_clean():
    with start_services([{"env": "A_URL"}, {"env": "B_URL", "fail_first": 1}]) as svcs:
        urls = service_env(svcs)
        assert set(urls) == {"A_URL", "B_URL"} and urls["A_URL"] != urls["B_URL"]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(urls["A_URL"], timeout=1)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"env": "X", "fail_first": -1}, r"services\[0\]\.fail_first"),
        ({"env": "not a name"}, r"services\[0\]\.env"),
        ({"env": "X", "retries": 3}, r"services\[0\]\.retries"),
        ({"kind": "grpc", "env": "X"}, r"services\[0\]\.kind"),
    ],
)
def test_bad_config_names_the_field(config, field):
    with pytest.raises(BadInput, match=field):
        with start_services([config]):
            pass


def test_duplicate_env_is_refused():
    with pytest.raises(BadInput, match="FLAKY_URL is used twice"):
        with start_services([{"env": "FLAKY_URL"}, {"env": "FLAKY_URL"}]):
            pass


def test_url_reaches_the_agent_through_extra_env(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("x\n")
    agent = (
        "import os, urllib.request, urllib.error\n"
        "for _ in range(3):\n"
        "    try: urllib.request.urlopen(os.environ['FLAKY_URL'], timeout=5); print('ok'); break\n"
        "    except urllib.error.HTTPError as e: print(e.code)\n"
    )
    with start_services([{"env": "FLAKY_URL", "fail_first": 2}]) as svcs:
        with Sandbox(repo, extra_env=service_env(svcs), service_ports=[s.port for s in svcs.values()]) as sb:
            r = sb.run([sys.executable, "-c", agent], timeout_s=10)
        assert r.stdout.split() == ["503", "503", "ok"]
        assert svcs["FLAKY_URL"].request_count == 3
