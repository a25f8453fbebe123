from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List

import typer

from opregistry.cli.app import app, fail, note
from opregistry.cli.options import DbOption, FormatOption, OptionalStr, OutputFileOption
from opregistry.cli.output import emit
from opregistry.errors import OpregistryError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from opregistry.db.location import DatabaseLocation
from opregistry.formats import OutputFormat, render

db_app = typer.Typer(help="Create, migrate and fill databases.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _engine(db: str | None, create: bool, write: bool | None = None
            ) -> tuple[DatabaseLocation, Engine]:
    from opregistry.db.engine import make_engine
    from opregistry.db.location import resolve

    location = resolve(db)
    return location, make_engine(location, create=create, write=write)


@db_app.command("upgrade")
def upgrade(revision: str = typer.Argument("head"), db: OptionalStr = DbOption) -> None:
    """Create the schema or migrate it to REVISION (default: head)."""
    from opregistry.db import migrate
    from opregistry.db.location import resolve

    try:
        location = resolve(db).writable()
        if location.sqlite_path is not None and not location.sqlite_path.exists():
            reached = migrate.create_file(location, revision)  # no file left on a failure
        else:
            location, engine = _engine(db, create=True)
            migrate.upgrade(engine, revision)
            reached = migrate.current(engine)
        note(f"{location.describe()} is at {reached}")
    except OpregistryError as exc:
        raise fail(exc) from None


@db_app.command("downgrade")
def downgrade(revision: str = typer.Argument(..., help="Target revision, or base."),
              db: OptionalStr = DbOption) -> None:
    """Migrate the schema down to REVISION."""
    from opregistry.db import migrate

    try:
        location, engine = _engine(db, create=False, write=True)
        migrate.downgrade(engine, revision)
        note(f"{location.describe()} is at {migrate.current(engine) or 'base'}")
    except OpregistryError as exc:
        raise fail(exc) from None


@db_app.command("current")
def current(fmt: OutputFormat = FormatOption, output_file: OptionalStr = OutputFileOption,
            db: OptionalStr = DbOption) -> None:
    """Print the schema revision of the database."""
    from opregistry.db import migrate

    try:
        _, engine = _engine(db, create=False)
        revision = migrate.current(engine)
    except OpregistryError as exc:
        raise fail(exc) from None
    head = migrate.heads()
    row = {"revision": revision or "base", "head": ", ".join(head),
           "at_head": revision in head}
    if fmt == OutputFormat.table:
        emit(output_file, revision or "base")  # the bare revision, for scripts
    else:
        emit(output_file, render(fmt, dict(row, head=list(head)), [row], list(row)))
    note("at head" if revision in head else f"head is {', '.join(head)}")


@db_app.command("load")
def load(files: List[Path] = typer.Argument(..., help="Harvest documents (JSON)."),
         fmt: OutputFormat = FormatOption, output_file: OptionalStr = OutputFileOption,
         db: OptionalStr = DbOption) -> None:
    """Load harvest documents saved with `harvest --save-json`."""
    from opregistry.db.loader import load as load_document
    from opregistry.db.validate import read_document

    loaded: list[dict[str, object]] = []
    try:
        _, engine = _engine(db, create=True)
        for path in files:
            result = load_document(engine, read_document(path))
            loaded.append({"file": str(path), "release": result.release,
                           "package": result.package, "ops": result.ops,
                           "replaced": result.replaced})
            note(f"loaded {result.release} ({result.package}): {result.ops} ops"
                 + (" (replaced)" if result.replaced else ""))
    except OpregistryError as exc:
        raise fail(exc) from None
    if fmt != OutputFormat.table or output_file is not None:
        emit(output_file, render(fmt, loaded, loaded))  # on stdout, the table is stderr's lines
