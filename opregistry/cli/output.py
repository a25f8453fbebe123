"""Where a command's data goes: stdout, or ``-o FILE``.

``-o FILE`` is written on every successful run, findings or not (an empty table is an
empty file, so no earlier report survives a clean run), and never on an error. A
regular file is replaced atomically (temporary file + rename: a reader never sees half
a report) with the mode a plain ``open()`` would give it: an existing file's mode and
owner are kept, a new file follows the umask. A symlink is followed. A FIFO or device
(``/dev/stdout``) is written in place, never replaced; a FIFO nobody reads is an error,
not a hang. Any path that cannot be written is one ``Error:`` line and exit 2.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from opregistry.errors import OpregistryError


def emit(output_file: str | None, text: str) -> None:
    """Print ``text``, or write it to ``output_file``; a path that cannot be written is
    one ``Error:`` line and exit 2."""
    import typer

    if output_file is None:
        typer.echo(text)
        return
    try:
        write_report(Path(output_file), text)
    except OpregistryError as exc:
        from opregistry.cli.app import fail

        raise fail(exc) from None


def write_report(path: Path, text: str) -> None:
    """``text`` as the whole content of ``path`` (a final newline added when missing)."""
    write_atomically(path, text if not text or text.endswith("\n") else text + "\n")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (see the module's docstring), or raise
    :class:`OpregistryError` with the one line to show."""
    try:
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
        mode = stat.S_IMODE(info.st_mode) if info else 0o666 & ~_umask()
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
    except OSError as exc:
        raise OpregistryError(f"cannot write {path}: {exc.strerror or exc}") from None


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
