"""Running one process tree under a deadline and bounds, reading its output.

The process starts in a session of its own. While it runs, a watch counts its
processes, the bytes it writes to its pipes and the size of the folders it may
write; past a bound it is killed, and the bound is named in ``Completed.limit``
so the trial ends unscored with the reason. At the end its whole group is
killed: under an isolating backend that is the whole PID namespace.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

_TERM_GRACE_S = 0.5  # between SIGTERM and SIGKILL on timeout
_DRAIN_S = 0.5  # how long to keep reading after the group is gone (a setsid child may hold a pipe)
_PROC_EVERY_S = 0.05
_DISK_EVERY_S = 0.5


@dataclass(frozen=True)
class Completed:
    rc: int  # negative: killed by that signal (as subprocess reports it)
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    limit: str | None = None  # the bound that ended it, e.g. "process limit: more than 256 processes"


@dataclass(frozen=True)
class Watch:
    """Bounds checked while the process runs; ``disk`` returns the bytes the sandbox holds."""

    max_procs: int | None = None
    max_output_bytes: int | None = None
    max_disk_bytes: int | None = None
    disk: Callable[[int], int] | None = None


class Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int):
        self.cap, self.chunks, self.kept, self.size = cap, [], 0, 0

    def add(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += len(self.chunks[-1])
        self.size += len(data)

    @property
    def truncated(self) -> bool:
        return self.size > self.cap

    def text(self) -> str:
        out = b"".join(self.chunks).decode("utf-8", errors="replace")
        if self.truncated:
            out += f"\n[replaybook: output truncated at {self.cap} of {self.size} bytes]\n"
        return out


class Interrupted(BaseException):
    """The run was stopped (Ctrl-C): its process group is killed and the trial is no result to keep.

    A ``BaseException``, so no ``except Exception`` on the way turns it into a failed (and cached) trial."""


STOP = threading.Event()
LIVE: set[int] = set()
LIVE_LOCK = threading.Lock()


def stop_all() -> None:
    """Kill every process group started here and refuse new ones: a gate's Ctrl-C."""
    STOP.set()
    with LIVE_LOCK:
        groups = list(LIVE)
    for pgid in groups:
        kill_group(pgid)


def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike,
    env: Mapping[str, str],
    timeout_s: float,
    stdin: str | bytes | None = None,
    output_cap: int = 1 << 20,
    watch: Watch | None = None,
    pass_fds: Sequence[int] = (),
) -> Completed:
    """Run in a new session; on timeout, on a bound and after exit, kill the whole process group."""
    if STOP.is_set():
        raise Interrupted()
    start = time.monotonic()
    stdin_file = _stdin_file(stdin)
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdin=stdin_file or subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, pass_fds=tuple(pass_fds),
        )
    except OSError as err:  # missing program, or the agent deleted the sandbox root
        return Completed(127, "", f"replaybook: cannot start {argv[0]!r}: {err}\n", False, 0.0)
    finally:
        if stdin_file:
            stdin_file.close()
    with LIVE_LOCK:
        LIVE.add(proc.pid)
    try:
        if STOP.is_set():  # stopped while this one started
            kill_group(proc.pid)
        out, err = Capture(output_cap), Capture(output_cap)
        timed_out, limit = _pump(proc, {proc.stdout: out, proc.stderr: err}, start + timeout_s, watch or Watch())
    finally:
        with LIVE_LOCK:
            LIVE.discard(proc.pid)
    if STOP.is_set():
        raise Interrupted()
    return Completed(
        proc.returncode, out.text(), err.text(), timed_out, round(time.monotonic() - start, 4),
        out.truncated, err.truncated, limit,
    )


def _stdin_file(stdin: str | bytes | None):
    # A temp file, not a pipe: a child that never reads stdin cannot block us.
    if stdin is None:
        return None
    f = tempfile.TemporaryFile()
    f.write(stdin.encode() if isinstance(stdin, str) else stdin)
    f.seek(0)
    return f


