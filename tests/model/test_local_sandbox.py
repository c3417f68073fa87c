"""The local model's engine runs in a jail of its own (``isolation.engine_jail``): a probe started exactly as the
engine is (same jail, same read-only paths) can read the model, but reach no network, write nowhere on the host
(only in its scratch folder, an empty tmpfs of its own), and see none of the caller's environment."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from bot.replay.sandbox.isolation import ENGINE_SCRATCH, engine_jail

PROBE = r"""
import json, os, socket, sys
model_dir, scratch = sys.argv[1], sys.argv[3]
out = {"read": open(os.path.join(model_dir, "model.gguf"), "rb").read(4).decode(), "env": sorted(os.environ),
       "scratch": os.listdir(scratch)}
for where in (model_dir, "/tmp", "/", os.getcwd(), "/var/tmp", "/dev/shm", os.path.dirname(sys.executable), scratch):
    try:
        open(os.path.join(where, "written"), "w").close()
        out.setdefault("wrote", []).append(where)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=3).close()
    out["connected"] = True
except OSError:
    out["connected"] = False
out["pid1_env"] = open("/proc/1/environ", "rb").read().decode(errors="replace")
print(json.dumps(out))
"""


def test_the_engine_sees_the_model_and_nothing_else_of_the_host(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("bubblewrap is Linux only")
    models = tmp_path / "models"
    models.mkdir()
    (models / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-from-the-host")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        argv, env = engine_jail(["/usr/bin/python3", "-c", PROBE, str(models), str(listener.getsockname()[1]),
                                 ENGINE_SCRATCH], (str(models),))
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["read"] == "GGUF"
    assert seen["wrote"] == [ENGINE_SCRATCH] and seen["scratch"] == []  # its scratch only, empty at the start...
    assert not os.path.exists(os.path.join(ENGINE_SCRATCH, "written"))  # ...and the host never sees it
    assert seen["connected"] is False
    assert set(seen["env"]) <= {"PATH", "HOME", "PWD", "LC_CTYPE"} and "sk-secret" not in seen["pid1_env"]
    assert env == {} and "ANTHROPIC_API_KEY" in os.environ  # bwrap itself starts from an empty environment
