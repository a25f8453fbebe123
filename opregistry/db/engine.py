"""SQLAlchemy engines for writing (harvest, migrations) and non-SQLite reading, and the
one translation of driver errors (locks, corrupt files, bad URLs) into DatabaseError."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from opregistry.db.location import DatabaseLocation, busy_timeout, is_lock_error, locked_error
from opregistry.errors import DatabaseError, OpregistryError, first_line


def make_engine(location: DatabaseLocation, *, create: bool = False,
                write: bool | None = None) -> Engine:
    """An engine for ``location``; SQLite files must exist unless ``create``.

    ``write`` (default: ``create``): transactions take SQLite's write lock when they
    begin (BEGIN IMMEDIATE), so two writers queue for the busy timeout instead of both
    reading "release absent" and colliding when they insert it."""
    write = create if write is None else write
    if write:
        location.writable()
    if location.sqlite_path is None:
        try:
            return create_engine(location.url)
        except Exception as exc:  # noqa: BLE001 - bad URL or missing driver: one line
            raise DatabaseError(f"cannot open database {location.describe()}: "
                                f"{first_line(exc)}") from None
    location.check_file(create=create)
    engine = create_engine(location.url, connect_args={"timeout": busy_timeout()})
    begin = "BEGIN IMMEDIATE" if write else "BEGIN"

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we say when a transaction begins
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    return engine


@contextlib.contextmanager
def translated(location: Any, doing: str) -> Iterator[None]:
    """Driver and Alembic errors while ``doing`` something to a database become one
    DatabaseError line: a lock held by another process says so and for how long it
    was retried."""
    try:
        yield
    except OpregistryError:
        raise
    except Exception as exc:
        raise _as_database_error(exc, location, doing) from None


def _as_database_error(exc: Exception, location: Any, doing: str) -> DatabaseError:
    from sqlalchemy import exc as sa_exc

    where = database_name(location)
    cause = getattr(exc, "orig", None) or exc
    text = first_line(cause)
    if is_lock_error(text):
        return locked_error(where)
    # a unique key taken between our read and our write: another writer; any other
    # integrity error (a foreign key) is the database's own state, said as it is
    if isinstance(exc, sa_exc.IntegrityError) and "UNIQUE" in text.upper():
        return DatabaseError(f"cannot {doing} {where}: another process changed it at "
                             f"the same time ({text}); run the command again")
    return DatabaseError(f"cannot {doing} {where}: {text}")


def database_name(location: Any) -> str:
    """A location or an engine, as the other messages name a database."""
    if hasattr(location, "describe"):
        return str(location.describe())
    url = getattr(location, "url", None)
    if url is None:
        return str(location)
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return str(url.render_as_string(hide_password=True))
