"""The local model server: an HTTP front on 127.0.0.1 (ours, in Python) before the sandboxed engine.

``serve(model, jail=...)`` starts the engine (:mod:`bot.model.local.engine`) and the front, and yields a
:class:`Running` with the ``base_url`` clients use, the ``model_id`` and :meth:`Running.stats`. The front speaks
the Messages API (``POST /v1/messages``, :mod:`messages_api`) and Chat Completions (``POST /v1/chat/completions``,
:mod:`openai_api`); it renders Qwen2.5's chat format and parses the tool calls itself (:mod:`chatml`).

Up to ``sequences`` requests at once (the engine's sequences of one context, decoded together; each request takes
the free sequence that shares the longest prefix with it, so a trial's turns and the trials of one arm reuse what
is evaluated, and a prefix evaluated on one sequence reaches another through a state snapshot), the rest waiting
their turn;
``max_tokens`` is capped; a request that does not finish by its deadline gets an error answer, never a hang.
Sampling: Qwen's recommended temperature 0.7, top_p 0.8, top_k 20 unless the request says otherwise; the seed of
call ``i`` is ``seed + i`` when ``serve`` is given one (reproducible runs), else random.
"""

from __future__ import annotations

import contextlib
import json
import random
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.model.local import chatml, messages_api, openai_api
from bot.model.local.engine import Engine, EngineError, Jail
from bot.model.local.install import LocalModel
from bot.model.local.messages_api import Request, RequestError

DEFAULT_SAMPLING = {"temperature": 0.7, "top_p": 0.8, "top_k": 20}
MAX_TOKENS_CAP = 2048
REQUEST_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Call:
    """One answer: tokens (prompt, evaluated anew, reused from the last prompt, generated) and seconds.
    ``snapshot_tokens``: of the reused tokens, those a state snapshot brought (another sequence evaluated them);
    ``held_s``: waiting for another request's snapshot; ``snapshot_s``: loading and saving snapshots."""

    prompt_tokens: int
    evaluated_tokens: int
    reused_tokens: int
    output_tokens: int
    prompt_s: float
    gen_s: float
    stop_reason: str
    sequence: int = 0  # the engine's sequence that answered
    snapshot_tokens: int = 0
    held_s: float = 0.0
    snapshot_s: float = 0.0


@dataclass
class Stats:
    calls: list[Call] = field(default_factory=list)
    load_s: float = 0.0  # the model's load inside the engine, at its last start
    start_s: float = 0.0  # the wall time from starting the sandbox to the model being ready
    engine_starts: int = 0
    cpu_s: float = 0.0  # CPU seconds of the engine processes (user + system)

    @property
    def input_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.calls)

    @property
    def prompt_s(self) -> float:
        return sum(c.prompt_s for c in self.calls)

    @property
    def snapshot_tokens(self) -> int:
        return sum(c.snapshot_tokens for c in self.calls)

    @property
    def gen_s(self) -> float:
        return sum(c.gen_s for c in self.calls)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "prompt_s": self.prompt_s, "gen_s": self.gen_s, "snapshot_tokens": self.snapshot_tokens}


@dataclass
class Running:
    base_url: str
    model_id: str
    label: str
    _front: "_Front"

    def stats(self) -> Stats:
        return self._front.stats()

    def abort(self) -> None:
        """End the engine at once (Ctrl-C): running answers fail now, and no later request starts it again."""
        self._front.engine.abort()


@dataclass
class _Generated:
    answer: chatml.Answer
    stop_reason: str  # Messages API terms: end_turn, tool_use, max_tokens, stop_sequence; "cancelled": the client left
    stop_sequence: str | None
    prompt_tokens: int
    reused_tokens: int
    output_tokens: int


