"""Which program an exec ran, as the kernel ran it: read from the new image, never from a name.

``image`` is called by ``bot.replay.trace.exec_notify`` once an exec is confirmed, while the process is held at
its next exec or exit (or found running by a sweep). A name is only a claim; what ran is decided so:

- **a script**: the kernel loaded the interpreter its ``#!`` line names, with that line's one optional
  argument, and built ``INTERP [ARG] SCRIPT argv[1:]``. The program is the interpreter, with that argv
  (``#!/usr/bin/git push`` in a file named ``pytest`` is ``git push …/pytest``), unless the interpreter is a
  language runtime that runs the script itself (``RUNTIMES``: a shell, Python, Perl, Ruby, Node, or ``env`` naming
  one of them) with no argument or only harmless flags (``#!/bin/sh -e``): then the script is the program, so a
  venv's ``pytest`` entry point is ``pytest``;
- **the dynamic loader** (``ld-linux-x86-64.so.2 /usr/bin/git push``): an interpreter too; its first argument
  that is not one of its own options (``LOADER_VALUE_OPTIONS`` take a value) is the program, with the argv from
  there;
- **a copy of a host tool** under another name (``cp /usr/bin/git deploy``): the file is compared with the
  host's tools of the same size (the folders of the harness's startup PATH), by content; an equal one is the
  program, the copy's name kept as ``called``;
- **``python -m X``** where ``X`` is a file of the process's own folder or ``PYTHONPATH`` (the ``-m`` search
  puts them first): ``module`` names that file, and checks never take the run for ``X``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat

from bot.replay.sandbox import host_tools, procfs

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_SHELLS = re.compile(r"^(sh|bash|dash|zsh|ksh|mksh)$")
# Each runtime's flags that change nothing of which file runs (never `-c`, `-m`, `-e`, `-s`, `-n`, `-i` …).
_SAFE_FLAGS = (
    (_PYTHON, set("bBdEIOqSuvx")),
    (_SHELLS, set("aefhuvxBCEHPT")),
    (re.compile(r"^perl(\d+(\.\d+)*)?$"), set("wWTtU")),
    (re.compile(r"^ruby(\d+(\.\d+)*)?$"), set("wWv")),
    (re.compile(r"^(node|nodejs)$"), set()),
)
LOADER = re.compile(r"^(ld-linux[-\w.]*\.so(\.\d+)*|ld\.so(\.\d+)*|ld64\.so(\.\d+)*|ld-musl-[-\w.]+\.so(\.\d+)*)$")
LOADER_VALUE_OPTIONS = frozenset({"--library-path", "--preload", "--argv0", "--audit", "--inhibit-rpath",
                                  "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask"})
LOADER_FLAGS = frozenset({"--inhibit-cache", "--list", "--verify", "--list-tunables", "--list-diagnostics",
                          "--help", "--version"})
LOADER_RUNS_NOTHING = frozenset({"--list", "--verify", "--list-tunables", "--list-diagnostics", "--help",
                                 "--version"})
_SHEBANG_CAP = 256  # the kernel reads no more of a #! line (BINPRM_BUF_SIZE)


def image(proc_dir: int, kernel_name: str, path: str, argv: list[str]) -> tuple[str, list[str], list[str]]:
    """The program a process runs since its exec, its argv, and the whole argv the new image holds (the loader's
    own options too), read from the new image (``proc_dir``: its ``/proc/PID``; ``kernel_name``: the file name as
    the kernel keeps it; ``path``: the caller's name made absolute; ``argv``: the caller's, read before the
    exec). OSError when the process is gone."""
    exe = os.readlink("exe", dir_fd=proc_dir).removesuffix(" (deleted)")
    try:
        cmd = [a.decode("utf-8", "backslashreplace") for a in procfs.read_at(proc_dir, "cmdline").split(b"\0")[:-1]]
    except OSError:
        cmd = []
    k = len(cmd) - len(argv)
    if k in (1, 2) and cmd[k] == kernel_name and cmd[k + 1:] == argv[1:]:
        script = procfs.real_path(proc_dir, path)
        line = shebang(proc_dir, script) if script is not None else None
        if line is not None and line[0] == exe and runs_its_script(exe, line[1]):
            return script, argv, cmd
        return exe, cmd, cmd  # the interpreter and its argument are the program: what the kernel ran
    cmd = cmd or argv
    if LOADER.match(os.path.basename(exe)):
        at = loader_program(cmd)
        if at is not None and not LOADER_RUNS_NOTHING & set(cmd[1:at]):
            target = cmd[at] if cmd[at].startswith("/") else f"{os.readlink('cwd', dir_fd=proc_dir)}/{cmd[at]}"
            found = procfs.real_path(proc_dir, target)
            if found is not None:
                return found, cmd[at:], cmd
    return exe, cmd, cmd


def runs_its_script(interpreter: str, arg: str | None) -> bool:
    """Whether ``#!INTERPRETER [ARG]`` runs the script's own file as its program (see the module docstring)."""
    name = os.path.basename(interpreter)
    if name == "env":
        return arg is not None and any(pattern.match(arg) for pattern, _ in _SAFE_FLAGS)
    for pattern, flags in _SAFE_FLAGS:
        if pattern.match(name):
            return arg is None or (re.fullmatch(r"-[A-Za-z]+", arg) is not None and set(arg[1:]) <= flags)
    return False


