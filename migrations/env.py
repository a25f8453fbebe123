"""Alembic environment: runs against the engine handed over by opregistry.db.migrate."""
from alembic import context
from sqlalchemy import create_engine

from opregistry.db.migrate import MIGRATION_LOCK
from opregistry.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine") or create_engine(
        config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # batch mode copies a table and drops the original, which a foreign key
            # from another table would refuse; the pragma only takes effect outside a
            # transaction, and the keys are checked before the migration commits
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        with connection.begin():
            if connection.dialect.name == "postgresql":
                # two processes migrating one database queue here (SQLite: BEGIN IMMEDIATE)
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                # SQLite cannot ALTER most things: batch mode copies tables instead.
                render_as_batch=sqlite,
            )
            with context.begin_transaction():
                context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration broke foreign keys: {broken[:3]}")
        if sqlite:
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")


run_migrations_online()
