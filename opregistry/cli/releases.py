from __future__ import annotations

import typer

from .. import query
from ..errors import OpregistryError
from ..formats import OutputFormat, plural, render
from .app import app, fail
from .options import DbOption, FormatOption, OptionalStr

COLUMNS = ["release", "package", "python", "ops", "registered", "no_gradient", "missing",
           "public", "orphan_gradients"]


@app.command()
def releases(fmt: OutputFormat = FormatOption, db: OptionalStr = DbOption) -> None:
    """Releases in the database, with op counts per gradient status."""
    try:
        found = query.releases(db=db)
    except OpregistryError as exc:
        raise fail(exc) from None
    data = [r.to_dict() for r in found]
    typer.echo(render(fmt, data, data, COLUMNS))
    typer.echo(f"{plural(len(found), 'release')}", err=True)
