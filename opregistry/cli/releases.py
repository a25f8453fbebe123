from __future__ import annotations

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
    TableFormat,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import OpregistryError
from opregistry.formats import render, summary
from opregistry.registry import lookup as query
from opregistry.registry.listings import ReleaseList


def releases(library: OptionalStr = LibraryOption, fmt: TableFormat = FormatOption,
             output_file: OptionalStr = OutputFileOption, db: OptionalStr = DbOption,
             xla: bool = typer.Option(
                 False, "--xla", help="Instead of the op counts, how many ops and gradients "
                 "compile with XLA, per release and device.")) -> None:
    """Releases in the database, TensorFlow's and op libraries', with op counts per
    gradient status (--xla: per XLA status)."""
    guard_output(output_file, db=db)
    try:
        found = query.releases(db=db, library=library)
    except OpregistryError as exc:
        raise fail(exc) from None
    listed = ReleaseList(tuple(found), xla=xla)
    emit(output_file, render(listed, fmt))
    note(summary(listed))

