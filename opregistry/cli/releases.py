from __future__ import annotations

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
    TableFormat,
)
from opregistry.cli.output import emit, fail, note
from opregistry.errors import OpregistryError
from opregistry.formats import render, summary
from opregistry.formats.lookup import ReleaseList
from opregistry.registry import lookup as query


def releases(library: OptionalStr = LibraryOption, fmt: TableFormat = FormatOption,
             output_file: OptionalStr = OutputFileOption, db: OptionalStr = DbOption) -> None:
    """Releases in the database, TensorFlow's and op libraries', with op counts per
    gradient status."""
    try:
        found = query.releases(db=db, library=library)
    except OpregistryError as exc:
        raise fail(exc) from None
    listed = ReleaseList(tuple(found))
    emit(output_file, render(listed, fmt))
    note(summary(listed))

