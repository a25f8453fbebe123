"""Schema migrations without a harvest: one head that the code reads, migrations that
match the models, and the loader's refusals (the round trips with a real harvest loaded:
tests/test_db.py)."""
from __future__ import annotations

import os

import forked  # tests/unit is on sys.path
import pytest
from documents import default_document

from opregistry.db import migrate
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.db.models import Base
from opregistry.db.vocabulary import HEAD_REVISION
from opregistry.errors import DatabaseError


def test_exactly_one_head_and_it_is_what_the_code_reads():
    assert migrate.heads() == [HEAD_REVISION]


def test_migrations_match_the_models(tmp_path):
    engine = make_engine(resolve(tmp_path / "m.sqlite"), create=True)
    migrate.upgrade(engine)
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []


def test_an_older_schema_is_refused_by_the_loader(tmp_path):
    engine = make_engine(resolve(tmp_path / "old.sqlite"), create=True)
    migrate.upgrade(engine, "0007_input_by_output")  # a revision of ours, not head
    with pytest.raises(DatabaseError, match="opregistry db upgrade"):
        load(engine, default_document())


def test_shipped_database_is_never_written():
    with pytest.raises(DatabaseError, match="read-only"):
        make_engine(resolve(None), create=True)


def test_harvest_refuses_an_older_schema_before_it_starts_the_collector(tmp_path):
    """A load into a database at another revision fails; the harvest says so before it
    spends minutes collecting (it used to collect first and fail at the load)."""
    path = tmp_path / "old.sqlite"
    engine = make_engine(resolve(path), create=True)
    migrate.upgrade(engine, "0007_input_by_output")  # a revision of ours, not head
    engine.dispose()
    marker = tmp_path / "collector-started"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    python.chmod(0o755)
    done = forked.run(["harvest", "--python", str(python), "--db", str(path)],
                      env=os.environ, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("Error: ") and "opregistry db upgrade" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert not marker.exists()
