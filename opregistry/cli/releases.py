from __future__ import annotations

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
)
from opregistry.cli.output import emit, fail, note
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, plural, render
from opregistry.registry import lookup as query

COLUMNS = ["release", "with_tf", "package", "python", "ops", "registered", "no_gradient",
           "missing", "public", "orphan_gradients"]


def releases(library: OptionalStr = LibraryOption, fmt: OutputFormat = FormatOption,
             output_file: OptionalStr = OutputFileOption, db: OptionalStr = DbOption) -> None:
    """Releases in the database, TensorFlow's and op libraries', with op counts per
    gradient status."""
    try:
        found = query.releases(db=db, library=library)
    except OpregistryError as exc:
        raise fail(exc) from None
    data = [r.to_dict() for r in found]
    columns = COLUMNS if any(r.library for r in found) else [c for c in COLUMNS if c != "with_tf"]
    emit(output_file, render(fmt, data, [_row(r) for r in found], columns))
    from_libraries = [r for r in found if r.library]
    names = ", ".join(sorted({r.library or "" for r in from_libraries}))
    note(f"{plural(len(found), 'release')}" +
         (f" ({len(from_libraries)} of op libraries: {names})" if from_libraries else ""))


def _row(summary: query.ReleaseSummary) -> dict[str, object]:
    """A table row: an op library's release is named by the library, with the TensorFlow
    it was harvested with beside it; a pre-release is marked."""
    row: dict[str, object] = summary.to_dict()
    row["release"] = summary.label + (" (pre-release)" if summary.prerelease else "")
    row["with_tf"] = summary.release if summary.library else None
    return row
