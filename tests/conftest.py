"""Shared fixtures: one real harvest of the installed TensorFlow per test run (built once
across pytest-xdist's workers: tests/built_once.py), and the order xdist hands out files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve, shipped_database_path
from opregistry.harvest import runner as harvest_mod

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from built_once import built_once  # noqa: E402
from cli_run import ROOT, run_cli  # noqa: E402,F401  (tests import them from cli_run)

# the files that take longest (CI's --durations), longest first: handed out first under
# xdist's --dist loadfile, so no worker is left running one of them alone at the end.
# (Not --dist loadgroup: with pytest 9, xdist 3.8 can no longer add the group to a test's
# id, and loadgroup silently spreads a file's tests over the workers, one by one.)
# The TF tier's files take minutes, the quick tier's (tests/unit) seconds; a run holds
# files of one tier or of both, and the order within each list is what counts.
_LONG_FIRST = ["tests/test_random_differential_ci.py", "tests/test_check_xla.py",
               "tests/test_xla_differential.py", "tests/test_second_order_differential.py",
               "tests/test_random_differential.py",
               "tests/test_xla.py", "tests/test_check_corpus.py", "tests/test_xla_step.py",
               "tests/test_xla_keras_training.py", "tests/test_fuzz_readers.py",
               "tests/test_remedy_proofs.py", "tests/test_second_order.py",
               "tests/test_output_facts.py", "tests/test_remedies.py",
               "tests/test_cond_predicate.py", "tests/test_library_replay.py",
               "tests/test_second_release.py", "tests/test_guard_keras.py",
               # the quick tier: the first builds the shipped site (the other site files
               # wait for it: shipped_site below), which takes longest
               "tests/unit/test_site_failed_build.py", "tests/unit/test_contract.py",
               "tests/unit/test_cwd_and_full_disk.py", "tests/unit/test_db_refusals.py",
               "tests/unit/test_probe_workers.py", "tests/unit/test_site_links.py",
               "tests/unit/test_cli_commands.py", "tests/unit/test_fast_path.py",
               "tests/unit/test_hostile_models.py", "tests/unit/test_harvest_folders.py"]


def pytest_configure(config: pytest.Config) -> None:
    # xdist would hand out the files by their number of tests; the order of the items
    # (below) does that, after the long files
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if getattr(config.option, "numprocesses", None):  # xdist's controller
        stale = [name for name in _LONG_FIRST if not (config.rootpath / name).is_file()]
        if stale:  # a renamed file would silently lose its place
            raise pytest.UsageError(f"tests/conftest.py _LONG_FIRST names no file: {stale}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the files in ``_LONG_FIRST`` first, then the others by their number of
    tests, as xdist would order them (a file's tests keep their order). One worker keeps
    pytest's own order.

    The controller hands out the files in the order its workers collected them, so the
    sorting happens in the workers (``workerinput``), where xdist has set
    ``numprocesses`` to None."""
    if not (getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput")):
        return
    counts: dict[str, int] = {}
    for item in items:
        counts[_file(item)] = counts.get(_file(item), 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = _file(item)
        if name in _LONG_FIRST:
            return (_LONG_FIRST.index(name), 0)
        return (len(_LONG_FIRST), -counts[name])

    items.sort(key=rank)  # stable: a file's tests stay in collection order


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


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


@pytest.fixture(scope="session")
def shipped_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(folder, stderr) of ``opregistry site`` (a real process) on the shipped database:
    the quick tier's most expensive input, built once per run for every test that reads
    it, across xdist's workers too (tests/built_once.py), so its readers can live in
    several files that xdist spreads (tests/unit/test_site_shipped.py,
    test_site_links.py, test_site_failed_build.py, and the browser's tests/test_site.py);
    a test that changes a site copies it first."""
    def build(folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
        done = subprocess.run([sys.executable, "-m", "opregistry", "site", str(folder / "site"),
                               "--db", str(shipped_database_path())], capture_output=True,
                              text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        (folder / "stderr.txt").write_text(done.stderr)

    folder = built_once(tmp_path_factory, "shipped_site", build)
    return folder / "site", (folder / "stderr.txt").read_text()


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
