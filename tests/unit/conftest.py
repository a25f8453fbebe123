"""The quick tier's fixtures: no TensorFlow, no harvest. ``small_db`` builds a real
SQLite database (migrated by the real code, loaded by the real loader) from small
hand-written harvest documents (tests/unit/documents.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from documents import default_document  # tests/unit is on sys.path

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve

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
