"""The engine process: ``engine.mjs`` (node-llama-cpp) started in a jail, spoken to in JSON lines.

The jail is the caller's (``bot.replay.sandbox.isolation.engine_jail`` on Linux: bubblewrap with no network, the host
read-only, the GGUF and the engine bound read-only, an empty environment), so this layer builds no sandbox of its
own. Requests run at once up to ``sequences`` (the engine's sequences of one context; more wait in the engine),
each reading its own events (routed by request id); a request past its deadline is cancelled, and an engine that
does not stop is killed and started again for the next request (its evaluated prefixes are then lost, never its
correctness). A jail with a ``scratch`` folder lets the engine share an evaluated prefix across its sequences (state
snapshots, kept there; see ``engine.mjs``).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bot import settings
from bot.model.local.install import LocalModel

SCRIPT = Path(__file__).with_name("engine.mjs")
#: (argv, read-only paths) -> (the argv that starts it confined, the environment to start that with). A jail that
#: gives the engine a writable folder of its own (a tmpfs inside, nothing of the host's) names it in its ``scratch``
#: attribute: the engine keeps its state snapshots there; without one it keeps none.
Jail = Callable[[list[str], tuple[str, ...]], tuple[list[str], dict[str, str]]]


class EngineError(Exception):
    """The engine failed, died, or did not answer in time. ``kind``: "too_long", "schema" (a grammar the engine could not compile), "timeout" or "engine"."""

    def __init__(self, message: str, kind: str = "engine"):
        super().__init__(message)
        self.kind = kind


class Engine:
    def __init__(self, model: LocalModel, jail: Jail, *, context_size: int = 8192, threads: int = 2,
                 load_timeout_s: float = 600.0, sequences: int = 1, snapshots: int = 4):
        self.model, self.jail = model, jail
        self.context_size, self.threads, self.load_timeout_s = context_size, threads, load_timeout_s
        self.sequences = max(1, sequences)
        self.scratch: str | None = getattr(jail, "scratch", None)
        self.snapshots = max(0, snapshots) if self.scratch else 0  # state snapshots kept (engine.mjs)
        self._proc: subprocess.Popen[str] | None = None
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()  # events with no request id (ready)
        self._routes: dict[int, queue.Queue[dict[str, Any] | None]] = {}  # request id -> its events
        self._lock = threading.RLock()
        self._stderr: list[str] = []
        self._next_id = 0
        self.load_s = self.start_s = 0.0  # the last start: the model's load inside, and the wall time to ready
        self.starts = 0
        self._cpu_done = 0.0  # CPU seconds of engines already ended
        self.aborted = False  # abort(): no engine starts again

    def start(self) -> None:
        node = shutil.which("node", path=settings.STARTUP_PATH)
        if node is None:
            raise EngineError("node is not installed; the local model's engine runs on Node.js")
        argv = [node, str(SCRIPT), str(self.model.engine_package), str(self.model.gguf), str(self.context_size),
                str(self.threads), str(self.sequences), self.scratch or "-", str(self.snapshots)]
        read_only = tuple(dict.fromkeys(str(p) for p in (self.model.gguf.parent, self.model.engine_dir,
                                                            SCRIPT.parent, os.path.dirname(os.path.realpath(node)))))
        command, env = self.jail(argv, read_only)
        began = time.monotonic()
        self._events, self._routes = queue.Queue(), {}  # the last engine's reader keeps its own
        self._proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace")
        threading.Thread(target=self._read, args=(self._proc, self._events, self._routes), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(self._proc,), daemon=True).start()
        ready = self._take(self._events, time.monotonic() + self.load_timeout_s)
        if ready is None or ready.get("type") != "ready":
            self.stop()
            raise EngineError(f"the engine did not start: {self._why(ready)}")
        self.load_s, self.start_s = float(ready.get("load_s", 0.0)), time.monotonic() - began
        self.context_size = int(ready.get("context_size", self.context_size))
        self.starts += 1

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def complete(self, prompt: list[tuple[str, bool]], *, max_tokens: int, sampling: dict[str, Any],
                 deadline: float, should_stop: Callable[[], bool] = lambda: False,
                 extra: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """The events of one completion: a ``prompt`` event, ``delta`` events, then the ``done`` event (its
        ``stop_reason`` "cancelled" once ``should_stop()`` said so after a delta); EngineError otherwise."""
        with self._lock:
            if self.aborted:
                raise EngineError("the engine was stopped (interrupted)")
            if not self.running:
                self.start()
            assert self._proc is not None and self._proc.stdin is not None
            self._next_id += 1
            rid = self._next_id
            events: queue.Queue[dict[str, Any] | None] = queue.Queue()
            self._routes[rid] = events
        try:
            request = {"op": "complete", "id": rid, "prompt": [[t, s] for t, s in prompt], "max_tokens": max_tokens,
                       **sampling, **(extra or {})}
            self._send(request)
            stopping = False
            while True:
                event = self._take(events, deadline)
                if event is None:
                    self._cancel(rid, events)
                    raise EngineError("the model did not finish its answer in time", "timeout")
                if event.get("type") == "error":
                    raise EngineError(str(event.get("message", "the engine failed")), str(event.get("kind", "engine")))
                yield event
                if event.get("type") == "done":
                    return
                if event.get("type") == "delta" and not stopping and should_stop():
                    stopping = True
                    self._send({"op": "cancel", "id": rid})
        finally:
            self._routes.pop(rid, None)

    def _cancel(self, rid: int, events: queue.Queue) -> None:
        """Stop request ``rid``'s answer; an engine that does not say it stopped within 10 s is ended."""
        if not self.running:
            self.stop()
            return
        self._send({"op": "cancel", "id": rid})
        grace = time.monotonic() + 10.0
        while (event := self._take(events, grace)) is not None:
            if event.get("type") in ("done", "error"):
                return
        self.stop()

    def _send(self, message: dict[str, Any]) -> None:
        try:
            with self._lock:
                assert self._proc is not None and self._proc.stdin is not None
                self._proc.stdin.write(json.dumps(message) + "\n")
                self._proc.stdin.flush()
        except (OSError, ValueError):
            self.stop()
            raise EngineError(f"the engine ended: {self._why(None)}") from None

    def _take(self, events: queue.Queue, deadline: float) -> dict[str, Any] | None:
        try:
            event = events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if event is None:  # the engine's stdout closed
            events.put(None)
            raise EngineError(f"the engine ended: {self._why(None)}")
        return event

    def _why(self, event: dict[str, Any] | None) -> str:
        tail = " | ".join(line for line in self._stderr[-5:] if line.strip())
        got = f"it said {json.dumps(event)[:200]}" if event else "no answer"
        return f"{got}; its last words: {tail[-600:] or '(none)'}"

    @staticmethod
    def _read(proc: subprocess.Popen[str], events: queue.Queue, routes: dict[int, queue.Queue]) -> None:
        """Each event to its request's queue (one left over from an ended request is dropped); the rest to ``events``."""
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            rid = event.get("id")
            if rid is None:
                events.put(event)
            elif (route := routes.get(rid)) is not None:
                route.put(event)
        events.put(None)
        for route in list(routes.values()):
            route.put(None)

    def _read_stderr(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._stderr = (self._stderr + [line.rstrip()[:400]])[-20:]

    def cpu_seconds(self) -> float:
        """CPU seconds of every engine process so far (user + system, the running one's whole process tree)."""
        return self._cpu_done + (_tree_cpu(self._proc.pid) if self.running and self._proc else 0.0)

    def abort(self) -> None:
        """Kill the engine now, from any thread or a signal handler, and start none again: every running answer
        ends in an EngineError at once (Ctrl-C)."""
        self.aborted = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            try:  # reaped here, so no zombie outlives the replay (bounded: this may run in a signal handler)
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._cpu_done += _tree_cpu(proc.pid) if proc.poll() is None else 0.0
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants, from /proc (0 where it cannot be read)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in os.listdir(f"/proc/{current}/task"):
                todo += [int(c) for c in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total
