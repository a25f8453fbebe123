"""Writing a file the way a user expects of ``open(path, "w")``, but never half-written.

A regular file (or a new one) is replaced atomically: a temporary file beside it,
renamed into place when complete, with the mode a plain ``open()`` would give it (an
existing file's mode and owner kept, a new file following the umask). A symlink is
followed. A FIFO or a device (``/dev/stdout``) is written in place, never replaced; a
FIFO nobody reads is an error, not a hang. Failures are ``OSError``s for the caller
to word.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path


def umask() -> int:
    """The process's umask (there is no way to read it without setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str) -> None:
    target = Path(os.path.realpath(path))  # a symlink: write where it points
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if info is not None and not stat.S_ISREG(info.st_mode):
        _write_in_place(target, text)  # a FIFO, a terminal, /dev/null: never replaced
        return
    if info is not None and not os.access(target, os.W_OK):  # as open() would refuse it
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    mode = stat.S_IMODE(info.st_mode) if info else 0o666 & ~umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        try:
            write_all(fd, text.encode("utf-8"))
            os.fchmod(fd, mode)
            if info is not None and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(fd, info.st_uid, info.st_gid)
                except OSError:
                    pass  # only root may give a file away; the mode is still kept
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` to ``fd``, or ``OSError``: a short write is retried, so a
    full disk (or a file size limit) shows as its error, never as a cut file (Python's
    buffered writers return a short count that text files drop)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def _write_in_place(target: Path, text: str) -> None:
    # O_NONBLOCK: opening a FIFO without a reader fails (ENXIO) instead of waiting forever
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO with no reader") from None
        raise
    try:
        os.set_blocking(fd, True)
        write_all(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def input_named(output: Path, inputs: list[tuple[str, Path]]
                ) -> tuple[str, str, bool] | None:
    """(what, path, inside a folder) of the first of ``inputs`` that writing
    ``output`` would replace: the same file (through symlinks, or a hard link: the
    same inode), or any path inside an input folder (a SavedModel). None when none."""
    real = Path(os.path.realpath(output))
    try:
        out_info: os.stat_result | None = os.stat(real)
    except OSError:
        out_info = None
    for what, path in inputs:
        try:
            info = os.stat(path)
        except OSError:
            continue  # a missing input is the command's own error
        target = Path(os.path.realpath(path))
        if stat.S_ISDIR(info.st_mode):
            if real == target or target in real.parents:
                return what, str(path), real != target
        elif real == target or (out_info is not None and os.path.samestat(out_info, info)):
            return what, str(path), False
    return None


def unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as :func:`write_atomically` writes it (a folder,
    a missing or read-only folder, a read-only file), or None: checked before a
    command's work, so that its only output is that line. A full disk or a FIFO
    nobody reads still shows when written."""
    target = Path(os.path.realpath(path))
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return exc.strerror or str(exc)
    if info is not None and stat.S_ISDIR(info.st_mode):
        return os.strerror(errno.EISDIR)
    if info is not None and not stat.S_ISREG(info.st_mode):
        return None  # a device or FIFO: written in place
    folder = target.parent
    if not folder.is_dir():
        return os.strerror(errno.ENOENT if not folder.exists() else errno.ENOTDIR)
    if info is not None and not os.access(target, os.W_OK) or \
            not os.access(folder, os.W_OK):
        read_only = os.statvfs(folder).f_flag & os.ST_RDONLY
        return os.strerror(errno.EROFS if read_only else errno.EACCES)
    return None
