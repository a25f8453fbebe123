"""Alembic environment: runs against the engine handed over by opregistry.db.migrate."""
from alembic import context
from sqlalchemy import create_engine

from opregistry.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine") or create_engine(
        config.get_main_option("sqlalchemy.url"))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # two processes migrating one database queue here (SQLite: BEGIN IMMEDIATE)
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7306071887)")
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            # SQLite cannot ALTER most things: batch mode copies tables instead.
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
