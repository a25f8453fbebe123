"""Where the database is: a named URL or path, ``$OPREGISTRY_DB``, or the shipped file.

Standard library only: the lookup path must not pay for importing SQLAlchemy.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

from opregistry.errors import DatabaseError

if TYPE_CHECKING:
    from opregistry.db.store import Store

ENV_VAR = "OPREGISTRY_DB"
DEFAULT_BUSY_SECONDS = 30.0  # a load of every op of a release takes a few seconds
SHIPPED_NAME = "opregistry.sqlite"


@dataclass(frozen=True)
class DatabaseLocation:
    url: str  # a SQLAlchemy URL
    sqlite_path: Path | None  # set for SQLite files: the fast read path uses it
    shipped: bool  # the database that ships with the package (read-only)

    def writable(self) -> DatabaseLocation:
        """This location, for writing; the shipped database refuses, the one place
        that does (harvest, db upgrade/load and the engine all ask here)."""
        if self.shipped:
            from opregistry.errors import DatabaseError

            raise DatabaseError("the shipped database is read-only: name one to write "
                                "with --db or OPREGISTRY_DB")
        return self

    def check_file(self, create: bool = False) -> None:
        """Refuse, with one line, a SQLite path that cannot be a database: a directory,
        a device or FIFO, a path under /proc or /sys, a missing file (unless
        ``create``, in an existing writable directory)."""
        from opregistry.errors import DatabaseError

        path = self.sqlite_path
        if path is None:
            return
        if str(path).startswith(("/proc/", "/sys/")) or str(path) in ("/proc", "/sys"):
            raise DatabaseError(f"{path} is a system path, not a database file")
        try:
            info = path.stat()
        except FileNotFoundError:
            if not create:
                raise DatabaseError(f"database not found: {self.describe()}") from None
            if not path.parent.is_dir():
                raise DatabaseError(f"directory does not exist: {path.parent}") from None
            if not os.access(path.parent, os.W_OK):
                raise DatabaseError(f"cannot create {path}: its directory is not "
                                    "writable") from None
            return
        except OSError as exc:
            raise DatabaseError(f"cannot open database {path}: "
                                f"{exc.strerror or exc}") from None
        if stat.S_ISDIR(info.st_mode):
            raise DatabaseError(f"{path} is a directory, not a database file")
        if not stat.S_ISREG(info.st_mode):
            raise DatabaseError(f"{path} is not a regular file (a device or FIFO), "
                                "not a database file")

    def describe(self) -> str:
        if self.shipped:
            return f"shipped database {self.sqlite_path}"
        return str(self.sqlite_path) if self.sqlite_path else _hide_password(self.url)


# What every ``db=`` parameter takes: a SQLite path, a SQLAlchemy URL, a resolved
# location, an open Store (used as is, left open), or None ($OPREGISTRY_DB, else the
# shipped database). Strings in the Union: Store is only imported for type checking.
DbLike = Union[str, "os.PathLike[str]", DatabaseLocation, "Store", None]


def shipped_database_path() -> Path:
    """The database in ``data/``: inside the installed package, or the source tree."""
    here = Path(__file__).resolve().parent.parent  # the opregistry package
    installed = here / "data" / SHIPPED_NAME
    if installed.exists():
        return installed
    return here.parent / "data" / SHIPPED_NAME


def resolve(db: str | os.PathLike[str] | None = None) -> DatabaseLocation:
    """Resolve ``--db`` (or the environment, or the shipped default) to a location."""
    named = os.fspath(db) if db is not None else os.environ.get(ENV_VAR) or None
    if named is None:
        path = shipped_database_path()
        return DatabaseLocation(f"sqlite:///{path}", path, shipped=True)
    if "://" in named:
        if named.startswith("sqlite:///"):
            path = Path(named[len("sqlite:///"):])
            return DatabaseLocation(named, path, shipped=False)
        return DatabaseLocation(named, None, shipped=False)
    try:
        path = Path(named).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a relative path from a deleted working directory
        raise DatabaseError(f"cannot resolve the database path {named}: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
    return DatabaseLocation(f"sqlite:///{path}", path, shipped=False)


def _hide_password(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" in rest and ":" in rest.split("@", 1)[0]:
        user = rest.split("@", 1)[0].split(":", 1)[0]
        rest = f"{user}:***@{rest.split('@', 1)[1]}"
    return scheme + sep + rest


def busy_timeout() -> float:
    """Seconds a command waits for another process's lock before it gives up
    (``$OPREGISTRY_BUSY_TIMEOUT``, checked: a bad value is an error naming it)."""
    from opregistry.settings import BUSY_TIMEOUT, MAX_BUSY_SECONDS, seconds

    return seconds(BUSY_TIMEOUT, DEFAULT_BUSY_SECONDS, 0, MAX_BUSY_SECONDS)


def is_lock_error(text: str) -> bool:
    """Whether a driver's message says another process holds a lock."""
    return "database is locked" in text or "database table is locked" in text or \
        "busy" in text.lower() or "could not obtain lock" in text


def locked_error(where: str) -> DatabaseError:
    return DatabaseError(f"database {where} is locked by another process; retried for "
                         f"{busy_timeout():g} s (set OPREGISTRY_BUSY_TIMEOUT to wait "
                         "longer)")
