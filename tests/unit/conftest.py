"""The quick tier's fixtures: no TensorFlow, no harvest. ``small_db`` builds a real
SQLite database (migrated by the real code, loaded by the real loader) from small
hand-written harvest documents (tests/unit/documents.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import forked  # tests/unit is on sys.path
import pytest
from built_once import built_once  # tests/ too (tests/conftest.py)
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
def shipped_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(folder, stderr) of ``opregistry site`` (a real process) on the shipped database:
    the tier's most expensive input, built once per run for every test that reads it,
    across xdist's workers too (tests/built_once.py), so its readers can live in several
    files that xdist spreads (tests/unit/test_site_shipped.py, test_site_links.py,
    test_site_failed_build.py); a test that changes a site copies it first."""
    def build(folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
        done = subprocess.run([sys.executable, "-m", "opregistry", "site", str(folder / "site"),
                               "--db", str(shipped_database_path())], capture_output=True,
                              text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        (folder / "stderr.txt").write_text(done.stderr)

    folder = built_once(tmp_path_factory, "shipped_site", build)
    return folder / "site", (folder / "stderr.txt").read_text()


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
