"""Keeping a database small: VACUUM after loads and migrations.

Re-loading a release replaces its rows and a migration that rebuilds a table (0008)
leaves the old pages free inside a SQLite file; only VACUUM gives them back.
"""
from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from opregistry.db.engine import translated


def compact(engine: Engine) -> tuple[int, int] | None:
    """VACUUM the database: a SQLite file is rewritten without its free pages ((size
    before, size after) in bytes); PostgreSQL runs VACUUM ANALYZE (None: the server
    keeps the space for its next rows)."""
    with translated(engine, "compact"):
        if engine.dialect.name == "sqlite" and engine.url.database:
            path = Path(engine.url.database)
            before = path.stat().st_size
            # on the driver's connection: the engine begins a transaction for every
            # statement (BEGIN IMMEDIATE), and VACUUM runs outside of one
            raw = engine.raw_connection()
            try:
                raw.driver_connection.execute("VACUUM")  # type: ignore[union-attr]
            finally:
                raw.close()
            return before, path.stat().st_size
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    return None
