"""Ctrl-C for work that runs sandboxes on threads: kill them all at once, then stop the main thread."""

from __future__ import annotations

import contextlib
import signal
import threading

from bot.replay.sandbox import process as process_mod


@contextlib.contextmanager
def stop_on_sigint():
    """Ctrl-C kills every sandbox first (bot/replay/sandbox/process.py), then interrupts the main thread: the
    worker threads' trials end at once instead of running to their timeout while the main thread waits.
    ``process.STOP`` stays set on the way out; clear it once every trial thread has ended."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        process_mod.stop_all()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
