from __future__ import annotations

import typer

from opregistry.cli.app import app, fail
from opregistry.cli.options import DbOption, FormatOption, OptionalStr, OutputFileOption
from opregistry.cli.output import emit
from opregistry.errors import OpregistryError
from opregistry.formats import OutputFormat, plural, render
from opregistry.registry import lookup as query

COLUMNS = ["release", "package", "python", "ops", "registered", "no_gradient", "missing",
           "public", "orphan_gradients"]


@app.command()
def releases(fmt: OutputFormat = FormatOption, output_file: OptionalStr = OutputFileOption,
             db: OptionalStr = DbOption) -> None:
    """Releases in the database, with op counts per gradient status."""
    try:
        found = query.releases(db=db)
    except OpregistryError as exc:
        raise fail(exc) from None
    data = [r.to_dict() for r in found]
    emit(output_file, render(fmt, data, data, COLUMNS))
    typer.echo(f"{plural(len(found), 'release')}", err=True)
