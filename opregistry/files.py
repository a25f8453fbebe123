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
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if info is not None and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(handle.fileno(), info.st_uid, info.st_gid)
                except OSError:
                    pass  # only root may give a file away; the mode is still kept
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


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
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
