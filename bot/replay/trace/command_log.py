"""The PATH shims' command log (``--sandbox docker`` only: elsewhere the kernel trace is the record)."""

from __future__ import annotations

import os
import select
import threading
from pathlib import Path


class CommandLog:
    """The shims' log: a FIFO only the harness reads, drained into a file only the harness writes.

    Inside the sandbox the FIFO is bound read-only and is write-only by mode,
    so the agent can add records but can neither read, truncate nor remove
    what was written. The harness holds it open for reading and writing, so a
    shim never blocks on open and never meets a closed pipe.
    """

    def __init__(self, fifo: Path, out: Path, *, cap: int = 32 << 20, on_full=None):
        self.fifo, self.out = fifo, out
        self.cap, self._on_full, self._written = cap, on_full, 0
        os.mkfifo(fifo, 0o600)
        self._fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.chmod(fifo, 0o222)
        self._file = open(out, "ab")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # close() wakes the thread at once, not at its next poll
        self._thread = threading.Thread(target=self._run, name="command-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd, self._wake_r], [], [], 1.0)
            if self._fd in ready:
                self.drain()

    def drain(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            while True:
                try:
                    data = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    break
                if not data:
                    break
                room = self.cap - self._written
                if len(data) > room:  # past the cap: drained and dropped, so no shim ever blocks
                    data = data[:max(room, 0)]
                    if self._on_full is not None:
                        self._on_full(self.cap)
                        self._on_full = None
                self._file.write(data)
                self._written += len(data)
            self._file.flush()

    def close(self) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=1)
        self.drain()
        with self._lock:
            os.close(self._fd)
            self._fd = -1
            self._file.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
