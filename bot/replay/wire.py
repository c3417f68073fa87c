"""The gateway's wire format: the Messages API's server-sent events and error bodies, usage as a stream reports it,
and an HTTP server that can close every connection it holds."""

from __future__ import annotations

import http.client
import json
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

from bot.replay import responses_api

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    529: "overloaded_error",
}


_DELTA_CHARS = 40  # size of each simulated stream delta; several per block exercises client assembly

log = logging.getLogger(__name__)


class Usage:
    """Token usage of one response, fed a message body or its stream events."""

    def __init__(self) -> None:
        self.input_tokens = self.output_tokens = 0
        self.cache_creation_input_tokens = self.cache_read_input_tokens = 0
        self.stop_reason: str | None = None

    def _take(self, usage: dict[str, Any] | None) -> None:
        # Counts in message_delta are cumulative, so later values replace earlier ones.
        for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            if isinstance((usage or {}).get(key), int):
                setattr(self, key, usage[key])

    def add_message(self, body: dict[str, Any]) -> None:
        self._take(body.get("usage"))
        self.stop_reason = body.get("stop_reason", self.stop_reason)

    def add_event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "message_start":
            self.add_message(event.get("message") or {})
        elif event.get("type") == "message_delta":
            self._take(event.get("usage"))
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason


class ResponsesUsage(Usage):
    """Usage of a Responses API answer (Codex): from the body or its ``response.completed`` event."""

    def add_message(self, body: dict[str, Any]) -> None:
        responses_api.add_usage(self, body)

    add_event = add_message


def error_body(status: int, message: str) -> dict[str, Any]:
    """An Anthropic-shaped error payload."""
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def message_events(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The stream events that deliver ``message``, in Messages API order."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield {"type": "message_start", "message": start}
    for i, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            yield {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}}
            for part in _chunks(json.dumps(block["input"])):
                delta = {"type": "input_json_delta", "partial_json": part}
                yield {"type": "content_block_delta", "index": i, "delta": delta}
        else:
            yield {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            for part in _chunks(block["text"]):
                yield {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": part}}
        yield {"type": "content_block_stop", "index": i}
    end = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield {"type": "message_delta", "delta": end, "usage": {"output_tokens": usage["output_tokens"]}}
    yield {"type": "message_stop"}


def _chunks(text: str) -> list[str]:
    return [text[i : i + _DELTA_CHARS] for i in range(0, len(text), _DELTA_CHARS)] or [""]


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class Server(ThreadingHTTPServer):
    """Tracks its connections so close() can end keep-alive handlers at once."""

    daemon_threads = True
    block_on_close = False  # we join ourselves, with a timeout
    request_queue_size = 128  # socketserver's 5 resets connections when an agent opens many at once
    gateway: Any  # the Gateway it serves

    def __init__(self, *args: Any) -> None:
        self._open: dict[socket.socket, threading.Thread] = {}
        self._open_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._stopped = threading.Event()
        super().__init__(*args)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """socketserver's loop, but ``shutdown`` wakes it at once: its own loop wakes only at the next
        ``poll_interval``, on average half of it added to the end of every replay."""
        try:
            with selectors.PollSelector() as sel:
                sel.register(self, selectors.EVENT_READ)
                sel.register(self._wake_r, selectors.EVENT_READ)
                while True:
                    ready = {key.fd for key, _ in sel.select()}
                    if self._wake_r in ready:
                        return
                    self._handle_request_noblock()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` (running in another thread) and wait until it has returned."""
        os.write(self._wake_w, b"x")
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address), daemon=True)
        with self._open_lock:
            self._open[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("gateway connection from %s ended with an error", client_address, exc_info=True)

    def close_all(self, timeout_s: float) -> None:
        with self._open_lock:
            open_now = dict(self._open)
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        for thread in open_now.values():
            thread.join(max(0.0, deadline - time.monotonic()))
        self.server_close()


def read_events(resp: http.client.HTTPResponse) -> Iterator[bytes]:
    """Raw SSE events (up to and including the blank line), as they arrive."""
    buf = b""
    while True:
        line = resp.readline()
        if not line:
            break
        buf += line
        if line in (b"\n", b"\r\n"):
            yield buf
            buf = b""
    if buf:
        yield buf


def parse_events(event_bytes: bytes) -> Iterator[dict[str, Any]]:
    for line in event_bytes.splitlines():
        if line.startswith(b"data:"):
            try:
                event = json.loads(line[5:].strip())
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event
