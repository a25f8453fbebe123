"""The read side on a small SQLite database built here from a hand-written harvest
document (no TensorFlow, no harvest): releases by name, lookups, ops, diffs."""
from __future__ import annotations

import pytest
from documents import document as _document  # tests/unit is on sys.path
from documents import op as _op

import opregistry
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.errors import UnknownOpError, UnknownReleaseError


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("unit") / "small.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, _document("2.1.0", [
        _op("Floor", "registered", "none", [("x", "none")]),
        _op("MatMul", "registered", "differentiable", [("a", "gradient"), ("b", "gradient")]),
        _op("Shape", "no_gradient")]))
    load(engine, _document("2.2.0", [
        _op("Floor", "registered", "none", [("x", "none")]),
        _op("MatMul", "registered", "partial", [("a", "gradient"), ("b", "none")]),
        _op("Shape", "no_gradient"), _op("NewOp", "missing")]))
    engine.dispose()
    return path


def test_releases_are_named_by_version_minor_or_latest(small_db):
    assert [r.release for r in opregistry.releases(db=small_db)] == ["2.1.0", "2.2.0"]
    assert opregistry.lookup("MatMul", "2.2", db=small_db).rows[0].effective == "partial"
    assert opregistry.lookup("MatMul", "latest", db=small_db).rows[0].release == "2.2.0"
    assert opregistry.lookup("MatMul", "2.1.0:tensorflow-cpu", db=small_db).rows[0] \
        .effective == "differentiable"
    with pytest.raises(UnknownReleaseError, match=r"holds: 2\.1\.0, 2\.2\.0\)"):
        opregistry.lookup("MatMul", "9.9", db=small_db)


def test_lookup_by_python_name_and_unknown_ops(small_db):
    result = opregistry.lookup("tf.math.floor", "2.2", db=small_db)
    assert [r.op for r in result.rows] == ["Floor"] and result.rows[0].via == "tf.math.floor"
    with pytest.raises(UnknownOpError, match="did you mean"):
        opregistry.lookup("MatMull", db=small_db)


def test_ops_filters_and_diff(small_db):
    assert [r.op for r in opregistry.ops("2.2", status="missing", db=small_db)] == ["NewOp"]
    diff = opregistry.diff("2.1", "2.2", db=small_db)
    assert [a.op for a in diff.added] == ["NewOp"]
    assert [(e.op, e.before, e.after) for e in diff.effective_transitions] == [
        ("MatMul", "differentiable", "partial")]


def test_the_column_list_names_columns_of_the_orm_tables():
    """OP_COLUMNS is the one list of what a row of an op in a release holds: every
    entry is a column of its table, and every release_ops column is read."""
    from opregistry.db.models import GradientFunction, OpDef, Release, ReleaseOp, XlaVerdict
    from opregistry.db.store import OP_COLUMNS

    tables = {"ro": ReleaseOp.__table__, "r": Release.__table__, "od": OpDef.__table__,
              "gf": GradientFunction.__table__, "x": XlaVerdict.__table__}
    for name, qualified in OP_COLUMNS.items():
        alias, column = qualified.split(".")
        assert column in tables[alias].c, (name, qualified)
    read = {c.split(".")[1] for c in OP_COLUMNS.values() if c.startswith("ro.")}
    keys = {"id", "release_id", "op_def_id", "gradient_function_id"}
    assert set(tables["ro"].c.keys()) - keys == read


@pytest.mark.parametrize("names", [set(), {"MatMul"}, {"MatMul", "NewOp", "NoSuch"},
                                   {f"Op{i}" for i in range(600)} | {"Floor"}])
def test_rows_of_some_ops_are_those_rows_of_every_op(small_db, names):
    """``ops=`` (a model's op types, for check's start-up) reads only those rows; past
    MAX_NAMES it reads all, and the caller keeps its own."""
    from opregistry.db.store import using

    with using(small_db) as store:
        rid = store.release("2.2.0").id
        every = [r for r in store.op_rows(release_id=rid) if r["op"] in names]
        assert store.op_rows(release_id=rid, ops=names) == every or len(names) > 500
        assert [r for r in store.op_rows(release_id=rid, ops=names) if r["op"] in names] == every
        inputs = [r for r in store.inputs(rid) if r["op_name"] in names]
        assert [r for r in store.inputs(rid, ops=names) if r["op_name"] in names] == inputs
        assert store.inputs(rid, ops=names) == inputs or len(names) > 500
        assert [r for r in store.inputs(rid, "MatMul", ops=names) if r["op_name"] in names] \
            == [r for r in inputs if r["op_name"] == "MatMul"]
