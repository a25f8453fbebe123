from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    OptionalStr,
    OutputFileOption,
    TableFormat,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import OpregistryError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from opregistry.db.location import DatabaseLocation
from opregistry.formats import OutputFormat, plural, render, summary

# the ``db`` group's help (app.py registers the group and its commands)
GROUP_HELP = "Create, migrate and fill databases."


def _engine(db: str | None, create: bool, write: bool | None = None
            ) -> tuple[DatabaseLocation, Engine]:
    from opregistry.db.engine import make_engine
    from opregistry.db.location import resolve

    location = resolve(db)
    return location, make_engine(location, create=create, write=write)


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
            migrate.owned_revision(engine, new=True)  # never another application's
            migrate.upgrade(engine, revision)
            reached = migrate.current(engine)
        note(f"{location.describe()} is at {reached}")
    except OpregistryError as exc:
        raise fail(exc) from None


def downgrade(revision: str = typer.Argument(..., help="Target revision, or base."),
              yes: bool = typer.Option(False, "--yes", help="Delete the data that the older "
                                       "schema cannot hold (listed without --yes)."),
              db: OptionalStr = DbOption) -> None:
    """Migrate the schema down to REVISION. Data the older schema cannot hold is deleted:
    without --yes, the command lists it and changes nothing."""
    from opregistry.db import migrate

    try:
        location, engine = _engine(db, create=False, write=True)
        migrate.owned_revision(engine)  # never another application's
        lost = [plural(n, what) for n, what in migrate.downgrade_losses(engine, revision)]
        if lost and not yes:
            raise OpregistryError(f"downgrading {location.describe()} to {revision} deletes "
                                  f"{'; '.join(lost)}: pass --yes to do it")
        migrate.downgrade(engine, revision)
        if lost:
            note(f"deleted {'; '.join(lost)}")
        note(f"{location.describe()} is at {migrate.current(engine) or 'base'}")
    except OpregistryError as exc:
        raise fail(exc) from None


def current(fmt: TableFormat = FormatOption, output_file: OptionalStr = OutputFileOption,
            db: OptionalStr = DbOption) -> None:
    """Print the schema revision of the database."""
    from opregistry.db import migrate

    guard_output(output_file, db=db)
    try:
        _, engine = _engine(db, create=False)
        revision = migrate.current(engine)
    except OpregistryError as exc:
        raise fail(exc) from None
    from opregistry.db.migrate import SchemaRevision

    result = SchemaRevision(revision, tuple(migrate.heads()))
    emit(output_file, render(result, fmt))
    note(summary(result))


def vacuum(db: OptionalStr = DbOption) -> None:
    """Give back the space that replaced releases and migrations left unused (SQLite:
    VACUUM, which rewrites the file; PostgreSQL: VACUUM ANALYZE). Nothing is deleted."""
    from opregistry.db import migrate
    from opregistry.db.maintenance import compact

    try:
        location, engine = _engine(db, create=False, write=True)
        migrate.owned_revision(engine)  # never another application's
        sizes = compact(engine)
    except OpregistryError as exc:
        raise fail(exc) from None
    note(f"{location.describe()}: vacuumed" + (
        f", {sizes[0]:,} bytes before, {sizes[1]:,} after" if sizes else ""))


def load(files: List[Path] = typer.Argument(..., help="Harvest documents (JSON)."),
         fmt: TableFormat = FormatOption, output_file: OptionalStr = OutputFileOption,
         db: OptionalStr = DbOption) -> None:
    """Load harvest documents saved with `harvest --save-json`."""
    from opregistry.db.loader import LoadedDocuments, LoadResult
    from opregistry.db.loader import load as load_document
    from opregistry.db.validate import read_document
    from opregistry.formats.db import loaded_line

    guard_output(output_file, db=db, paths=files)
    loaded: list[tuple[str, LoadResult]] = []
    for path in files:  # before the database is opened (or created)
        if not path.is_file():
            raise fail(OpregistryError(f"{path}: no such file or directory"
                                       if not path.exists() else f"{path}: not a regular file"))
    try:
        _, engine = _engine(db, create=True)
        for path in files:
            result = load_document(engine, read_document(path))
            loaded.append((str(path), result))
    except OpregistryError as exc:
        for _, result in loaded:  # what was loaded before the document that failed
            note(loaded_line(result))
        raise fail(exc) from None
    if fmt != OutputFormat.table or output_file is not None:
        # on stdout, the table is stderr's lines
        emit(output_file, render(LoadedDocuments(tuple(loaded)), fmt))
    for _, result in loaded:  # after the data: an Error: line comes first
        note(loaded_line(result))
