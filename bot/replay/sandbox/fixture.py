"""The scenario's fixture: checked before it is copied (no link out of it, no nested repository), then copied."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from bot.errors import BadInput


def check(fixture: Path) -> None:
    """Refuse links that leave the fixture, nested repositories, and special files copying would hang on."""
    top = os.path.realpath(fixture)
    for dirpath, dirnames, filenames in os.walk(fixture):
        if os.path.relpath(dirpath, fixture) == "." and ".git" in dirnames:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if name == ".git":
                raise BadInput(f"{fixture}: {os.path.relpath(full, fixture)} makes a nested repository, and its "
                               "config could name commands the harness would run; remove it (a `setup` step "
                               "may make a repository inside the sandbox instead)")
            if stat.S_ISLNK(st.st_mode):
                check_link(fixture, top, full)
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise BadInput(f"{full}: fixtures may hold only files, folders and symlinks; remove it")


def check_link(fixture: Path, top: str, link: str) -> None:
    target = os.readlink(link)
    rel_dir = os.path.relpath(os.path.dirname(link), fixture)
    lexical = os.path.normpath(os.path.join(rel_dir, target))
    try:
        real = os.path.realpath(link, strict=True)
    except FileNotFoundError:
        real = os.path.realpath(link)  # a dangling link inside the fixture is still a link inside it
    except OSError as exc:  # ELOOP: a link that points, in the end, back to itself
        raise BadInput(f"{fixture}: symlink {os.path.relpath(link, fixture)} is a loop ({exc.strerror}); "
                       "remove it, or point it at a file") from None
    inside = real == top or real.startswith(top + os.sep)
    if os.path.isabs(target) or lexical == ".." or lexical.startswith("../") or not inside:
        raise BadInput(
            f"{fixture}: symlink {os.path.relpath(link, fixture)} -> {target} points outside the "
            "fixture; make it a relative link to a path inside the fixture, or copy the file in"
        )


def copy(src: Path, dst: Path) -> None:
    """``shutil.copytree(src, dst, symlinks=True)`` less the top-level ``.git``, at a fraction of its cost.

    The same copy: links copied as links (never followed), each file's bytes, mode, times and extended
    attributes, each folder's mode and times (set after its contents, so a read-only folder can be
    filled), and a file that is neither regular, folder nor link refused. But one ``open`` of each
    file, its ``fstat`` reused for all of that, and no Python layers between: ``copy2`` stats each file
    five times over, and the copy is made two or three times a trial.
    """
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    _copy_dir(os.fspath(src), os.fspath(dst), top=True)


def _copy_dir(src: str, dst: str, *, top: bool = False) -> None:
    os.mkdir(dst, 0o700)
    with os.scandir(src) as it:
        entries = list(it)
    for entry in entries:
        if top and entry.name == ".git":  # the fixture's own repository is not part of it; the sandbox makes its own
            continue
        target = os.path.join(dst, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
            st = entry.stat(follow_symlinks=False)
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        elif entry.is_dir(follow_symlinks=False):
            _copy_dir(entry.path, target)
        else:
            _copy_file(entry.path, target)
    st = os.stat(src)  # a folder (links below are copied as links): only the top one may be reached by a link
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.chmod(dst, stat.S_IMODE(st.st_mode))


def _copy_file(src: str, dst: str) -> None:
    # O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
    fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd_in)
        if not stat.S_ISREG(st.st_mode):
            raise shutil.SpecialFileError(f"`{src}` is not a regular file, folder or link; it cannot be copied")
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _copy_bytes(fd_in, fd_out, st.st_size)
            _copy_xattrs(fd_in, fd_out)
            os.fchmod(fd_out, stat.S_IMODE(st.st_mode))
            os.utime(fd_out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)


def _copy_bytes(fd_in: int, fd_out: int, size: int) -> None:
    """The file's first ``size`` bytes (its size when opened), in the kernel where it can."""
    done = 0
    try:
        while done < size and (sent := os.sendfile(fd_out, fd_in, done, size - done)):
            done += sent
    except OSError as exc:
        if done or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
        while done < size and (chunk := os.pread(fd_in, min(1 << 20, size - done), done)):
            done += os.write(fd_out, chunk)


def _copy_xattrs(fd_in: int, fd_out: int) -> None:
    """As ``shutil.copystat``: what cannot be copied (another file system, a system name) is left out."""
    try:
        names = os.listxattr(fd_in)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.ENODATA, errno.EINVAL):
            return
        raise
    for name in names:
        try:
            os.setxattr(fd_out, name, os.getxattr(fd_in, name))
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.ENODATA, errno.EINVAL, errno.EACCES):
                raise




