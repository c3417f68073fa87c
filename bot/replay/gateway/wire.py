"""The gateway's wire format: the Messages API's server-sent events and error bodies, usage as a stream reports it,
and an HTTP server that can close every connection it holds."""

from __future__ import annotations

import http.client
import json
import logging
import os
import select
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import HTTPServer
from typing import Any

from bot.replay.gateway import responses_api

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


class Server(HTTPServer):
    """Serves each connection in the thread that accepted it, and can close every connection it holds.

    ``socketserver``'s threading server accepts in one thread and starts a thread per connection: two
    thread hand-offs and a thread's start for every model call (the builtin agent opens a connection
    per call). Here every thread of the server is a worker: it waits for a connection, and once it has
    one, makes sure another worker is waiting (starting one only when none is) before serving it. A
    sequential agent is served by one thread for the whole trial; parallel or keep-alive connections
    get a worker each, as before; idle workers beyond ``_SPARE`` leave.
    """

    request_queue_size = 128  # socketserver's 5 resets connections when an agent opens many at once
    gateway: Any  # the Gateway it serves

    def __init__(self, *args: Any) -> None:
        self._open: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._waiting = 0  # workers waiting for a connection (or about to)
        self._workers: set[threading.Thread] = set()
        self._idle = threading.Condition(self._lock)
        super().__init__(*args)
        self.socket.setblocking(False)  # workers race for a connection: the loser's accept must not block

    def server_bind(self) -> None:
        """As HTTPServer's, less its reverse lookup of the address (``socket.getfqdn``): no handler here reads
        ``server_name``, and the lookup reads /etc/hosts, or asks a DNS server, at every gateway's start."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Be the first worker (``poll_interval`` is unused: ``shutdown`` wakes every worker at once)."""
        with self._lock:
            self._workers.add(threading.current_thread())
            self._waiting += 1
        self._work()

    def _work(self) -> None:
        # Exclusive: a connection wakes one waiting worker, not all of them (the wake pipe, all of them).
        poll = select.epoll()
        poll.register(self.socket, select.EPOLLIN | getattr(select, "EPOLLEXCLUSIVE", 0))
        poll.register(self._wake_r, select.EPOLLIN)
        try:
            while (got := self._next(poll)) is not None:
                self._serve(*got)
                with self._lock:
                    if self._waiting >= _SPARE:
                        return
                    self._waiting += 1
        finally:
            poll.close()
            with self._lock:
                self._workers.discard(threading.current_thread())
                self._idle.notify_all()

    def _next(self, poll: select.epoll) -> tuple[socket.socket, Any] | None:
        """The next connection for this worker, or None when the server stops (it then no longer waits)."""
        while True:
            with self._lock:
                if self._stopping:
                    self._waiting -= 1
                    return None
            if any(fd == self._wake_r for fd, _ in poll.poll()):
                continue  # the stop is seen above
            try:
                request, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                continue  # another worker took it
            except OSError:
                continue  # e.g. a connection reset before it was accepted; a closed socket means a stop
            with self._lock:
                if self._stopping:  # close_all has taken its list: no connection may begin after it
                    request.close()
                    continue
                self._open[request] = threading.current_thread()
                self._waiting -= 1
                spare = self._waiting == 0
            if spare:
                self._hire()
            return request, address

    def _hire(self) -> None:
        thread = threading.Thread(target=self._work, name="replay-gateway", daemon=True)
        with self._lock:
            self._workers.add(thread)
            self._waiting += 1
        thread.start()

    def _serve(self, request: socket.socket, address: Any) -> None:
        try:
            self.finish_request(request, address)
        except Exception:  # noqa: BLE001 - one connection's failure is not the server's
            self.handle_error(request, address)
        finally:
            self.shutdown_request(request)

    def shutdown(self) -> None:
        """Stop accepting, and wait until no worker waits for a connection (those serving one go on)."""
        with self._lock:
            self._stopping = True
            os.write(self._wake_w, b"x")
            self._idle.wait_for(lambda: self._waiting <= 0, timeout=5.0)

    def server_close(self) -> None:
        super().server_close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("gateway connection from %s ended with an error", client_address, exc_info=True)

    def close_all(self, timeout_s: float) -> None:
        """Stop, end every open connection and wait (at most ``timeout_s``) for every worker to leave."""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                os.write(self._wake_w, b"x")
            open_now, workers = list(self._open), list(self._workers)
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        for thread in workers:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        self.server_close()


_SPARE = 2  # a worker whose connection ended waits for the next unless this many do (one more is a start saved)


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
