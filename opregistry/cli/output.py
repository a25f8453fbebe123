"""Where a command's data goes: stdout, or ``-o FILE``.

``-o FILE`` is written on every successful run, findings or not (an empty table is an
empty file, so no earlier report survives a clean run), and never on an error; how it
is written (atomically, with the mode ``open()`` would give) is ``opregistry.files``.
A path that cannot be written is one ``Error:`` line and exit 2.
"""
from __future__ import annotations

from pathlib import Path

from opregistry.errors import OpregistryError
from opregistry.files import write_atomically


def emit(output_file: str | None, text: str) -> None:
    """Print ``text``, or write it to ``output_file``; a path that cannot be written is
    one ``Error:`` line and exit 2."""
    import typer

    if output_file is None:
        if text:  # an empty result is no output, not a blank line
            typer.echo(text)
        return
    try:
        write_report(Path(output_file), text)
    except OpregistryError as exc:
        from opregistry.cli.app import fail

        raise fail(exc) from None


def write_report(path: Path, text: str) -> None:
    """``text`` as the whole content of ``path`` (a final newline added when missing),
    or :class:`OpregistryError` with the one line to show."""
    try:
        write_atomically(path, text if not text or text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise OpregistryError(f"cannot write {path}: {exc.strerror or exc}") from None
