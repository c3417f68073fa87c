"""A fake HTTP server of our own on 127.0.0.1, served from a thread for the length of a test."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
