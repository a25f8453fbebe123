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
from opregistry.cli.output import emit, fail, note
from opregistry.errors import OpregistryError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from opregistry.db.location import DatabaseLocation
from opregistry.formats import OutputFormat, tabular

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
        lost = _lost_by_downgrade(engine, revision)
        if lost and not yes:
            raise OpregistryError(f"downgrading {location.describe()} to {revision} deletes "
                                  f"{'; '.join(lost)}: pass --yes to do it")
        migrate.downgrade(engine, revision)
        if lost:
            note(f"deleted {'; '.join(lost)}")
        note(f"{location.describe()} is at {migrate.current(engine) or 'base'}")
    except OpregistryError as exc:
        raise fail(exc) from None


# what each revision's downgrade deletes: (revision, SQL counting it, what it is)
_DOWNGRADE_LOSSES = [
    ("0007_input_by_output", "SELECT COUNT(by_output) FROM op_inputs",
     "per-output probe fact"),
    ("0006_xla", "SELECT COUNT(*) FROM op_xla", "XLA verdict"),
    ("0005_library_releases", "SELECT COUNT(*) FROM releases WHERE library != ''",
     "op-library release"),
    ("0004_function_sources", "SELECT COUNT(*) FROM function_sources",
     "gradient function source text"),
    ("0002_probes", "SELECT COUNT(*) FROM op_inputs", "per-input probe result"),
    ("0001_initial", "SELECT COUNT(*) FROM releases", "release"),
]


def _lost_by_downgrade(engine: Engine, revision: str) -> list[str]:
    """What migrating down to ``revision`` deletes, counted ("6 op-library releases")."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import text

    from opregistry.db import migrate
    from opregistry.formats import plural

    config = migrate.alembic_config(engine)
    scripts = ScriptDirectory.from_config(config)
    current = migrate.current(engine)
    if current is None:
        return []
    try:
        undone = [s.revision for s in scripts.iterate_revisions(current, revision)
                  if s.revision != (None if revision == "base" else
                                    scripts.get_revision(revision).revision)]
    except Exception as exc:  # noqa: BLE001 - alembic's errors for unknown revisions
        raise OpregistryError(f"unknown revision {revision!r} ({exc})") from None
    lost = []
    with engine.connect() as connection:
        for name, sql, what in _DOWNGRADE_LOSSES:
            if name in undone:
                try:
                    n = int(connection.execute(text(sql)).scalar() or 0)
                except Exception:  # noqa: BLE001 - a table an older schema lacks: nothing
                    continue
                if n:
                    lost.append(plural(n, what))
    return lost


def current(fmt: TableFormat = FormatOption, output_file: OptionalStr = OutputFileOption,
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
        emit(output_file, tabular(fmt, dict(row, head=list(head)), [row], list(row)))
    note("at head" if revision in head else f"head is {', '.join(head)}")


def load(files: List[Path] = typer.Argument(..., help="Harvest documents (JSON)."),
         fmt: TableFormat = FormatOption, output_file: OptionalStr = OutputFileOption,
         db: OptionalStr = DbOption) -> None:
    """Load harvest documents saved with `harvest --save-json`."""
    from opregistry.db.loader import load as load_document
    from opregistry.db.validate import read_document

    loaded: list[dict[str, object]] = []
    for path in files:  # before the database is opened (or created)
        if not path.is_file():
            raise fail(OpregistryError(f"{path}: no such file or directory"
                                       if not path.exists() else f"{path}: not a regular file"))
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
        emit(output_file, tabular(fmt, loaded, loaded))  # on stdout, the table is stderr's lines
