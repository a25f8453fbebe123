"""SQLAlchemy engines for writing (harvest, migrations) and non-SQLite reading."""
from __future__ import annotations

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from opregistry.db.location import DatabaseLocation
from opregistry.errors import DatabaseError

BUSY_TIMEOUT_MS = 5000


def make_engine(location: DatabaseLocation, *, create: bool = False) -> Engine:
    """An engine for ``location``; SQLite files must exist unless ``create``."""
    if create:
        location.writable()
    if location.sqlite_path is not None:
        if not create and not location.sqlite_path.exists():
            raise DatabaseError(f"database not found: {location.sqlite_path}")
        if create and not location.sqlite_path.parent.exists():
            raise DatabaseError(f"directory does not exist: {location.sqlite_path.parent}")
        engine = create_engine(location.url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    try:
        return create_engine(location.url)
    except Exception as exc:  # noqa: BLE001 - bad URL or missing driver: one line
        raise DatabaseError(f"cannot open database {location.describe()}: {exc}") from None
