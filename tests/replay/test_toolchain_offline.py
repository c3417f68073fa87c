"""A toolchain whose packages uv already holds builds with the package index gone.

The same requirements are built twice into two toolchain caches that share
one uv cache (a new replaybook version, or a cleaned toolchain cache): the
second build happens after the index has stopped, as on a machine that lost
its network, and must come from uv's cache.
"""

from __future__ import annotations

import functools
import http.server
import threading

import pytest
from helpers import hand_made_wheel

from bot.replay.sandbox import toolchain


class _Index(http.server.SimpleHTTPRequestHandler):
    """Pages that must be revalidated, as PyPI's are once their max-age (10 minutes) has passed."""

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "max-age=0, must-revalidate")
        super().end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def index(tmp_path):
    """(a running local package index holding rbprobe 1.0, a function that stops it)."""
    root = tmp_path / "index"
    root.mkdir()
    hand_made_wheel(root)
    handler = functools.partial(_Index, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    yield f"http://127.0.0.1:{server.server_address[1]}/simple", stop
    if thread.is_alive():
        stop()


def test_a_rebuild_with_the_index_gone_comes_from_uvs_cache(index, tmp_path, monkeypatch):
    url, stop = index
    if toolchain._uv() is None:
        pytest.skip("needs uv")
    monkeypatch.setenv("UV_INDEX_URL", url)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    first = toolchain.prepare(["rbprobe==1.0"], cache_dir=tmp_path / "cache-1", where="first")
    stop()
    second = toolchain.prepare(["rbprobe==1.0"], cache_dir=tmp_path / "cache-2", where="second")
    assert first.key == second.key and second.bin_dir != first.bin_dir
    assert (tmp_path / "cache-2" / "envs" / second.key / "lib").exists()
    site = list((tmp_path / "cache-2" / "envs" / second.key).glob("lib/python*/site-packages/rbprobe/__init__.py"))
    assert site and "VALUE = 42" in site[0].read_text()
