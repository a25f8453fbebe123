"""Thin wrapper over Alembic that works from an installed package.

The scripts live in ``migrations/`` in the repository and ship as
``opregistry.migrations``; we locate them relative to this package.
"""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from opregistry.db.engine import translated
from opregistry.db.vocabulary import HEAD_REVISION
from opregistry.errors import DatabaseError


def scripts_location() -> Path:
    package_dir = Path(__file__).resolve().parent.parent
    for candidate in (package_dir / "migrations", package_dir.parent / "migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise DatabaseError("migration scripts not found (is opregistry installed correctly?)")


def _config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(scripts_location()))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    with translated(engine, "upgrade"):
        command.upgrade(_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    with translated(engine, "downgrade"):
        command.downgrade(_config(engine), revision)


def stamp(engine: Engine, revision: str) -> None:
    with translated(engine, "stamp"):
        command.stamp(_config(engine), revision)


def heads() -> list[str]:
    config = Config()
    config.set_main_option("script_location", str(scripts_location()))
    return list(ScriptDirectory.from_config(config).get_heads())


def current(engine: Engine) -> str | None:
    with translated(engine, "read"), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def ensure_current(engine: Engine) -> None:
    """Bring a new, empty database to head; refuse one at another revision."""
    revision = current(engine)
    if revision == HEAD_REVISION:
        return
    if revision is None:
        with translated(engine, "read"):
            tables = set(inspect(engine).get_table_names())
        if tables - {"alembic_version"}:
            raise DatabaseError("the database has tables but no opregistry schema revision")
        upgrade(engine)
        return
    raise DatabaseError(
        f"the database schema is at {revision}, this opregistry needs {HEAD_REVISION}: "
        "run `opregistry db upgrade`")
