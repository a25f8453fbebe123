from __future__ import annotations

from typing import List

import typer

from opregistry.cli.lookup_run import run_lookup
from opregistry.cli.options import (
    DbOption,
    FormatOption,
    LibraryOption,
    OptionalStr,
    OutputFileOption,
    ReleaseOption,
    TableFormat,
)


def lookup(
    names: List[str] = typer.Argument(
        ..., metavar="OP...", help="Op names (any case) or Python names (tf.math.floor)."),
    release: OptionalStr = ReleaseOption,
    library: OptionalStr = LibraryOption,
    fmt: TableFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Gradient status of ops in every release (or one), and where the gradient lives."""
    code = run_lookup(names, release, fmt, db, output_file, library)
    if code:
        raise typer.Exit(code=code)
