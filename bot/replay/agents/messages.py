"""The builtin agent's Messages API client: one JSON POST to the replay gateway, with retries.

The builtin agent only ever talks to the replay's own gateway on 127.0.0.1
(the gateway holds the real key and forwards upstream), so it needs no SDK:
importing the anthropic SDK was most of a replay's start-up (0.7 s of 1.3 s,
issue #17). It retries as the SDK does by default: twice, on 408, 409, 429
and 5xx answers and on a dropped connection, backing off from 0.5 s.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

ANTHROPIC_VERSION = "2023-06-01"
_RETRY = {408, 409, 429, 500, 502, 503, 504, 529}


class APIError(Exception):
    def __init__(self, message: str, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


class APITimeoutError(APIError):
    pass


def create(base_url: str, api_key: str, body: dict[str, Any], *, timeout: float, max_retries: int = 2) -> dict:
    """POST ``body`` to ``{base_url}/v1/messages``; the decoded reply, or APIError / APITimeoutError."""
    url = urlsplit(base_url)
    if url.scheme != "http" or not url.hostname:
        raise APIError(f"the builtin agent speaks plain HTTP to the replay gateway, not {base_url!r}")
    payload = json.dumps(body).encode()
    headers = {"content-type": "application/json", "x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}
    deadline = time.monotonic() + timeout
    for attempt in range(max_retries + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise APITimeoutError("model call timed out")
        try:
            status, data = _post(url.hostname, url.port or 80, url.path.rstrip("/") + "/v1/messages", payload,
                                 headers, left)
        except (socket.timeout, TimeoutError):
            raise APITimeoutError("model call timed out") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            if attempt == max_retries:
                raise APIError(f"connection error: {exc}") from None
            _backoff(attempt, deadline)
            continue
        if status == 200:
            try:
                return json.loads(data)
            except ValueError:
                raise APIError("the gateway's answer is not JSON", 200) from None
        if status in _RETRY and attempt < max_retries:
            _backoff(attempt, deadline)
            continue
        raise APIError(f"Error code: {status} - {_message(data)}", status)
    raise APIError("no answer")  # not reached


def _post(host: str, port: int, path: str, payload: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body=payload, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _backoff(attempt: int, deadline: float) -> None:
    time.sleep(max(0.0, min(0.5 * 2 ** attempt, 8.0, deadline - time.monotonic())))


def _message(data: bytes) -> str:
    try:
        error = json.loads(data).get("error") or {}
        return str(error.get("message") or error)[:300]
    except (ValueError, AttributeError):
        return data[:300].decode("utf-8", errors="replace")
