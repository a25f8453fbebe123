"""The quick tier's fixtures: no TensorFlow, no harvest. ``small_db`` builds a real
SQLite database (migrated by the real code, loaded by the real loader) from small
hand-written harvest documents (tests/unit/documents.py)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable

import forked  # tests/unit is on sys.path
import pytest
from documents import default_document

import opregistry
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


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The command line as tests/cli_run.py's ``run_cli`` runs it, in a process forked
    from this one (tests/unit/forked.py: no interpreter start-up per call)."""
    return forked.cli


@pytest.fixture(scope="session")
def site(shipped_site: tuple[Path, str]) -> Path:
    """The shipped site's folder, once its build said what it wrote (do not modify)."""
    out, stderr = shipped_site
    releases = len(opregistry.releases(db=shipped_database_path()))  # TF's, the nightly,
    # op libraries'
    assert re.fullmatch(rf".*: \d+ pages for \d+ ops in {releases} releases, [\d.]+ MB in "
                        r"[\d.]+ s\n", stderr), stderr
    return out


@pytest.fixture(scope="session")
def data(site: Path) -> dict[str, Any]:
    """The shipped site's data/ops.json."""
    return json.loads((site / "data" / "ops.json").read_text())
