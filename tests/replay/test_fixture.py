"""``fixture.copy``: the same tree ``shutil.copytree(symlinks=True)`` makes, less the top-level ``.git``."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from bot.replay.sandbox import fixture


def _tree(root: Path) -> dict:
    """Every entry: its type, mode, modification time, link text or bytes, and extended attributes."""
    out = {".": (stat.S_IMODE(os.stat(root).st_mode), os.stat(root).st_mtime_ns)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            body = os.readlink(path) if stat.S_ISLNK(st.st_mode) else (
                Path(path).read_bytes() if stat.S_ISREG(st.st_mode) else None)
            out[os.path.relpath(path, root)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_mtime_ns,
                                                body, sorted(os.listxattr(path, follow_symlinks=False)))
    return out


@pytest.fixture
def source(tmp_path) -> Path:
    src = tmp_path / "src"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(src / "run.sh", 0o751)
    os.utime(src / "run.sh", ns=(1, 1_000_000_000_123_456_789))
    (src / "sub" / "big.bin").write_bytes(os.urandom(3 << 20))
    (src / "sub" / "empty").write_bytes(b"")
    (src / "sub" / "rel").symlink_to("../run.sh")
    (src / "abs").symlink_to("/etc/passwd")  # copied as a link, never followed
    (src / "dangling").symlink_to("nowhere")
    (src / ".git").mkdir()  # the fixture's own repository stays behind ...
    (src / ".git" / "config").write_text("[core]\n")
    (src / "sub" / ".git").write_text("gitdir: x\n")  # ... a nested one's file does not
    try:
        os.setxattr(src / "run.sh", "user.replaybook", b"kept")
    except OSError:
        pass  # a file system without user attributes: the rest still holds
    os.chmod(src / "sub" / "deep", 0o555)  # a read-only folder is filled before its mode is set
    return src


def test_the_copy_is_the_tree_copytree_makes(source, tmp_path):
    ours, theirs = tmp_path / "out" / "ours", tmp_path / "theirs"
    fixture.copy(source, ours)
    shutil.copytree(source, theirs, symlinks=True, ignore=lambda d, names: [".git"] if Path(d) == source else [])
    assert _tree(ours) == _tree(theirs)
    assert not (ours / ".git").exists() and (ours / "sub" / ".git").is_file()


def test_a_special_file_is_refused_and_an_existing_target_is_an_error(source, tmp_path):
    os.mkfifo(source / "sub" / "pipe")  # opened without blocking: refused, never waited on
    with pytest.raises(shutil.SpecialFileError, match="pipe"):
        fixture.copy(source, tmp_path / "a")
    os.unlink(source / "sub" / "pipe")
    (tmp_path / "b").mkdir()
    with pytest.raises(FileExistsError):
        fixture.copy(source, tmp_path / "b")
