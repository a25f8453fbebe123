from __future__ import annotations

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
    SourceOption,
    TableFormat,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import OpregistryError
from opregistry.formats import render, summary
from opregistry.registry import diff as changes


def diff_releases(
    before: str = typer.Argument(..., help="Older release, e.g. 2.12.1."),
    after: str = typer.Argument(..., help="Newer release, e.g. 2.21.0."),
    library: OptionalStr = LibraryOption,
    source: bool = SourceOption,
    fmt: TableFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Ops added and removed, gradient status changes and changed gradient functions."""
    guard_output(output_file, db=db)
    try:
        result = changes.diff(before, after, db=db, sources=source, library=library)
    except OpregistryError as exc:
        raise fail(exc) from None
    emit(output_file, render(result, fmt, source=source))
    note(summary(result))
