"""A hot journal: what a write killed in the middle (or stopped by a full disk) leaves
beside a SQLite file. SQLite rolls it back on the next read of a connection that may
write; the read store's read-only connections refuse to read until then
(SQLITE_READONLY_ROLLBACK: "attempt to write a readonly database"), so it rolls the
journal back itself and says so (a DatabaseRecovered warning: one line on stderr).

Standard library only, as the read store.
"""
from __future__ import annotations

import sqlite3
import warnings

from opregistry.db.location import DatabaseLocation, busy_timeout, is_lock_error, locked_error
from opregistry.errors import DatabaseError, DatabaseRecovered, first_line


def needs_rollback(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_READONLY_ROLLBACK: a read-only connection met a hot journal."""
    name = getattr(exc, "sqlite_errorname", None)  # Python 3.11+
    if name is not None:
        return bool(name == "SQLITE_READONLY_ROLLBACK")
    return "attempt to write a readonly database" in str(exc)


def roll_back_hot_journal(location: DatabaseLocation) -> None:
    """Roll back the journal beside ``location``'s file: a connection that may write
    reads the file once (the data is then that of the last completed write)."""
    path = location.sqlite_path
    assert path is not None
    where = location.describe()
    try:
        writer = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, timeout=busy_timeout())
        try:
            writer.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            writer.close()
    except sqlite3.Error as exc:
        if is_lock_error(first_line(exc)):
            raise locked_error(where) from None
        raise DatabaseError(
            f"{where} has the journal of an interrupted write ({path.name}-journal), which "
            f"must be rolled back before it is read, and this process cannot "
            f"({first_line(exc)}): run `opregistry db upgrade --db {path}` as a user who "
            "may write it") from None
    warnings.warn(DatabaseRecovered(
        f"{where}: rolled back the journal of an interrupted write before reading "
        "(the data is that of the last completed write)"), stacklevel=3)
