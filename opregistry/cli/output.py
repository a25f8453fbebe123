"""Where a command's data goes: stdout, or ``-o FILE``; its notes: stderr.

``-o FILE`` is written on every successful run, findings or not (an empty table is an
empty file, so no earlier report survives a clean run), and never on an error; how it
is written (atomically, with the mode ``open()`` would give) is ``opregistry.files``.
A path that cannot be written is one ``Error:`` line and exit 2.

No Typer here (only ``fail`` imports it, when a Typer command raises): the fast path
(``fast.py``) and the Typer commands write through these same functions.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from opregistry.errors import OpregistryError
from opregistry.text import printable


def note(text: str) -> None:
    """A line on stderr, with the control characters of the untrusted text in it (names
    from a model, a policy file or a harvest document) escaped."""
    _write(sys.stderr, printable(text))


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
    """Print ``text``, or write it to ``output_file``; :class:`OpregistryError` (the
    one line to show) when the path cannot be written."""
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
    or :class:`OpregistryError` with the one line to show."""
    from opregistry.files import write_atomically  # (tempfile: only for -o)

    try:
        write_atomically(path, text if not text or text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise OpregistryError(f"cannot write {path}: {exc.strerror or exc}") from None
