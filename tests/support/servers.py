"""A fake HTTP server of our own on 127.0.0.1, served from a thread for the length of a test."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], server: type[ThreadingHTTPServer] = ThreadingHTTPServer
            ) -> Iterator[str]:
    """Serve ``handler`` on a free port; yield its base URL; shut it down after."""
    httpd = server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextlib.contextmanager
def recording(handler: type[BaseHTTPRequestHandler]) -> Iterator[tuple[str, list[dict]]]:
    """Serve a handler that appends what it saw to its class's ``received``, emptied for this test."""
    handler.received = []
    with serving(handler) as url:
        yield url, handler.received


def recorded(handler: type[BaseHTTPRequestHandler]):
    """A fixture serving ``handler`` as :func:`recording` does: ``name = recorded(FakeX)`` in a test module."""

    @pytest.fixture
    def fixture() -> Iterator[tuple[str, list[dict]]]:
        with recording(handler) as served:
            yield served

    return fixture


class Handler(BaseHTTPRequestHandler):
    """A quiet handler with the replies the fakes share: a body, JSON, and a chunked server-sent stream."""

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def reply(self, status: int, data: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reply_json(self, status: int, value: object) -> None:
        self.reply(status, json.dumps(value).encode())

    def reply_events(self, events: list[dict]) -> None:
        """Server-sent events, one chunk each, as the Messages and Responses APIs stream them."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events:
            data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
