"""Thin wrapper over Alembic that works from an installed package.

The scripts live in ``migrations/`` in the repository and ship as
``opregistry.migrations``; we locate them relative to this package.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from opregistry.db.engine import database_name, translated
from opregistry.db.location import DatabaseLocation
from opregistry.db.vocabulary import HEAD_REVISION
from opregistry.errors import DatabaseError, OpregistryError
from opregistry.shown import Shown

# the PostgreSQL advisory lock under which migrations run (migrations/env.py takes it)
MIGRATION_LOCK = 7306071887


def scripts_location() -> Path:
    package_dir = Path(__file__).resolve().parent.parent
    for candidate in (package_dir / "migrations", package_dir.parent / "migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise DatabaseError("migration scripts not found (is opregistry installed correctly?)")


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(scripts_location()))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    with translated(engine, "upgrade"):
        command.upgrade(alembic_config(engine), revision)


def create_file(location: DatabaseLocation, revision: str = "head") -> str | None:
    """A new SQLite database at ``location`` migrated to ``revision``, built in a
    temporary file beside it and linked into place only when complete: a full disk or
    any other failure leaves no file (not an empty one). Returns its revision."""
    import os
    import tempfile

    from opregistry.db.engine import make_engine
    from opregistry.files import umask

    path = location.sqlite_path
    assert path is not None
    location.check_file(create=True)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise DatabaseError(f"cannot create {path}: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp's 0600 is not what sqlite3 would give
        engine = make_engine(DatabaseLocation(f"sqlite:///{tmp}", tmp, shipped=False),
                             create=True)
        try:
            upgrade(engine, revision)
            reached = current(engine)
        finally:
            engine.dispose()
        try:
            os.link(tmp, path)  # never replaces a file another process made meanwhile
        except FileExistsError:
            raise DatabaseError(f"cannot create {path}: another process created it "
                                "meanwhile; run the command again") from None
        except OSError as exc:
            raise DatabaseError(f"cannot create {path}: {exc.strerror or exc}") from None
        return reached
    except DatabaseError as exc:  # name the file the user asked for, not the temporary one
        raise DatabaseError(str(exc).replace(str(tmp), str(path))) from None
    finally:
        for leftover in (tmp, *(tmp.with_name(tmp.name + s) for s in ("-journal", "-wal",
                                                                        "-shm"))):
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass


def downgrade(engine: Engine, revision: str) -> None:
    with translated(engine, "downgrade"):
        command.downgrade(alembic_config(engine), revision)


def stamp(engine: Engine, revision: str) -> None:
    with translated(engine, "stamp"):
        command.stamp(alembic_config(engine), revision)


def heads() -> list[str]:
    config = Config()
    config.set_main_option("script_location", str(scripts_location()))
    return list(ScriptDirectory.from_config(config).get_heads())


def current(engine: Engine) -> str | None:
    with translated(engine, "read"), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


# tables every revision since 0001_initial has; and every table any revision made
_FIRST_TABLES = frozenset({"releases", "op_defs", "release_ops", "gradient_functions",
                           "orphan_gradients", "python_names", "release_python_names"})
_OUR_TABLES = _FIRST_TABLES | {"op_inputs", "function_sources", "op_xla", "xla_verdicts",
                                 "op_xla_variants", "name_traces", "release_name_traces"}


def revisions() -> frozenset[str]:
    """Every revision of opregistry's migrations."""
    config = Config()
    config.set_main_option("script_location", str(scripts_location()))
    return frozenset(s.revision for s in ScriptDirectory.from_config(config).walk_revisions())


def owned_revision(engine: Engine, *, new: bool = False) -> str | None:
    """The revision of a database that is provably opregistry's: its ``alembic_version``
    names one of our revisions and its tables are ours (another application's Alembic
    database has an ``alembic_version`` too). ``new``: an empty database (no tables;
    None) is accepted, for the commands that create the schema. The one rule every
    write command asks before it touches a database; anything else is DatabaseError.

    The revision and the tables are read in one transaction: read apart, another
    process migrating the same new file in between looks like a foreign database."""
    with translated(engine, "read"), engine.connect() as connection, connection.begin():
        if connection.dialect.name == "postgresql":  # SQLite: BEGIN IMMEDIATE (writers)
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        tables = set(inspect(connection).get_table_names())
        found = (connection.exec_driver_sql("SELECT version_num FROM alembic_version").all()
                 if "alembic_version" in tables else [])
    tables.discard("alembic_version")
    where = database_name(engine)
    if not found and not tables:
        if new:
            return None
        raise DatabaseError(f"{where} is not an opregistry database (it has no tables)")
    if not found:
        raise DatabaseError(f"{where} is not an opregistry database: it has tables but no "
                            "opregistry schema revision")
    revision = str(found[0][0])
    if len(found) > 1 or revision not in revisions():
        shown = ", ".join(repr(str(row[0])[:40]) for row in found[:3])
        raise DatabaseError(f"{where} is not an opregistry database: its alembic_version "
                            f"({shown}) is not a revision of opregistry's migrations")
    if not _FIRST_TABLES <= tables or tables - _OUR_TABLES:
        odd = sorted(tables - _OUR_TABLES) or sorted(_FIRST_TABLES - tables)
        raise DatabaseError(f"{where} is not an opregistry database: "
                            + ("tables opregistry never makes" if tables - _OUR_TABLES
                               else "tables missing that opregistry always has")
                            + f" ({', '.join(odd[:5])})")
    return revision


def ensure_current(engine: Engine) -> None:
    """Bring a new, empty database to head; refuse one at another revision, or one
    that is not provably opregistry's (``owned_revision``)."""
    revision = owned_revision(engine, new=True)
    if revision == HEAD_REVISION:
        return
    if revision is None:
        upgrade(engine)
        return
    raise DatabaseError(
        f"the database schema is at {revision}, this opregistry needs {HEAD_REVISION}: "
        "run `opregistry db upgrade`")


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


def downgrade_losses(engine: Engine, revision: str) -> list[tuple[int, str]]:
    """What migrating down to ``revision`` deletes, counted: (6, "op-library release")."""
    from sqlalchemy import text

    scripts = ScriptDirectory.from_config(alembic_config(engine))
    revision_now = current(engine)
    if revision_now is None:
        return []
    try:
        undone = [s.revision for s in scripts.iterate_revisions(revision_now, revision)
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
                    lost.append((n, what))
    return lost


@dataclass(frozen=True, repr=False)
class SchemaRevision(Shown):
    """What ``db current`` shows: the database's schema revision and the head(s)."""

    revision: str | None  # None: no schema yet (base)
    heads: tuple[str, ...]

    @property
    def at_head(self) -> bool:
        return self.revision in self.heads
