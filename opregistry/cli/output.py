"""Where a command's data goes: stdout, or ``-o FILE``; its notes: stderr.

Every write is checked. ``-o FILE`` is written on every successful run, findings or
not (an empty table is an empty file, so no earlier report survives a clean run), and
never on an error; how it is written (atomically, with the mode ``open()`` would give)
is ``opregistry.files``. Before anything is read, ``-o`` is checked (``check_output``):
a path that cannot be written, or one that is an input of the run (the database, a
model, a document, a policy file), is one ``Error:`` line and exit 2.

Standard output is wrapped (``checked_stdout``, installed by ``opregistry.cli.main``)
so that whoever writes to it (our renderers, click's help) meets one rule: a write
that fails (a full disk, ``/dev/full``, a closed descriptor) is :class:`OutputError`,
one ``Error:`` line and exit 2; a reader that went away (EPIPE, ``| head``) ends the
output quietly, the rest discarded, and the command keeps its own exit code.

No Typer here (only ``fail`` imports it, when a Typer command raises): the fast path
(``fast.py``) and the Typer commands write through these same functions.
"""
from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opregistry.errors import OpregistryError, OutputError
from opregistry.text import printable


def note(text: str) -> None:
    """A line on stderr, with the control characters of the untrusted text in it (names
    from a model, a policy file or a harvest document) escaped. A stderr that cannot
    be written (closed, full) is skipped: there is nowhere to say so, and the exit code
    still tells."""
    try:
        _write(sys.stderr, printable(text))
    except (OSError, ValueError, AttributeError):
        pass


def _write(stream: Any, text: str) -> None:
    """``text`` and a newline in one write, then a flush, as ``click.echo`` does (with
    ``python -u`` a second write is what meets a closed pipe)."""
    stream.write(text + "\n")
    stream.flush()


def fail(error: OpregistryError) -> Any:
    """Print one line for a library error; return the ``typer.Exit`` to raise."""
    import typer

    note(f"Error: {error}")
    return typer.Exit(code=error.exit_code)


def write_output(output_file: str | None, text: str) -> None:
    """Print ``text``, or write it to ``output_file``; :class:`OutputError` (the one
    line to show) when it cannot be written."""
    if output_file is None:
        if text:  # an empty result is no output, not a blank line
            _write(sys.stdout, text)
        return
    write_report(Path(output_file), text)


def emit(output_file: str | None, text: str) -> None:
    """:func:`write_output` in a Typer command: a path that cannot be written is one
    ``Error:`` line and exit 2."""
    try:
        write_output(output_file, text)
    except OpregistryError as exc:
        raise fail(exc) from None


