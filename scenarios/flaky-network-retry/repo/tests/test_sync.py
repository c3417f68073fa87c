import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import sync

LIVE = {"as_of": "2026-08-03", "currency": "EUR", "items": [{"sku": "MUG-01", "price_cents": 1190}]}


@pytest.fixture
def pricing():
    """A local pricing service; set ``.status`` to make it fail."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(LIVE).encode() if server.status == 200 else b"unavailable"
            self.send_response(server.status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.status = 200
    server.url = f"http://127.0.0.1:{server.server_port}/v2/prices"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_writes_the_live_prices(pricing, tmp_path):
    out = tmp_path / "prices.json"
    assert sync.sync(pricing.url, out=out) == "service"
    assert json.loads(out.read_text()) == LIVE


def test_falls_back_to_the_snapshot_when_the_service_is_down(pricing, tmp_path):
    pricing.status = 503
    out = tmp_path / "prices.json"
    assert sync.sync(pricing.url, out=out) == "fallback"
    assert json.loads(out.read_text()) == json.loads(sync.FALLBACK.read_text())


def test_falls_back_when_nothing_listens(tmp_path):
    out = tmp_path / "prices.json"
    assert sync.sync("http://127.0.0.1:9/v2/prices", out=out) == "fallback"
    assert out.exists()
