"""Shared fixtures: one real harvest of the installed TensorFlow per test run (built once
across pytest-xdist's workers: tests/built_once.py), and how xdist spreads the files."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.harvest import runner as harvest_mod

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from built_once import built_once  # noqa: E402
from cli_run import ROOT, run_cli  # noqa: E402,F401  (tests import them from cli_run)

# files whose module or session fixtures hold live objects (Keras models that run in this
# process) shared between them: one xdist group, so one worker builds them once
_GROUPS = {"test_check_corpus.py": "corpus", "test_gradcheck_corpus.py": "corpus"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` each file is one group, as under ``loadfile`` (its module
    fixtures built once, in one worker), except the files in ``_GROUPS``, which share one."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            name = item.path.name
            item.add_marker(pytest.mark.xdist_group(_GROUPS.get(name, item.nodeid.split("::")[0])))


@pytest.fixture(scope="session")
def tf_document(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The collector's document for the TensorFlow installed next to the tests."""
    def build(folder: Path) -> None:
        (folder / "current.json").write_text(json.dumps(harvest_mod.collect(sys.executable)))

    folder = built_once(tmp_path_factory, "tf_document", build)
    return json.loads((folder / "current.json").read_text())


@pytest.fixture(scope="session")
def tf_document_path(tf_document: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doc") / "harvest.json"
    path.write_text(json.dumps(tf_document))
    return path


@pytest.fixture(scope="session")
def harvested_db(tf_document: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh SQLite database holding the installed release (do not modify)."""
    def build(folder: Path) -> None:
        engine = make_engine(resolve(folder / "harvested.sqlite"), create=True)
        load(engine, tf_document)
        engine.dispose()

    return built_once(tmp_path_factory, "harvested_db", build) / "harvested.sqlite"


@pytest.fixture
def db_copy(harvested_db: Path, tmp_path: Path) -> Path:
    """A private copy of the harvested database that a test may change."""
    target = tmp_path / "copy.sqlite"
    target.write_bytes(harvested_db.read_bytes())
    return target


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list:
    """The differential corpus (tests/corpus.py): real Keras applications, a keras-hub
    backbone, multi-head and multi-signature models, TF1, built once per test run."""
    import corpus as corpus_module

    return corpus_module.build(tmp_path_factory.mktemp("corpus") / "models")


@pytest.fixture(scope="session")
def corpus_by_name(corpus: list) -> dict:
    return {entry.name: entry for entry in corpus}
