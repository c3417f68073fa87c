"""Ctrl-C for work that runs sandboxes on threads: kill them all at once, then stop the main thread."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable

from bot.replay.sandbox import process as process_mod


_HOOKS: list[Callable[[], None]] = []


def on_interrupt(hook: Callable[[], None]) -> None:
    """Call ``hook`` on Ctrl-C too (once registered, always): e.g. end the local model's engine, so a trial
    waiting on an answer ends now instead of when the answer does."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)


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
        for hook in list(_HOOKS):
            try:
                hook()
            except Exception:  # noqa: BLE001 - stopping is best effort; the interrupt still happens
                pass
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
