"""A trial reads no file of the host project and reaches none of its Unix sockets, wherever the project lies
(issue 53 item 3).

The sandbox binds the host ``/`` read-only and masks homes and temp folders. On a GitHub-hosted runner the
checkout is in a home, so it was hidden; on a self-hosted runner (``/opt/actions-runner/_work``), in a
container (``/__w``) or on this machine (``/work``) it was not: a tool call read the project's files (its
checks, the candidate rule, other trials' transcripts) and connected to a socket there. Here the project is a
folder under the test's working folder (the repository), outside every folder the sandbox always masks.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from bot.replay.engine import ReplayOptions, run_trial
from bot.replay.sandbox import isolation

SECRET = "CANDIDATE-RULE-TEXT-7f3a"
ANSWER = "HOST-SOCKET-ANSWER-91c2"
LISTED = "checks-e5d1.yaml"  # a name only a listing of the project shows


@pytest.fixture
def project(monkeypatch):
    base = os.getcwd()
    if isolation.needs_bind(base):
        pytest.skip("the working folder is in a folder the sandbox always masks: nothing to show here")
    folder = Path(tempfile.mkdtemp(prefix="project-", dir=base))
    try:
        (folder / ".git").mkdir()
        (folder / "rule.md").write_text(SECRET + "\n")
        (folder / LISTED).write_text("pass_if: []\n")
        (folder / "runs").mkdir()
        (folder / "runs" / "transcript.txt").write_text(SECRET + "\n")
        monkeypatch.chdir(folder)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def host_socket(project):
    path = project / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(ANSWER.encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(timeout=2)
    server.close()


def test_a_trial_reads_no_file_of_the_project_and_reaches_no_socket_in_it(make_scenario, tmp_path, project,
                                                                          host_socket):
    connect = (f"{sys.executable} -I -c \"import socket; s = socket.socket(socket.AF_UNIX); "
               f"s.connect('{host_socket}'); print(s.recv(100).decode())\"")
    script = f"cat {project}/rule.md {project}/runs/transcript.txt; ls {project}; {connect}; true"
    loaded = make_scenario(pass_if=[{"output_excludes": [SECRET, ANSWER, LISTED]}, {"succeeds": {"run": "true"}}],
                           with_rule=[{"bash": script}, {"say": "done"}])
    result = run_trial(loaded, "", ReplayOptions(runs_dir=tmp_path / "runs"), 0)
    assert result.verdict == "passed", result.reason


def test_the_project_is_among_the_masks_and_a_system_folder_never_is(project):
    assert str(project) in isolation.project_masks()
    assert isolation.project_masks(("/usr/lib/x", "/", "/etc")) == (str(project),)
