"""Which model answers: the one place a model choice (``scripted``, ``local`` or a hosted id) is resolved.

- ``scripted``: the SIMULATED model (a scenario's ``policy.yaml``, an answer book), offline.
- ``local``: the real open-weights model ``replaybook model install local`` put in the user's cache,
  served on 127.0.0.1 by ``bot.model.local.server`` in its own sandbox. It is started once per
  process, on first use, and stopped when the process exits. It needs no key; its cost is tokens
  and CPU seconds, $0 (``bot.model.pricing``).
- anything else: a hosted model id, reached with the environment's key.

Callers (``bot.config``) turn an ``Endpoint`` into a replay gateway's upstream or an SDK client,
so no command resolves ``local`` on its own.
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable

from bot import settings
from bot.errors import BadInput

SCRIPTED = "scripted"
LOCAL = "local"
INSTALL_HINT = "replaybook model install local"
# What a fake local server in the tests accepts; the real one gets a fresh token per process (``local``).
LOCAL_KEY = "replaybook-local"


@dataclass(frozen=True)
class Endpoint:
    """A running local model: where it answers, what it is called, and how to read its counters."""

    base_url: str
    model_id: str
    label: str  # "<name> <quant> (real local model)": what every report says instead of "simulated"
    api_key: str = field(default=LOCAL_KEY, repr=False)
    stats: Callable[[], Any] | None = field(default=None, repr=False, compare=False)
    abort: Callable[[], None] | None = field(default=None, repr=False, compare=False)  # Ctrl-C: end the engine now


def is_local(model: str | None) -> bool:
    return model == LOCAL


def is_simulated(model: str | None) -> bool:
    return model == SCRIPTED


def needs_key(model: str | None) -> bool:
    """True for a hosted model: neither the simulated one nor the local one."""
    return bool(model) and model not in (SCRIPTED, LOCAL)


def label_of(local_model: Any) -> str:
    """The report label of an installed ``LocalModel``: its name and quantisation, said to be real and local."""
    label = str(getattr(local_model, "label", "") or "").strip()
    if not label:
        label = " ".join(str(getattr(local_model, k, "") or "") for k in ("name", "quant")).strip() or "local model"
    return label if "real local model" in label.lower() else f"{label} (real local model)"


_lock = threading.Lock()
_stack = ExitStack()
_running: Endpoint | None = None


def local(jail: Callable[..., Any]) -> Endpoint:
    """The local model server of this process, started on first use with its engine confined by ``jail``
    (``bot.replay.sandbox.isolation.engine_jail``); BadInput (exit 2, naming the install command) when it is not installed."""
    global _running
    with _lock:
        if _running is None:
            _running = _start(jail)
        return _running


def _start(jail: Callable[..., Any]) -> Endpoint:
    from bot.model.local import install, server

    try:
        found = install.locate()  # ModelNotInstalled (BadInput) names the install command
    except OSError as exc:
        raise BadInput(f"--model local: the local model cannot be read ({exc}); run `{INSTALL_HINT}`") from None
    token = "rb-local-" + secrets.token_urlsafe(24)  # only the gateway and the adapter hold it
    running = _stack.enter_context(server.serve(found, jail=jail, api_key=token, threads=threads(),
                                                sequences=sequences()))
    atexit.register(stop)
    return Endpoint(base_url=str(running.base_url), model_id=str(running.model_id), label=label_of(found),
                    api_key=token, stats=getattr(running, "stats", None), abort=getattr(running, "abort", None))


def threads() -> int:
    """Engine threads: two on a quiet machine; one when the cores are already busy.

    llama.cpp's threads wait on each other at every step, so on an oversubscribed machine a second
    thread costs more than it brings: at load 7.9 on 2 cores one answer took 4.9 s with one thread and
    18.5 s with two (bench/README.md, "A real model")."""
    cores = os.cpu_count() or 1
    return max(1, min(2, cores - round(os.getloadavg()[0])))


def seconds_per_call() -> float | None:
    """The local model's measured seconds per answer on this machine, now: the mean over the answers this
    process's server gave, else one probe answer (an agent-sized prompt, 48 tokens out); None without a server."""
    running = _running
    if running is None:
        return None
    stats = running.stats() if running.stats else None
    calls = list(getattr(stats, "calls", []) or [])
    if calls:
        return sum(c.prompt_s + c.gen_s for c in calls) / len(calls)
    import json
    import time
    import urllib.request

    body = {"model": LOCAL, "max_tokens": 48, "system": "You are a coding agent in a git repository. " * 20,
            "messages": [{"role": "user", "content": "List the repository's files and say what each is for."}]}
    request = urllib.request.Request(running.base_url + "/v1/messages", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "x-api-key": running.api_key})
    began = time.monotonic()
    try:
        urllib.request.urlopen(request, timeout=300).read()
    except OSError:
        return None
    return time.monotonic() - began


def sequences() -> int:
    """Answers decoded at once, as sequences of one context (``REPLAYBOOK_LOCAL_SEQUENCES``, default 4): trials
    run with ``--jobs`` share each decoding step instead of queueing; an idle sequence costs memory only
    (8,192 tokens of cache, about 230 MB for the 1.5B model)."""
    raw = settings.get("REPLAYBOOK_LOCAL_SEQUENCES", "") or ""
    return max(1, min(16, int(raw))) if raw.isdigit() else 4


def abort() -> None:
    """End this process's local model engine at once (Ctrl-C); a later ``local()`` after ``stop()`` starts anew."""
    running = _running
    if running is not None and running.abort is not None:
        running.abort()


def stop() -> None:
    """Stop the local server this process started (if any); the next ``local()`` starts a new one."""
    global _running
    with _lock:
        _running = None
        _stack.close()


def cpu_seconds() -> float | None:
    """CPU seconds the running local server has used so far, when it says; None when none runs."""
    running = _running
    if running is None or running.stats is None:
        return None
    value = running.stats()
    seconds = value.get("cpu_s") if isinstance(value, dict) else getattr(value, "cpu_s", None)
    return float(seconds) if isinstance(seconds, (int, float)) else None
