"""The host side of the sandbox's network bridge: a Unix socket per endpoint.

Inside its network namespace the sandbox cannot reach the host's 127.0.0.1.
For each endpoint it may use (the model gateway, a scenario service), the
harness listens on a Unix socket and relays every connection, byte for byte,
to the real ``127.0.0.1:port``; ``socat`` inside the sandbox listens on the
same port and forwards to the socket (``bot.replay.sandbox.isolation.launcher``).
Nothing else on the host is reachable.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

_CHUNK = 65536


class UnixBridge:
    """Relays connections on ``path`` to ``127.0.0.1:port``; a context manager."""

    def __init__(self, path: Path, port: int):
        self.path, self.port = Path(path), port
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        os.chmod(self.path, 0o666)  # the sandbox's user may differ from ours (docker --user, userns)
        self._server.listen(64)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name=f"bridge-{port}", daemon=True)

    def __enter__(self) -> "UnixBridge":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        self._thread.join(timeout=2)
        try:
            self.path.unlink()
        except OSError:
            pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                inside, _ = self._server.accept()
            except OSError:
                return
            try:
                host = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                host.settimeout(None)
            except OSError:
                inside.close()
                continue
            threading.Thread(target=_serve, args=(inside, host), daemon=True).start()


def _serve(inside: socket.socket, host: socket.socket) -> None:
    back = threading.Thread(target=_pipe, args=(host, inside), daemon=True)
    back.start()
    _pipe(inside, host)
    back.join()
    inside.close()
    host.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(_CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
