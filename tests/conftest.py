"""Shared fixtures: one real harvest of the installed TensorFlow per test session."""
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
from cli_run import ROOT, run_cli  # noqa: E402,F401  (tests import them from cli_run)


@pytest.fixture(scope="session")
def tf_document(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The collector's document for the TensorFlow installed next to the tests."""
    document = harvest_mod.collect(sys.executable)
    path = tmp_path_factory.mktemp("docs") / "current.json"
    path.write_text(json.dumps(document))
    return document


@pytest.fixture(scope="session")
def tf_document_path(tf_document: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doc") / "harvest.json"
    path.write_text(json.dumps(tf_document))
    return path


@pytest.fixture(scope="session")
def harvested_db(tf_document: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh SQLite database holding the installed release (do not modify)."""
    path = tmp_path_factory.mktemp("db") / "harvested.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, tf_document)
    engine.dispose()
    return path


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