class Bounds:
    """Checks a ``Watch`` at its own pace; returns the first bound broken."""

    def __init__(self, watch: Watch, pid: int, captures):
        self.watch, self.pid, self.captures = watch, pid, captures
        # The first looks come one period in, not at the start, when nothing has run yet: most calls end
        # sooner, and their one look at the disk is the one after the end (both pumps make it).
        start = time.monotonic()
        self.next_procs, self.next_disk = start + _PROC_EVERY_S, start + _DISK_EVERY_S

    def broken(self, now: float) -> str | None:
        w = self.watch
        if w.max_output_bytes is not None:
            size = sum(c.size for c in self.captures)
            if size > w.max_output_bytes:
                return f"output limit: more than {w.max_output_bytes >> 20} MiB on stdout and stderr"
        if w.max_procs is not None and now >= self.next_procs:
            self.next_procs = now + _PROC_EVERY_S
            if count_tree(self.pid, w.max_procs + 1) > w.max_procs:
                return f"process limit: more than {w.max_procs} processes"
        if w.disk is not None and w.max_disk_bytes is not None and now >= self.next_disk:
            self.next_disk = now + _DISK_EVERY_S
            if w.disk(w.max_disk_bytes) >= w.max_disk_bytes:
                return f"disk limit: the sandbox holds {w.max_disk_bytes >> 20} MiB or more"
        return None


def _pump(proc: subprocess.Popen, captures: dict, deadline: float, watch: Watch) -> tuple[bool, str | None]:
    """Read output until the pipes close; returns (timed out, bound broken)."""
    sel = selectors.DefaultSelector()
    for pipe in captures:
        sel.register(pipe, selectors.EVENT_READ)
    bounds = Bounds(watch, proc.pid, list(captures.values()))
    timed_out, limit, ended_at = False, None, None
    while sel.get_map():
        now = time.monotonic()
        if ended_at is None and proc.poll() is not None:
            kill_group(proc.pid)  # stray background children would hold the pipes open
            ended_at = now
        elif ended_at is None and now >= deadline:
            timed_out, ended_at = True, now
            _terminate(proc)
        elif ended_at is None and (limit := bounds.broken(now)):
            ended_at = now
            kill_group(proc.pid)
        if ended_at is not None and now - ended_at > _DRAIN_S:
            break
        for key, _ in sel.select(timeout=0.02):
            data = os.read(key.fd, 65536)
            if data:
                captures[key.fileobj].add(data)
            else:
                sel.unregister(key.fileobj)
    sel.close()
    for pipe in captures:
        pipe.close()
    if proc.poll() is None:  # it closed its pipes but kept running
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _terminate(proc)
    kill_group(proc.pid)
    if limit is None and watch.disk is not None and watch.max_disk_bytes is not None:
        if watch.disk(watch.max_disk_bytes) >= watch.max_disk_bytes:  # a burst between two looks
            limit = f"disk limit: the sandbox holds {watch.max_disk_bytes >> 20} MiB or more"
    return timed_out, limit


def _terminate(proc: subprocess.Popen) -> None:
    kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=_TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    kill_group(proc.pid)
    proc.wait()


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def count_tree(pid: int, stop_at: int) -> int:
    """Processes in the tree under ``pid`` (itself included), counting no further than ``stop_at``.

    Under bwrap every process of the sandbox is in this tree, orphans too:
    they are re-parented to the namespace's PID 1, a child of ``pid``.
    """
    seen, todo = 0, [pid]
    while todo and seen < stop_at:
        current = todo.pop()
        seen += 1
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                continue
    return seen


def tree_bytes(paths: Sequence[str], stop_at: int) -> int:
    """The apparent size of every file under ``paths`` (sparse files count whole), up to ``stop_at``."""
    total, todo = 0, list(paths)
    while todo and total < stop_at:
        try:
            with os.scandir(todo.pop()) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total
