"""Op-library releases and a nightly beside TensorFlow's releases, on a small database
built here from hand-written documents: how releases are named and chosen, what
--library filters, which library release the analysis uses for a TF release."""
from __future__ import annotations

import pytest
from documents import document as _document  # tests/unit is on sys.path
from documents import op as _op

import opregistry
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.db.store import using
from opregistry.db.versions import is_prerelease
from opregistry.errors import OpregistryError, UnknownReleaseError
from opregistry.registry.facts import op_facts


def _library(tf_version: str, version: str, ops: list) -> dict:
    doc = _document(tf_version, ops)
    doc["library"] = {"name": "mylib", "version": version, "modules": ["mylib"]}
    return doc


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("libs") / "libs.sqlite"
    engine = make_engine(resolve(path), create=True)
    for version in ("2.1.0", "2.2.0", "2.3.0-dev20260101"):
        load(engine, _document(version, [_op("MatMul", "registered", "differentiable",
                                             [("a", "gradient"), ("b", "gradient")])]))
    load(engine, _library("2.1.0", "1.0", [_op("MyOp", "missing")]))
    load(engine, _library("2.2.0", "1.1", [
        _op("MyOp", "registered", "differentiable", [("x", "gradient")]),
        _op("MyOtherOp", "no_gradient")]))
    engine.dispose()
    return path


def test_latest_is_the_newest_final_release_and_nightly_the_newest_pre_release(db):
    assert is_prerelease("2.3.0-dev20260101") and is_prerelease("2.16.0rc0")
    assert not is_prerelease("2.21.0")
    # the parser version_key sorts with: what sorts before its final is a pre-release
    assert is_prerelease("2.16.0a1") and is_prerelease("2.16.0b2") and \
        is_prerelease("2.23.0.dev20261026")
    assert not any(map(is_prerelease, ("2.16.0.post1", "2.16.0-1", "", "nightly-ish")))
    assert opregistry.ops(db=db)[0].release == "2.2.0"
    assert opregistry.ops("nightly", db=db)[0].release == "2.3.0-dev20260101"
    summaries = opregistry.releases(db=db)
    assert [(s.label, s.prerelease) for s in summaries] == [
        ("2.1.0", False), ("2.2.0", False), ("2.3.0-dev20260101", True),
        ("mylib 1.0", False), ("mylib 1.1", False)]
    assert [s.label for s in opregistry.releases(db=db, library="mylib")] == [
        "mylib 1.0", "mylib 1.1"]
    assert [s.label for s in opregistry.releases(db=db, library="tensorflow")][-1] == \
        "2.3.0-dev20260101"
    with pytest.raises(UnknownReleaseError, match="op library 'nolib'.*mylib"):
        opregistry.releases(db=db, library="nolib")


def test_a_library_release_is_named_by_its_version_or_its_tensorflow(db):
    with using(db) as store:
        assert store.release("1.0", library="mylib").library_version == "1.0"
        assert store.release("2.2", library="mylib").library_version == "1.1"  # by TF
        assert store.release("latest", library="mylib==1.0").library_version == "1.0"
        assert store.release("latest", library="mylib").library_version == "1.1"
        assert store.release_versions() == ["2.1.0", "2.2.0", "2.3.0-dev20260101"]
        with pytest.raises(UnknownReleaseError, match="release of mylib.*1.0, 1.1"):
            store.release("3.0", library="mylib")


def test_library_filters_on_lookup_ops_and_diff(db):
    rows = opregistry.lookup("MyOp", db=db).rows
    assert [(r.release_label, r.release, r.gradient) for r in rows] == [
        ("mylib 1.0", "2.1.0", "missing"), ("mylib 1.1", "2.2.0", "registered")]
    assert [r.release_label for r in opregistry.lookup("MyOp", "2.2", db=db).rows] == [
        "mylib 1.1"]  # a TF release brings the libraries harvested with it
    with pytest.raises(OpregistryError, match="not an op of op library tensorflow"):
        opregistry.lookup("MyOp", library="tensorflow", db=db)
    assert [r.op for r in opregistry.ops(library="mylib", db=db)] == ["MyOp", "MyOtherOp"]
    assert [r.op for r in opregistry.ops("1.0", library="mylib", db=db)] == ["MyOp"]
    result = opregistry.diff("1.0", "1.1", library="mylib", db=db)
    assert (result.before, result.after) == ("mylib 1.0", "mylib 1.1")
    assert [t.op for t in result.transitions] == ["MyOp"]
    assert [r.op for r in result.added] == ["MyOtherOp"]


def test_the_analysis_takes_each_library_release_harvested_with_its_tensorflow(db):
    version, facts = op_facts("2.1", ["MatMul", "MyOp", "Unknown"], db=db)
    assert version == "2.1.0" and set(facts) == {"MatMul", "MyOp"}
    assert facts["MatMul"].library is None
    assert (facts["MyOp"].library, facts["MyOp"].gradient) == ("mylib 1.0", "missing")
    _, newer = op_facts("2.2", ["MyOp"], db=db)
    assert (newer["MyOp"].library, newer["MyOp"].gradient) == ("mylib 1.1", "registered")
    _, nightly = op_facts("nightly", ["MyOp"], db=db)  # the nearest older: 2.2.0's
    assert nightly["MyOp"].library == "mylib 1.1"


def test_a_library_release_replaces_only_itself(db, tmp_path):
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(db.read_bytes())
    engine = make_engine(resolve(copy), create=True)
    again = load(engine, _library("2.2.0", "1.1", [_op("MyOp", "missing")]))
    engine.dispose()
    assert again.replaced and again.library == "mylib 1.1"
    assert opregistry.lookup("MatMul", "2.2", db=copy).rows[0].gradient == "registered"
    assert [r.gradient for r in opregistry.lookup("MyOp", db=copy).rows] == [
        "missing", "missing"]