class _Front:
    def __init__(self, model: LocalModel, engine: Engine, *, api_key: str | None, seed: int | None,
                 max_tokens_cap: int, timeout_s: float):
        self.model, self.engine, self.api_key = model, engine, api_key
        self.seed, self.max_tokens_cap, self.timeout_s = seed, max_tokens_cap, timeout_s
        self.lock = threading.BoundedSemaphore(engine.sequences)  # one request per sequence
        self.calls: list[Call] = []
        self.verbatim: dict[str, str] = {}  # chatml.key of a recent answer -> the text the model wrote

    def stats(self) -> Stats:
        return Stats(calls=list(self.calls), load_s=self.engine.load_s, start_s=self.engine.start_s,
                     engine_starts=self.engine.starts, cpu_s=self.engine.cpu_seconds())

    def generate(self, request: Request, on_prompt, on_text, gone: Callable[[], bool] = lambda: False) -> _Generated:
        """Run ``request`` on the engine; ``on_prompt(prompt_tokens, reused)`` once the prompt is read,
        ``on_text(streamable)`` as text comes. Once ``gone()`` (the client hung up: a replay that timed out) the
        engine stops, so the next request is not kept waiting behind an answer nobody reads."""
        deadline = time.monotonic() + self.timeout_s
        if not self.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise EngineError("the model was busy with other requests until this one's deadline", "timeout")
        try:
            prompt = chatml.render(request.system, request.turns, request.tools, self.verbatim)
            sampling = {**DEFAULT_SAMPLING, **request.sampling}
            if "seed" not in sampling:
                sampling["seed"] = (self.seed + len(self.calls)) if self.seed is not None else random.randrange(2**31)
            limit = min(request.max_tokens or self.max_tokens_cap, self.max_tokens_cap)
            raw, hit = "", None

            def stop_hit() -> bool:
                return hit is not None or gone()

            done: dict[str, Any] = {}
            sequence = 0
            extra = {"json_schema": request.json_schema} if request.json_schema is not None else None
            for event in self.engine.complete(prompt, max_tokens=limit, sampling=sampling, deadline=deadline,
                                              should_stop=stop_hit, extra=extra):
                if event["type"] == "prompt":
                    sequence = int(event.get("sequence", 0))
                    on_prompt(int(event["prompt_tokens"]), int(event["reused_tokens"]))
                elif event["type"] == "delta" and hit is None:
                    raw += str(event.get("text", ""))
                    for stop in request.stop:
                        if stop in raw:
                            hit, raw = stop, raw[:raw.index(stop)]
                    on_text(chatml.streamable(raw, bool(request.tools)))
                elif event["type"] == "done":
                    done = event
            answer = chatml.parse(raw, request.tools)
            self._remember(answer, raw)
            reason = ("stop_sequence" if hit else "cancelled" if done.get("stop_reason") == "cancelled"
                      else "tool_use" if answer.tool_calls
                      else "max_tokens" if done.get("stop_reason") == "max_tokens" else "end_turn")
            call = Call(prompt_tokens=int(done.get("prompt_tokens", 0)), evaluated_tokens=int(done.get("evaluated_tokens", 0)),
                        reused_tokens=int(done.get("reused_tokens", 0)), output_tokens=int(done.get("output_tokens", 0)),
                        prompt_s=float(done.get("prompt_s", 0.0)), gen_s=float(done.get("gen_s", 0.0)),
                        stop_reason=reason, sequence=sequence, snapshot_tokens=int(done.get("snapshot_tokens", 0)),
                        held_s=float(done.get("held_s", 0.0)),
                        snapshot_s=float(done.get("load_s", 0.0)) + float(done.get("save_s", 0.0)))
            self.calls.append(call)
            return _Generated(answer, reason, hit, call.prompt_tokens, call.reused_tokens, call.output_tokens)
        finally:
            self.lock.release()


    def _remember(self, answer: chatml.Answer, raw: str) -> None:
        """Keep what the model wrote, so the answer sent back in the next request is rendered as those very
        tokens (the evaluated prefix then runs through it) rather than as its parsed, re-serialised form."""
        self.verbatim[chatml.key(answer.text, answer.tool_calls)] = raw
        while len(self.verbatim) > 64:
            self.verbatim.pop(next(iter(self.verbatim)))


