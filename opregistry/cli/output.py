"""Where a command's data goes: stdout, or ``-o FILE`` written atomically (a reader
never sees half a report, and a failing command leaves an earlier report in place)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from opregistry.errors import OpregistryError


def emit(output_file: str | None, text: str) -> None:
    """Print ``text``, or write it to ``output_file`` (temporary file + rename)."""
    if output_file is None:
        import typer

        typer.echo(text)
        return
    write_atomically(Path(output_file), text if text.endswith("\n") else text + "\n")


def write_atomically(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise OpregistryError(f"cannot write {path}: {exc.strerror or exc}") from None
