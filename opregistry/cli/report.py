from __future__ import annotations

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
    ReleaseOption,
    TableFormat,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import OpregistryError
from opregistry.formats import render, summary
from opregistry.registry import probe_report as coverage


def probe_report(
    release: OptionalStr = ReleaseOption,
    library: OptionalStr = LibraryOption,
    fmt: TableFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
    details: bool = typer.Option(
        False, "--details", help="Also list every op the numerical check could not compare, "
        "with its reason."),
) -> None:
    """How much of a release the probes covered, the error distribution of the numerical
    checks, every op whose gradient disagrees with finite differences, and why the
    others were not compared."""
    guard_output(output_file, db=db)
    try:
        report = coverage.probe_report(release, library=library, db=db)
    except OpregistryError as exc:
        raise fail(exc) from None
    emit(output_file, render(report, fmt, details=details))
    note(summary(report))