def _status(error: EngineError) -> int:
    return {"too_long": 400, "schema": 400, "timeout": 504}.get(error.kind, 500)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.server.model_id, "object": "model", "owned_by": "local"}]})
        else:
            self._json(404, messages_api.error_body(404, f"no such path {self.path[:100]}"))

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?")[0].rstrip("/")
        api = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai", "/chat/completions": "openai"}.get(path)
        errors = openai_api.error_body if api == "openai" else messages_api.error_body
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= 32 << 20:
            self.close_connection = True
            return self._json(413 if length > 0 else 400, errors(413 if length > 0 else 400, "a request body of "
                                                                   "at most 32 MiB, with its Content-Length"))
        raw = self.rfile.read(length)
        if api is None:
            return self._json(404, errors(404, f"no such path {path[:100]}"))
        if not self._authorised():
            return self._json(401, errors(401, "the API key does not match this server's"))
        try:
            body = json.loads(raw or b"null")
            request = (messages_api.read if api == "anthropic" else openai_api.read)(body)
        except ValueError as exc:  # RequestError, or JSON that does not parse
            return self._json(400, errors(400, str(exc) if isinstance(exc, RequestError) else "the body is not JSON"))
        front = self.server.front
        model = request.model or self.server.model_id
        if request.stream:
            return self._stream(api, request, body, model)
        try:
            got = front.generate(request, lambda *_: None, lambda _: None, gone=self._gone)
        except EngineError as exc:
            return self._json(_status(exc), errors(_status(exc), str(exc)))
        if got.stop_reason == "cancelled":
            self.close_connection = True
            return  # nobody is left to read it
        if api == "anthropic":
            usage = {"input_tokens": got.prompt_tokens - got.reused_tokens, "output_tokens": got.output_tokens,
                     "cache_read_input_tokens": got.reused_tokens, "cache_creation_input_tokens": 0}
            self._json(200, messages_api.message(got.answer, model=model, stop_reason=got.stop_reason, usage=usage,
                                                 stop_sequence=got.stop_sequence))
        else:
            usage = openai_api.usage(got.prompt_tokens, got.output_tokens, got.reused_tokens)
            self._json(200, openai_api.completion(got.answer, model=model, stop_reason=got.stop_reason, usage_=usage))

    def _stream(self, api: str, request: Request, body: dict[str, Any], model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if api == "anthropic":
            stream: Any = messages_api.Stream(model)
            write = lambda events: self._send(b"".join(messages_api.sse(e) for e in events))  # noqa: E731
            on_prompt = lambda n, reused: write(stream.start(  # noqa: E731
                {"input_tokens": n - reused, "cache_read_input_tokens": reused, "cache_creation_input_tokens": 0}))
        else:
            stream = openai_api.Stream(model)
            write = lambda events: self._send(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events))  # noqa: E731
            on_prompt = lambda n, reused: write(stream.start())  # noqa: E731
        try:
            got = self.server.front.generate(request, on_prompt, lambda text: write(stream.text(text)), gone=self._gone)
        except EngineError as exc:
            error = (messages_api.error_body if api == "anthropic" else openai_api.error_body)(_status(exc), str(exc))
            self._send(messages_api.sse(error) if api == "anthropic" else f"data: {json.dumps(error)}\n\n".encode())
            return
        if got.stop_reason == "cancelled":
            return  # the client hung up
        if api == "anthropic":
            usage = {"input_tokens": got.prompt_tokens - got.reused_tokens, "output_tokens": got.output_tokens,
                     "cache_read_input_tokens": got.reused_tokens, "cache_creation_input_tokens": 0}
            write(stream.finish(got.answer, stop_reason=got.stop_reason, usage=usage, stop_sequence=got.stop_sequence))
        else:
            usage_ = (openai_api.usage(got.prompt_tokens, got.output_tokens, got.reused_tokens)
                      if openai_api.include_usage(body) else None)
            write(stream.finish(got.answer, stop_reason=got.stop_reason, usage_=usage_))
            self._send(b"data: [DONE]\n\n")

    def _gone(self) -> bool:
        """The client closed its connection (its end reads as EOF); a pipelined next request is not a hang-up."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _authorised(self) -> bool:
        key = self.server.front.api_key
        if key is None:
            return True
        bearer = self.headers.get("Authorization", "")
        given = self.headers.get("x-api-key") or (bearer[7:] if bearer.lower().startswith("bearer ") else None)
        return given == key

    def _send(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            pass  # the client left: generate() sees it (gone) and stops the engine after its next token

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._send(data)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    front: _Front
    model_id: str


@contextlib.contextmanager
def serve(model: LocalModel, *, jail: Jail, port: int = 0, api_key: str | None = None, seed: int | None = None,
          context_size: int = 8192, threads: int = 2, max_tokens_cap: int = MAX_TOKENS_CAP,
          timeout_s: float = REQUEST_TIMEOUT_S, sequences: int = 1, snapshots: int = 4) -> Iterator[Running]:
    """Start the engine (in ``jail``) and the front on 127.0.0.1:``port`` (0: any free port); stop both after.
    ``sequences``: requests decoded at once (each a sequence of one context of ``context_size`` tokens a sequence);
    ``snapshots``: state snapshots the engine keeps to share evaluated prefixes across sequences (0: none; none
    either when the jail gives no ``scratch`` folder)."""
    engine = Engine(model, jail, context_size=context_size, threads=threads, sequences=sequences, snapshots=snapshots)
    engine.start()
    front = _Front(model, engine, api_key=api_key, seed=seed, max_tokens_cap=max_tokens_cap, timeout_s=timeout_s)
    model_id = f"{model.name.lower()}-{model.quant.lower()}"
    httpd = _HTTPServer(("127.0.0.1", port), _Handler)
    httpd.front, httpd.model_id = front, model_id
    thread = threading.Thread(target=httpd.serve_forever, name="local-model", daemon=True)
    thread.start()
    try:
        yield Running(base_url=f"http://127.0.0.1:{httpd.server_address[1]}", model_id=model_id, label=model.label,
                      _front=front)
    finally:
        httpd.shutdown()
        httpd.server_close()
        engine.stop()
