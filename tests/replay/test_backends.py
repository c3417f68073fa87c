"""Choosing an isolation backend, what each one asks of the host, and how `none` is flagged."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from bot.cli.main import cli
from bot.errors import BadInput
from bot.replay.sandbox import host_tools, isolation


@pytest.fixture
def fresh_backends():
    isolation._checked.cache_clear()
    yield
    isolation._checked.cache_clear()


def test_without_bubblewrap_the_error_says_how_to_get_it(fresh_backends, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap here
    started = host_tools._STARTUP_PATH
    host_tools.start_from(str(tmp_path))  # nor on the PATH the harness started with
    try:
        with pytest.raises(BadInput, match="apt-get install bubblewrap socat.*--sandbox docker.*--sandbox none"):
            isolation.backend("bwrap")
    finally:
        host_tools.start_from(started)


def test_an_unknown_backend_is_bad_input():
    with pytest.raises(BadInput, match="choose one of bwrap, docker, none"):
        isolation.backend("chroot")


def test_the_environment_variable_picks_the_backend(monkeypatch):
    monkeypatch.setenv(isolation.SANDBOX_ENV, "none")
    assert isolation.backend().name == "none"


def test_bwrap_starts_from_an_empty_environment_and_masks_the_homes():
    backend = isolation.Bubblewrap("/usr/bin/bwrap", "/bin/bash", "/usr/bin/socat")
    plan = isolation.Plan(rw=("/tmp/sb/root",), ro=("/opt/tool",), command_log="/tmp/sb/commands.fifo",
                          endpoints=((4321, "/tmp/sb/ep-4321.sock"),))
    argv, env = backend.command(["agent", "--flag"], cwd="/tmp/sb/root", env={"HOME": "/tmp/sb/home"}, plan=plan)
    assert env == {}
    joined = " ".join(argv)
    assert "--unshare-all" in argv and "--die-with-parent" in argv and "--cap-drop ALL" in joined
    assert "--tmpfs /home" in joined and "--tmpfs /tmp" in joined and "--remount-ro /tmp" in joined
    assert "--bind /tmp/sb/root /tmp/sb/root" in joined and "--ro-bind /opt/tool /opt/tool" in joined
    assert f"--ro-bind /tmp/sb/commands.fifo {isolation.COMMAND_LOG}" in joined
    assert "--setenv HOME /tmp/sb/home" in joined
    assert "TCP-LISTEN:4321,bind=127.0.0.1" in joined and argv[-2:] == ["agent", "--flag"]


def test_bwrap_starts_a_direct_program_with_nothing_between_unless_a_bridge_needs_the_launcher():
    """``direct``: the program sets its own file-size limit (the executor does), so with no endpoint bwrap runs it
    itself and says it started on --info-fd; an endpoint's bridge still needs the launcher (bash, socat)."""
    backend = isolation.Bubblewrap("/usr/bin/bwrap", "/bin/bash", "/usr/bin/socat")
    bare = isolation.Plan(rw=("/tmp/sb/root",))
    argv, _ = backend.command(["python3", "x"], cwd="/tmp/sb/root", env={}, plan=bare, status_fd=7, direct=True)
    assert argv[-5:] == ["--chdir", "/tmp/sb/root", "--", "python3", "x"] and "/bin/bash" not in argv
    assert argv[argv.index("--info-fd") + 1] == "7"
    bridged = isolation.Plan(rw=("/tmp/sb/root",), endpoints=((4321, "/tmp/sb/ep-4321.sock"),))
    argv, _ = backend.command(["python3", "x"], cwd="/tmp/sb/root", env={}, plan=bridged, status_fd=7, direct=True)
    assert "/bin/bash" in argv and "--info-fd" not in argv and "TCP-LISTEN:4321" in " ".join(argv)
    argv, _ = backend.command(["python3", "x"], cwd="/tmp/sb/root", env={}, plan=bare, status_fd=7)
    assert "/bin/bash" in argv and "ulimit -S -H -f" in " ".join(argv)  # not direct: the launcher sets the limit


