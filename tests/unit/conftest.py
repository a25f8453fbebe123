"""The quick tier's fixtures: no TensorFlow, no harvest. ``small_db`` builds a real
SQLite database (migrated by the real code, loaded by the real loader) from small
hand-written harvest documents (tests/unit/documents.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from documents import default_document  # tests/unit is on sys.path

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve, shipped_database_path

SmallDb = Callable[..., Path]


@pytest.fixture
def small_db(tmp_path_factory: pytest.TempPathFactory) -> SmallDb:
    """``small_db(*documents)``: a new SQLite file holding those documents' releases
    (``default_document()`` when none is given); each call makes a new file."""
    def build(*documents: dict[str, Any]) -> Path:
        path = tmp_path_factory.mktemp("small-db") / "small.sqlite"
        engine = make_engine(resolve(path), create=True)
        for doc in documents or (default_document(),):
            load(engine, doc)
        engine.dispose()
        return path

    return build


@pytest.fixture(scope="session")
def shipped_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(folder, stderr) of ``opregistry site`` on the shipped database: built once per
    session (it is the tier's most expensive input) for every test that reads it; a
    test that changes a site copies it first. CI spreads the tier by file (xdist
    ``--dist loadfile``, a session per worker), so the tests that read it live in one
    file, tests/unit/test_site_shipped.py: the site is built once in CI too."""
    out = tmp_path_factory.mktemp("shipped-site") / "site"
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = subprocess.run([sys.executable, "-m", "opregistry", "site", str(out), "--db",
                           str(shipped_database_path())], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return out, done.stderr
