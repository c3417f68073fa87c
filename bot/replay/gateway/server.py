"""The model gateway: the only Messages API an agent under replay can reach.

The harness starts one ``Gateway`` per replay run and gives the agent
``gateway.agent_env()`` (base URL and a per-gateway token as its API key).
The gateway either answers from a scripted ``Policy`` (the SIMULATED model,
offline and deterministic) or forwards to a real upstream with the real key,
which only the gateway object holds. Either way it records every call as a
``ModelCall`` with tokens and cost counted the same way: from the ``usage``
of the JSON body, or of the ``message_start`` and ``message_delta`` events.
"""

from __future__ import annotations

import hmac
import http.client
import json
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol
from urllib.parse import urlsplit

from bot.model import pricing
from bot.replay import delivery
from bot.replay.gateway import responses_api
from bot.replay.gateway.budget import UNFINISHED, Budget, Reservation, without_provider_tools
from bot.replay.gateway.policy import SIMULATED_MODEL, Reply, estimate_input_tokens
from bot.replay.gateway.wire import (
    ResponsesUsage,
    Server,
    Usage,
    error_body,
    message_events,
    parse_events,
    read_events,
    sse,
)

log = logging.getLogger(__name__)

# Upstream response headers an agent may see; anything else stays behind.
_PASS_HEADERS = ("content-type", "request-id", "retry-after", "retry-after-ms", "x-should-retry")
RESPONSES_PATH = "/v1/responses"  # the OpenAI Responses API, for Codex CLI (bot/replay/gateway/responses_api.py)
MAX_BODY_BYTES = 32 << 20  # the Messages API's own request limit; the gateway reads no more than this


class Responder(Protocol):
    """The SIMULATED model: a ``Policy`` (agent tool calls) or an ``AnswerBook`` (text answers)."""

    def respond(self, request: dict[str, Any]) -> Reply: ...


@dataclass
class ModelCall:
    """One request to ``/v1/messages`` as the gateway saw it.

    ``model`` is the model the agent asked for (``simulated`` if none), also in
    scripted mode, where ``simulated`` is True and the cost is an estimate.
    """

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    duration_ms: int
    simulated: bool
    status: int
    stream: bool = False
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    stop_reason: str | None = None
    branch: str | None = None


@dataclass(frozen=True)
class Upstream:
    """Where a real model lives. ``api_key`` never leaves the gateway (it is not in the repr)."""

    api_key: str = field(repr=False)
    base_url: str = "https://api.anthropic.com"
    anthropic_version: str = "2023-06-01"
    timeout_s: float = 600.0