def shebang(proc_dir: int, script: str) -> tuple[str | None, str | None] | None:
    """A script's ``#!`` line as the kernel reads it: its interpreter (resolved as the process sees it) and its one
    optional argument (the rest of the line, spaces and all); None when the file has none."""
    try:
        fd = os.open("root" + script, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=proc_dir)
    except OSError:
        return None
    try:
        head = os.read(fd, _SHEBANG_CAP)
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "backslashreplace").strip(" \t")
    interp, _, arg = line.replace("\t", " ").partition(" ")
    arg = arg.strip(" \t")
    if not interp:
        return None
    return procfs.real_path(proc_dir, interp), (arg or None)


def loader_program(argv: list[str]) -> int | None:
    """The index in a dynamic loader's argv of the program it runs: its first argument that is none of its own
    options (glibc's ``rtld`` stops at the first it does not know, and takes that as the program)."""
    i = 1
    while i < len(argv):
        if argv[i] in LOADER_VALUE_OPTIONS:
            i += 2
        elif argv[i] in LOADER_FLAGS:
            i += 1
        else:
            return i
    return None


# -- a copy of a host tool ---------------------------------------------------------------------
@functools.cache
def host_tools_index() -> dict[int, list[tuple[str, int, int]]]:
    """Every regular executable in the folders of the harness's startup PATH, by size: (path, dev, inode)."""
    out: dict[int, list[tuple[str, int, int]]] = {}
    seen: set[tuple[int, int]] = set()
    for folder in host_tools.trusted_path().split(os.pathsep):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat()  # a link's target: /usr/bin's alternatives
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111 and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                out.setdefault(st.st_size, []).append((entry.path, st.st_dev, st.st_ino))
    return out


@functools.lru_cache(maxsize=256)
def _digest_of_host_file(path: str, dev: int, ino: int, size: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def host_tool(proc_dir: int, program: str) -> str | None:
    """The host tool ``program`` is a copy of (the same bytes under another name), or None: also None for the
    host's own file (the same inode, bound read-only into the sandbox: already named by what it is).
    ``program``: ``exe`` (the image's own file) or ``root/…`` (a file as the process sees it)."""
    try:
        st = os.stat(program, dir_fd=proc_dir)
    except OSError:
        return None
    candidates = host_tools_index().get(st.st_size, [])
    if not candidates or any((dev, ino) == (st.st_dev, st.st_ino) for _, dev, ino in candidates):
        return None
    try:
        fd = os.open(program, os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc_dir)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    for path, dev, ino in candidates:
        if _digest_of_host_file(path, dev, ino, st.st_size) == digest:
            return os.path.realpath(path)  # the file itself, as a link to it (an alternative) would be recorded
    return None


# -- python -m X ---------------------------------------------------------------------------------
def workspace_module(proc_dir: int, argv: list[str], program: str) -> str | None:
    """For ``python -m X`` (``program`` a Python), the file ``X`` resolves to in the process's own folder or a
    ``PYTHONPATH`` entry, which ``-m`` searches before the installed packages; None when neither holds it (or
    ``-I``/``-P``/``PYTHONSAFEPATH`` keep the folder off the search)."""
    if not _PYTHON.match(os.path.basename(program)):
        return None
    flags, module = python_module(argv)
    if module is None:
        return None
    try:
        env = procfs.read_at(proc_dir, "environ").split(b"\0")
        cwd = os.readlink("cwd", dir_fd=proc_dir)
    except OSError:
        return None
    values = dict(e.decode("utf-8", "replace").split("=", 1) for e in env if b"=" in e)
    folders = [] if ("I" in flags or "E" in flags) else [p for p in values.get("PYTHONPATH", "").split(":") if p]
    if not ({"I", "P"} & flags or (values.get("PYTHONSAFEPATH") and "E" not in flags)):
        folders.insert(0, cwd)
    parts = module.split(".")
    for folder in folders:
        base = os.path.join(folder if folder.startswith("/") else os.path.join(cwd, folder), *parts)
        for candidate in (base + ".py", os.path.join(base, "__main__.py"), os.path.join(base, "__init__.py"), base):
            found = procfs.real_path(proc_dir, candidate)
            if found is not None and _exists(proc_dir, found):
                return found
    return None


def python_module(argv: list[str]) -> tuple[set[str], str | None]:
    """A Python command line's single-letter flags and the module ``-m`` names (``-mX`` or ``-m X``), if any."""
    flags: set[str] = set()
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        arg = argv[i]
        if arg == "--" or arg.startswith("--"):
            return flags, None
        for j, letter in enumerate(arg[1:], 1):
            if letter == "m":
                rest = arg[j + 1:]
                return flags, rest or (argv[i + 1] if i + 1 < len(argv) else None)
            if letter == "c":
                return flags, None  # -c runs a string: no module
            if letter in "WX":  # they take a value: the rest of the word, or the next one
                i += 0 if arg[j + 1:] else 1
                break
            flags.add(letter)
        i += 1
    return flags, None


def _exists(proc_dir: int, path: str) -> bool:
    try:
        os.lstat("root" + path, dir_fd=proc_dir)
        return True
    except OSError:
        return False