def test_docker_gets_the_same_plan_as_flags():
    backend = isolation.Docker("/usr/bin/docker", "/bin/bash", "/usr/bin/socat", "debian:bookworm-slim")
    limits = isolation.Limits(max_procs=64, max_file_bytes=1 << 20)
    plan = isolation.Plan(rw=("/tmp/sb/root",), ro=("/opt/tool",), endpoints=((4321, "/tmp/sb/ep.sock"),),
                          limits=limits)
    argv, env = backend.command(["agent"], cwd="/tmp/sb/root", env={"K": "v"}, plan=plan)
    joined = " ".join(argv)
    for flag in ("--network none", "--cap-drop ALL", "--read-only", "--pids-limit 64", f"fsize={1 << 20}",
                 "--volume /tmp/sb/root:/tmp/sb/root:rw", "--volume /opt/tool:/opt/tool:ro", "--env K=v",
                 "--volume /tmp/sb/ep.sock:/run/replaybook/ep-4321.sock:ro", "debian:bookworm-slim"):
        assert flag in joined
    assert "ANTHROPIC_API_KEY" not in env and "GITHUB_TOKEN" not in env


def test_both_backends_mask_the_host_project_wherever_it_lies():
    """A project under /opt (a self-hosted runner's _work) is hidden: bwrap by a tmpfs, docker likewise inside its
    read-only /opt (issue 53 item 3)."""
    plan = isolation.Plan(rw=("/tmp/sb/root",), mask=("/opt/runner/_work/proj",))
    docker = isolation.Docker("/usr/bin/docker", "/bin/bash", "/usr/bin/socat", "debian:bookworm-slim")
    argv, _ = docker.command(["agent"], cwd="/tmp/sb/root", env={}, plan=plan)
    if os.path.isdir("/opt"):
        assert "--tmpfs /opt/runner/_work/proj:ro" in " ".join(argv)
    bwrap = isolation.Bubblewrap("/usr/bin/bwrap", "/bin/bash", "/usr/bin/socat")
    argv, _ = bwrap.command(["agent"], cwd="/tmp/sb/root", env={}, plan=plan)
    joined = " ".join(argv)
    assert "--tmpfs /opt/runner/_work/proj" in joined and "--remount-ro /opt/runner/_work/proj" in joined


@pytest.mark.skipif(shutil.which("docker") is None
                    or subprocess.run(["docker", "info"], capture_output=True).returncode != 0,
                    reason="needs a running Docker engine")
def test_docker_runs_a_command_in_its_container(tmp_path, fresh_backends):
    from bot.replay.sandbox.workspace import Sandbox

    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.txt").write_text("a\n")
    with Sandbox(tmp_path / "repo", backend="docker") as sb:
        done = sb.run(["bash", "-c", "cat a.txt; ls /proc | grep -c '^[0-9]'"], timeout_s=120)
    assert done.rc == 0 and done.stdout.startswith("a\n")


def test_replay_without_a_sandbox_says_so_loudly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["replay", "run", "lint-disable", "--sandbox", "none"])
    assert "WARNING: --sandbox none" in done.output


def test_the_start_message_is_read_to_its_end_while_others_hold_the_pipe_open():
    """strace and its unshare hold the status pipe's write end for the session's life: the harness reads the
    launcher's byte or bwrap's whole --info-fd JSON and stops there, and a silent pipe is "not started", not a hang."""
    import time

    from bot.replay.sandbox import session

    def started(*pieces: bytes, timeout: float = 5.0) -> tuple[bool, float]:
        r, w = os.pipe()
        for piece in pieces:
            os.write(w, piece)
        t = time.monotonic()
        try:
            return session._started(r, timeout), time.monotonic() - t
        finally:
            os.close(w)  # held open throughout, as strace does

    assert started(b"1")[0]
    ok, took = started(b'{\n    "child-pid": 4', b'2\n}\n', timeout=120)
    assert ok and took < 60  # read to the message's end, not to the pipe's (held open) or the timeout
    ok, took = started(timeout=0.3)
    assert not ok and 0.2 < took < 60  # a silent pipe gives up at the timeout, never hangs
