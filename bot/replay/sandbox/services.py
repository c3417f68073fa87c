"""Scenario services: local HTTP endpoints with programmable failures.

A scenario can declare, for example::

    services:
      - {kind: http, env: FLAKY_URL, fail_first: 2}
      - {kind: http, env: DOWN_URL, fail_always: true, status: 503}

Each service listens on 127.0.0.1 (a free port) in a thread. Its URL reaches the
agent through the named env var (pass ``service_env(services)`` as the
Sandbox's ``extra_env``), and its ``request_count`` feeds the
``http: {max_requests}`` check.
"""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.errors import BadInput


class HttpServiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["http"] = "http"
    env: str = Field(description="env var that carries the service URL to the agent")
    fail_first: int = Field(default=0, ge=0, description="fail this many requests, then succeed")
    fail_always: bool = False
    status: int = Field(default=503, ge=400, le=599, description="status of a failing response")
    body: Any = Field(default=None, description="JSON body of a successful response")

    @field_validator("env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not v or not (v[0].isalpha() or v[0] == "_") or not all(c.isalnum() or c == "_" for c in v):
            raise ValueError("must be an environment variable name such as FLAKY_URL")
        return v


def parse_service(raw: Mapping[str, Any] | HttpServiceConfig, where: str = "services") -> HttpServiceConfig:
    if isinstance(raw, HttpServiceConfig):
        return raw
    try:
        return HttpServiceConfig.model_validate(raw)
    except ValidationError as err:
        e = err.errors()[0]
        field = ".".join(str(p) for p in e["loc"]) or "(service)"
        raise BadInput(f"{where}.{field}: {e['msg']}; a service looks like {{kind: http, env: FLAKY_URL, fail_first: 2}}") from None


class HttpService:
    """One programmable endpoint. Every method and path counts as a request."""

    def __init__(self, config: HttpServiceConfig):
        self.config = config
        self._lock = threading.Lock()
        self._count = 0
        self.requests: list[tuple[str, str]] = []  # (method, path), for reports
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._count

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("start the service first (use it as a context manager)")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _next(self, method: str, path: str) -> tuple[int, Any]:
        with self._lock:
            self._count += 1
            n = self._count
            self.requests.append((method, path))
        c = self.config
        if c.fail_always or n <= c.fail_first:
            return c.status, {"error": f"replaybook service: request {n} fails by design"}
        return 200, {"ok": True} if c.body is None else c.body

    def start(self) -> "HttpService":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "HttpService":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler_for(service: HttpService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True  # one write for headers, one for the body: no 40 ms stall

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)  # drain, or the client may see a reset
            status, payload = service._next(self.command, self.path)
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _answer

        def log_message(self, *args: object) -> None:  # keep test and CLI output clean
            pass

    return Handler


@contextmanager
def start_services(configs: Sequence[Mapping[str, Any] | HttpServiceConfig]) -> Iterator[dict[str, HttpService]]:
    """Start every service; yields {env_name: service}; all are stopped on exit."""
    parsed = [parse_service(c, f"services[{i}]") for i, c in enumerate(configs)]
    names = [c.env for c in parsed]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BadInput(f"services: env {dupes[0]} is used twice; give each service its own env var")
    with ExitStack() as stack:
        yield {c.env: stack.enter_context(HttpService(c)) for c in parsed}


def service_env(services: Mapping[str, HttpService]) -> dict[str, str]:
    """The env vars that carry each service's URL to the agent (Sandbox ``extra_env``)."""
    return {name: svc.url for name, svc in services.items()}