def write_report(path: Path, text: str) -> None:
    """``text`` as the whole content of ``path`` (a final newline added when missing),
    or :class:`OutputError` with the one line to show."""
    from opregistry.files import write_atomically  # (tempfile: only for -o)

    try:
        write_atomically(path, text if not text or text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


# ------------------------------------------------------------------ -o, before the run


def check_output(output_file: str | None, *, db: Any = None, use_db: bool = True,
                 paths: Iterable[str | os.PathLike[str]] = (),
                 policy: tuple[str | None] | None = None) -> None:
    """Refuse ``-o`` before anything is read: :class:`OutputError` when it is an input
    of this run (the database ``db`` as ``--db``/``$OPREGISTRY_DB``/the shipped one
    resolve it, with ``use_db``; ``paths``: models, documents, files; ``policy``:
    ``(--policy,)``, the file found when None is given) or cannot be written."""
    if output_file is None:
        return
    from opregistry.files import input_named, unwritable

    try:
        os.path.realpath(output_file)
    except OSError as exc:  # a relative path from a working directory that is gone
        raise OutputError(f"cannot write {output_file}: {exc.strerror or exc}") from None
    inputs: list[tuple[str, Path]] = [("the input", Path(p)) for p in paths]
    if use_db:
        path = _database_path(db)
        if path is not None:
            inputs.append(("the database", path))
    if policy is not None:
        found = _policy_path(policy[0])
        if found is not None:
            inputs.append(("the policy file", found))
    hit = input_named(Path(output_file), inputs)
    if hit is not None:
        what, where, inside = hit
        raise OutputError(f"cannot write {output_file}: it is {'inside ' if inside else ''}"
                          f"{what} {where}, an input of this command")
    why = unwritable(Path(output_file))
    if why is not None:
        raise OutputError(f"cannot write {output_file}: {why}")


def guard_output(output_file: str | None, **inputs: Any) -> None:
    """:func:`check_output` in a Typer command: one ``Error:`` line and exit 2."""
    try:
        check_output(output_file, **inputs)
    except OpregistryError as exc:
        raise fail(exc) from None


def _database_path(db: Any) -> Path | None:
    from opregistry.db.location import DatabaseLocation, resolve

    try:
        location = db if isinstance(db, DatabaseLocation) else resolve(db)
    except OpregistryError:
        return None  # the command says why when it opens it
    return location.sqlite_path


def _policy_path(given: str | None) -> Path | None:
    if given is not None:
        return Path(given)
    from opregistry.policy_file import find_policy_file

    try:
        return find_policy_file(Path.cwd())
    except (OSError, OpregistryError):
        return None  # the command says why when it loads the policy


# ------------------------------------------------------------------- standard output


class CheckedStdout:
    """``sys.stdout`` whose writes are checked: a failure is :class:`OutputError`,
    and so is every write after it; a reader that went away is quiet, and what
    follows is dropped. ``finish`` points the stream at /dev/null after either, so the
    interpreter's last flush of what is still buffered fails no more."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.reader_gone = False
        self.error: OutputError | None = None

    def write(self, text: str) -> int:
        self._do("write", text)
        return len(text)

    def flush(self) -> None:
        # nothing written to a closed stdout is no error; a failure was raised once by
        # the write that met it, and a flush has nothing more to say
        if self._stream is not None and self.error is None:
            self._do("flush")

    def _do(self, what: str, *args: Any) -> None:
        if self._stream is None:
            raise OutputError("cannot write to standard output: it is closed")
        if self.error is not None:
            raise self.error
        if self.reader_gone:
            return
        try:
            if what == "write" and args[0]:
                self._write_all(args[0])
            else:
                getattr(self._stream, what)(*args)
        except BrokenPipeError:
            self.reader_gone = True  # `| head`: it read what it wanted
        except (OSError, ValueError) as exc:  # ValueError: a closed file object
            if isinstance(exc, ValueError) and not getattr(self._stream, "closed", False):
                raise  # not a stream failure
            self.error = OutputError("cannot write to standard output: "
                                     f"{getattr(exc, 'strerror', None) or exc}")
            raise self.error from None

    def _write_all(self, text: str) -> None:
        """``text`` to the descriptor, every byte or an error: a short write (a full
        disk, a file size limit) is retried until it fails, where the text layer would
        drop the rest."""
        from opregistry.files import write_all

        stream = self._stream
        try:
            fd = stream.fileno()
        except (AttributeError, ValueError, OSError):
            fd = None  # not a file (a test's capture): its own write
        if fd is None:
            stream.write(text)
            return
        stream.flush()  # what the text layer holds goes first
        try:
            data = text.encode(stream.encoding or "utf-8", stream.errors or "strict")
        except UnicodeEncodeError as exc:
            raise OSError(errno.EILSEQ, f"{exc.reason} in {stream.encoding}") from None
        write_all(fd, data)

    def finish(self) -> None:
        """After a failure or a reader gone, stdout's descriptor is /dev/null."""
        if self._stream is None or not (self.reader_gone or self.error):
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            raise OutputError("cannot write to standard output: it is closed")
        return getattr(self._stream, name)


def guard_standard_streams() -> None:
    """A descriptor 0-2 closed when we started is taken by /dev/null, so that no file
    opened later (the database) becomes "standard output"; ``sys.stdout`` (None then,
    as the interpreter leaves it) still says closed when written."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