class Gateway:
    """A local Messages API endpoint for one replay run; use it as a context manager.

    Give exactly one of ``policy`` (scripted mode) or ``upstream``.
    ``latency_s`` delays every answer; ``fail_next`` lists HTTP statuses
    (e.g. ``[529, 500]``) returned, as Anthropic errors, to the next calls.
    ``on_call`` is called with each ``ModelCall`` once it is answered.
    ``watch`` is the rule under test: ``sightings`` records, per request, whether the agent put its text in
    the request's instructions (``delivery.seen``; ``task``: the scenario's task, whose text never counts). ``max_cost_usd`` is the run's budget: each request reserves its worst
    case first (``Budget.reserve``), a request the budget cannot pay for is refused
    in its API's error shape, and ``budget_spent`` is set, so the harness
    reports the run as unscored. Parallel requests cannot spend it twice.
    """

    def __init__(
        self,
        policy: Responder | None = None,
        *,
        upstream: Upstream | None = None,
        latency_s: float = 0.0,
        fail_next: Iterable[int] = (),
        on_call: Callable[[ModelCall], None] | None = None,
        max_cost_usd: float | None = None,
        watch: str = "",
        task: str = "",
    ) -> None:
        if (policy is None) == (upstream is None):
            raise ValueError("Gateway needs exactly one of policy= (scripted) or upstream= (real model)")
        self.policy, self._upstream = policy, upstream
        self.mode = "scripted" if policy is not None else "upstream"
        self.token = "rb-gw-" + secrets.token_urlsafe(24)
        self.latency_s = latency_s
        self.max_cost_usd = max_cost_usd
        self.budget = Budget(max_cost_usd)
        self.calls: list[ModelCall] = []
        # The rule under test (``bot.replay.delivery``): whether each request held its text, in order.
        self.watch, self.task = delivery.normalise(watch), task  # the task's own text never delivers it
        self.sightings: list[bool] = []
        self.callback_errors: list[BaseException] = []
        self._fail_next = deque(fail_next)
        self._on_call = on_call
        self._lock = threading.Lock()
        self._server = Server(("127.0.0.1", 0), _Handler)
        self._server.gateway = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="replay-gateway", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, drop open connections and wait for the server's threads."""
        self._server.close_all(timeout_s=5.0 + self.latency_s)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def agent_env(self) -> dict[str, str]:
        """Environment that points an agent (anthropic SDK, Claude Code; OpenAI SDKs) at this gateway."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": self.token,
                "OPENAI_BASE_URL": self.url + "/v1", "OPENAI_API_KEY": self.token}

    @property
    def total_cost_usd(self) -> float:
        return round(sum(c.cost_usd for c in self.calls), 8)

    @property
    def total_tokens(self) -> int:
        return sum(c.input_tokens + c.output_tokens for c in self.calls)

    def _authorized(self, headers: Any) -> bool:
        """True when the request carries this gateway's token as x-api-key or as a Bearer token."""
        offered = [headers.get("x-api-key") or ""]
        auth = headers.get("authorization") or ""
        if auth[:7].lower() == "bearer ":
            offered.append(auth[7:].strip())
        return any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered)

    @property
    def budget_spent(self) -> bool:
        """A request was refused, or an answer was cut short, for the budget: the run is unscored."""
        return self.budget.spent

    def _take_failure(self) -> int | None:
        with self._lock:
            return self._fail_next.popleft() if self._fail_next else None

    def _record(self, request: dict[str, Any], usage: Usage, *, status: int, started: float,
               simulated: bool, stream: bool, branch: str | None = None,
               grant: Reservation | None = None, unfinished: bool = False) -> ModelCall:
        """Record one answered call, settling its reservation (``Budget.settle``, which prices ``unfinished``)."""
        model = str(request.get("model") or SIMULATED_MODEL)
        cost = pricing.cost_usd(
            model, usage.input_tokens, usage.output_tokens,
            cache_creation_input_tokens=usage.cache_creation_input_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens,
        )
        cost = self.budget.settle(grant, cost, usage.stop_reason, unfinished=unfinished)
        call = ModelCall(
            model=model, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cost_usd=cost, duration_ms=int((time.monotonic() - started) * 1000), simulated=simulated,
            status=status, stream=stream, cache_creation_input_tokens=usage.cache_creation_input_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens, stop_reason=usage.stop_reason, branch=branch,
        )
        # One lock keeps `calls` and the callback (the trace writer) in the same order.
        with self._lock:
            self.calls.append(call)
            if self._on_call is not None:
                try:
                    self._on_call(call)
                except Exception as exc:  # the agent must still get its answer; the harness reads callback_errors
                    log.exception("on_call callback failed")
                    self.callback_errors.append(exc)
        return call

    def _upstream_request(
        self, path: str, body: bytes, headers: Any
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send ``body`` to the upstream with the real key; the agent's own credentials are not forwarded."""
        up = self._upstream
        assert up is not None
        parts = urlsplit(up.base_url)
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(parts.netloc, timeout=up.timeout_s)
        out = {
            "content-type": "application/json",
            "accept": headers.get("accept") or "application/json",
            "anthropic-version": headers.get("anthropic-version") or up.anthropic_version,
            "x-api-key": up.api_key,
        }
        if path == RESPONSES_PATH:  # OpenAI: a Bearer key, no Anthropic headers
            out = {"content-type": "application/json", "accept": out["accept"], "authorization": f"Bearer {up.api_key}"}
        elif headers.get("anthropic-beta"):
            out["anthropic-beta"] = headers["anthropic-beta"]
        try:
            conn.request("POST", parts.path.rstrip("/") + path, body=body, headers=out)
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def _scrub(self, data: bytes) -> bytes:
        """Remove the real key from anything bound for the agent."""
        if self._upstream is None or not self._upstream.api_key:
            return data
        return data.replace(self._upstream.api_key.encode(), b"[redacted]")


class _Handler(BaseHTTPRequestHandler):
    # Headers and body are separate writes; with Nagle on, the body waits ~40 ms
    # for the client's delayed ACK on every call (measured in bench/replay_overhead.py).
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server_version = "replaybook-gateway"
    timeout = 300  # idle keep-alive connections are dropped after this
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("gateway: " + format, *args)

    # --- plumbing ---------------------------------------------------------

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_bytes(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _start_stream(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    # --- routes -----------------------------------------------------------

    def do_HEAD(self) -> None:
        self._send_bytes(200, b"", "text/plain")

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/", "/health", "/v1"):
            self._send_json(200, {"ok": True, "service": "replaybook model gateway"})
        else:
            self._send_json(404, error_body(404, f"no such endpoint: GET {path}"))

    def do_POST(self) -> None:
        if int(self.headers.get("content-length") or 0) > MAX_BODY_BYTES:  # never read into memory
            self.close_connection = True  # the unread body would desync a keep-alive connection
            message = f"request body over {MAX_BODY_BYTES >> 20} MB"
            self._send_json(413, error_body(413, message), {"connection": "close"})
            return
        raw = self._read_body()  # always drain it, or the keep-alive connection desyncs
        path = self.path.split("?", 1)[0]
        gateway = self.server.gateway
        if not gateway._authorized(self.headers):
            self._send_json(401, error_body(401, "invalid x-api-key: use the token this gateway gave you"))
            return
        if path not in ("/v1/messages", "/v1/messages/count_tokens", RESPONSES_PATH):
            self._send_json(404, error_body(404, f"no such endpoint: POST {path}"))
            return
        try:
            request = json.loads(raw or b"null")
            if not isinstance(request, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as exc:
            self._send_json(400, error_body(400, f"request body must be a JSON object: {exc}"))
            return
        if path.endswith("/count_tokens"):
            # An estimate in both modes: it is not a model call and costs nothing.
            self._send_json(200, {"input_tokens": estimate_input_tokens(request)})
            return
        self._messages(gateway, request, raw, path)

    def _messages(self, gateway: Gateway, request: dict[str, Any], raw: bytes, path: str = "/v1/messages") -> None:
        started = time.monotonic()
        if gateway.watch:
            hit = delivery.seen(request, gateway.watch, gateway.task)
            with gateway._lock:
                gateway.sightings.append(hit)
        stream = bool(request.get("stream"))
        simulated = gateway.mode == "scripted"
        if gateway.latency_s:
            time.sleep(gateway.latency_s)
        responses = path == RESPONSES_PATH
        if not simulated:
            allowed = without_provider_tools(request, responses)
            if allowed is not request:
                request, raw = allowed, json.dumps(allowed).encode()
        reserved = gateway.budget.reserve(request, raw, model=str(request.get("model") or SIMULATED_MODEL),
                                          responses=responses)
        if reserved is None:
            self._refuse_budget(gateway, path)
            return
        grant, limited = reserved
        if limited is not request:
            request, raw = limited, json.dumps(limited).encode()
        try:
            status = gateway._take_failure()
            if status is not None:
                gateway._record(request, Usage(), status=status, started=started, simulated=simulated, stream=stream,
                                grant=grant)
                # retry-after-ms keeps SDK retries fast in tests, as the real API's retry-after does.
                self._send_json(status, error_body(status, f"injected failure {status}"), {"retry-after-ms": "10"})
            elif simulated and path == RESPONSES_PATH:
                self._scripted_responses(gateway, request, started, stream, grant)
            elif simulated:
                self._scripted(gateway, request, started, stream, grant)
            else:
                self._forward(gateway, request, raw, started, stream, path, grant)
        finally:
            gateway.budget.release(grant)

    def _refuse_budget(self, gateway: Gateway, path: str) -> None:
        """The refusal in the endpoint's own error shape; neither SDK retries it (``x-should-retry``)."""
        message = f"replaybook: this run's budget of ${gateway.max_cost_usd:.2f} is spent"
        no_retry = {"x-should-retry": "false"}
        if path == RESPONSES_PATH:  # OpenAI's answer when the money is gone; Codex does not retry it
            error = {"message": message, "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
            self._send_json(429, {"error": error}, no_retry)
        else:
            self._send_json(400, error_body(400, message), no_retry)

    # Each answer is recorded before its last bytes go out, so a client that
    # has its response always finds the call in `gateway.calls`.

    def _scripted(self, gateway: Gateway, request: dict[str, Any], started: float, stream: bool,
                  grant: Reservation | None = None) -> None:
        assert gateway.policy is not None
        reply = gateway.policy.respond(request)
        usage = Usage()
        record = dict(status=200, started=started, simulated=True, stream=stream, branch=reply.branch, grant=grant)
        if not stream:
            usage.add_message(reply.message)
            gateway._record(request, usage, **record)
            self._send_json(200, reply.message)
            return
        events = list(message_events(reply.message))
        for event in events:
            usage.add_event(event)
        self._start_stream()
        for event in events[:-1]:
            self._chunk(sse(event))
        gateway._record(request, usage, **record)
        self._chunk(sse(events[-1]))
        self._end_stream()

    def _scripted_responses(self, gateway: Gateway, request: dict[str, Any], started: float, stream: bool,
                            grant: Reservation | None = None) -> None:
        """The Responses API (Codex): the same simulated model, through ``responses_api``'s translation."""
        assert gateway.policy is not None
        reply = gateway.policy.respond(responses_api.to_messages(request))
        usage = Usage()
        usage.add_message(reply.message)
        record = dict(status=200, started=started, simulated=True, stream=stream, branch=reply.branch, grant=grant)
        response = responses_api.from_message(reply.message, request)
        if not stream:
            gateway._record(request, usage, **record)
            self._send_json(200, response)
            return
        events = list(responses_api.response_events(response))
        self._start_stream()
        for event in events[:-1]:
            self._chunk(responses_api.sse(event))
        gateway._record(request, usage, **record)
        self._chunk(responses_api.sse(events[-1]))
        self._end_stream()

    def _forward(self, gateway: Gateway, request: dict[str, Any], raw: bytes, started: float, stream: bool,
                 path: str = "/v1/messages", grant: Reservation | None = None) -> None:
        usage = ResponsesUsage() if path == RESPONSES_PATH else Usage()
        record = dict(started=started, simulated=False, stream=stream, grant=grant)
        try:
            conn, resp = gateway._upstream_request(path, raw, self.headers)
        except (OSError, http.client.HTTPException) as exc:
            gateway._record(request, usage, status=502, **record)
            self._send_json(502, error_body(502, f"upstream unreachable: {exc.__class__.__name__}"))
            return
        headers = {k: v for k, v in resp.getheaders() if k.lower() in _PASS_HEADERS and k.lower() != "content-type"}
        try:
            if "text/event-stream" in (resp.getheader("content-type") or ""):
                def record_call(cut: bool) -> None:  # cut: ended before its final usage (billed, not seen)
                    unfinished = resp.status == 200 and (cut or usage.stop_reason in UNFINISHED)
                    gateway._record(request, usage, status=resp.status, unfinished=unfinished, **record)

                self._relay_stream(gateway, resp, headers, usage, record_call)
            else:
                data = resp.read()
                if resp.status == 200:
                    try:
                        usage.add_message(json.loads(data))
                    except ValueError:
                        log.warning("upstream sent a 200 that is not JSON; usage not counted")
                # A 200 with no final usage (a background response still "queued") is billed later: its worst case.
                unfinished = resp.status == 200 and usage.stop_reason in UNFINISHED
                gateway._record(request, usage, status=resp.status, unfinished=unfinished, **record)
                ctype = resp.getheader("content-type") or "application/json"
                self._send_bytes(resp.status, gateway._scrub(data), ctype, headers)
        finally:
            conn.close()

    def _relay_stream(
        self, gateway: Gateway, resp: http.client.HTTPResponse, headers: dict[str, str],
        usage: Usage, record: Callable[[bool], None],
    ) -> None:
        """Pass SSE events on as they arrive, counting usage; ``record(cut)`` runs exactly once."""
        recorded = False
        try:
            self._start_stream(resp.status, headers)
            held = b""  # one event behind, so the record can precede the last one
            for event_bytes in read_events(resp):
                for event in parse_events(event_bytes):
                    usage.add_event(event)
                self._chunk(held)
                held = gateway._scrub(event_bytes)
            recorded = True
            record(False)
            self._chunk(held)
            self._end_stream()
        finally:
            if not recorded:  # the agent hung up mid-stream: the tokens were still spent
                record(True)


