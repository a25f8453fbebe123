"""XLA (issue 25) on the read side: harvest documents with and without the ``xla``
fields (format 2 and 1), the op_xla rows per device, migration 0006 in both
directions, ``lookup``'s xla columns and ``ops --xla-gradient``. No TensorFlow."""
from __future__ import annotations

import copy
import sqlite3

import pytest
from documents import document as _document  # tests/unit is on sys.path
from documents import op as _op
from typer.testing import CliRunner

import opregistry
from opregistry.cli.app import app, load_commands
from opregistry.db import migrate
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.db.validate import validate
from opregistry.errors import DocumentError, OpregistryError

load_commands()

FAILS_GRADIENT = {
    "device": "CPU", "api": "tf.function(jit_compile=True)", "seconds": 0.9,
    "forward": {"status": "compiles"},
    "gradient": {"status": "fails", "op": "ResizeNearestNeighborGrad",
                 "message": "InvalidArgumentError: unsupported on XLA_CPU_JIT: "
                            "ResizeNearestNeighborGrad (No registered ...)"},
    "kernels": {"ResizeNearestNeighbor": ["CPU", "XLA_CPU_JIT"],
                "ResizeNearestNeighborGrad": ["CPU"]}}
COMPILES = {"device": "CPU", "forward": {"status": "compiles"},
            "gradient": {"status": "compiles", "agrees": True, "max_error": 0.0,
                         "tolerance": 0.02}}
STRUCTURE = {"device": "CPU", "forward": {"status": "compiles"},
             "gradient": {"status": "fails", "structure": "tensor_list_unknown_size",
                          "message": "InvalidArgumentError: XLA compilation requires a fixed "
                                     "tensor list size."}}


def _with_xla(entry, xla):
    entry["probe"]["xla"] = copy.deepcopy(xla)
    return entry


def _documents():
    first = _document("2.1.0", [
        _op("MatMul", "registered", "differentiable", [("a", "gradient"), ("b", "gradient")]),
        _op("Shape", "no_gradient")])
    first["format_version"] = 1  # before the XLA fields: still accepted
    second = _document("2.2.0", [
        _with_xla(_op("MatMul", "registered", "differentiable",
                      [("a", "gradient"), ("b", "gradient")]), COMPILES),
        _with_xla(_op("ResizeNearestNeighbor", "registered", "differentiable",
                      [("images", "gradient")]), FAILS_GRADIENT),
        _with_xla(_op("MatrixExponential", "registered", "differentiable",
                      [("input", "gradient")]), STRUCTURE),
        _op("Shape", "no_gradient")])
    third = _document("2.3.0", [  # the gradient of the resize starts compiling
        _with_xla(_op("ResizeNearestNeighbor", "registered", "differentiable",
                      [("images", "gradient")]), COMPILES),
        _with_xla(_op("MatrixExponential", "registered", "differentiable",
                      [("input", "gradient")]), STRUCTURE)])
    return first, second, third


@pytest.fixture(scope="module")
def xla_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("xla") / "xla.sqlite"
    engine = make_engine(resolve(path), create=True)
    for document in _documents():
        load(engine, document)
    engine.dispose()
    return path


def test_format_1_and_2_documents_validate_and_bad_xla_fields_do_not():
    first, second, _ = _documents()
    validate(first)
    validate(second)
    second["ops"][0]["probe"]["xla"]["gradient"]["status"] = "maybe"
    with pytest.raises(DocumentError, match=r"\$\.ops\[0\]\.probe\.xla\.gradient\.status"):
        validate(second)
    del second["ops"][0]["probe"]["xla"]["forward"]
    with pytest.raises(DocumentError, match="missing key 'forward'"):
        validate(second)


def test_one_row_per_op_and_device_where_xla_was_harvested(xla_db):
    with sqlite3.connect(xla_db) as conn:
        rows = conn.execute("SELECT r.version, x.op_name, x.device, v.forward, v.gradient, "
                            "v.gradient_op, v.gradient_structure, v.gradient_agrees FROM op_xla x "
                            "JOIN xla_verdicts v ON v.id = x.verdict_id "
                            "JOIN releases r ON r.id = x.release_id WHERE r.version = '2.2.0' "
                            "ORDER BY x.op_name").fetchall()
    assert rows == [
        ("2.2.0", "MatMul", "CPU", "compiles", "compiles", None, None, 1),
        ("2.2.0", "MatrixExponential", "CPU", "compiles", "fails", None,
         "tensor_list_unknown_size", None),
        ("2.2.0", "ResizeNearestNeighbor", "CPU", "compiles", "fails",
         "ResizeNearestNeighborGrad", None, None)]


def test_lookup_shows_xla_and_unknown_where_not_harvested(xla_db):
    rows = {r.release: r for r in opregistry.lookup("ResizeNearestNeighbor", db=xla_db).rows}
    xla = rows["2.2.0"].xla
    assert xla is not None
    assert xla.gradient == "fails"
    assert xla.gradient_blocker == "ResizeNearestNeighborGrad"
    old = {r.release: r for r in opregistry.lookup("MatMul", db=xla_db).rows}["2.1.0"]
    assert old.xla is None
    result = CliRunner().invoke(app, ["lookup", "MatMul", "--db", str(xla_db),
                                      "--format", "csv"])
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.strip().splitlines()
    assert "xla,xla_gradient" in header
    assert [line.split(",")[header.split(",").index("xla_gradient")] for line in lines] == [
        "unknown", "compiles"]
    table = CliRunner().invoke(app, ["lookup", "ResizeNearestNeighbor", "--db", str(xla_db)])
    assert "fails: ResizeNearestNeighborGrad" in table.stdout
    # the table leaves the XLA columns out where no release shown was harvested with XLA
    plain = CliRunner().invoke(app, ["lookup", "Shape", "--db", str(xla_db)])
    assert plain.exit_code == 0 and "xla" not in plain.stdout
    listed = CliRunner().invoke(app, ["ops", "--tf", "2.2", "--db", str(xla_db)])
    assert "xla_gradient" in listed.stdout.splitlines()[0]
    assert "fails: tensor_list_unknown_size" in listed.stdout


def test_ops_filters_by_the_gradients_xla_status(xla_db):
    def names(status, release="2.2"):
        return [r.op for r in opregistry.ops(release, xla_gradient=status, db=xla_db)]
    assert names("fails") == ["MatrixExponential", "ResizeNearestNeighbor"]
    assert names("compiles") == ["MatMul"]
    assert names("unknown") == ["Shape"]
    assert names("unknown", "2.1") == ["MatMul", "Shape"]
    with pytest.raises(OpregistryError, match="unknown XLA status 'broken'"):
        names("broken")
    result = CliRunner().invoke(app, ["ops", "--tf", "2.2", "--xla-gradient", "fails", "--db",
                                      str(xla_db), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert [line.split(",")[0] for line in result.stdout.strip().splitlines()[1:]] == [
        "MatrixExponential", "ResizeNearestNeighbor"]
    bad = CliRunner().invoke(app, ["ops", "--xla-gradient", "x", "--db", str(xla_db)])
    assert bad.exit_code == 2 and "Error: unknown XLA status" in bad.output


def test_diff_reports_xla_transitions_between_releases_harvested_with_it(xla_db):
    later = opregistry.diff("2.2", "2.3", db=xla_db)
    assert [(t.op, t.before, t.after) for t in later.xla_gradient_changes] == [
        ("ResizeNearestNeighbor", "fails", "compiles")]
    assert later.xla_changes == ()
    assert opregistry.diff("2.1", "2.2", db=xla_db).xla_gradient_changes == ()  # 2.1: none
    shown = CliRunner().invoke(app, ["diff", "2.2", "2.3", "--db", str(xla_db),
                                     "--format", "csv"])
    assert shown.exit_code == 0, shown.output
    assert "xla_gradient,ResizeNearestNeighbor,fails,compiles" in shown.stdout
    assert "1 XLA change" in shown.stderr


def test_migration_0006_down_and_up_with_xla_rows(tmp_path):
    path = tmp_path / "round.sqlite"
    engine = make_engine(resolve(path), create=True)
    for document in _documents():
        load(engine, document)
    refused = CliRunner().invoke(app, ["db", "downgrade", "0005_library_releases", "--db",
                                       str(path)])
    assert refused.exit_code == 2 and "deletes 5 XLA verdicts" in refused.output
    migrate.downgrade(engine, "0005_library_releases")
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "op_xla" not in tables and "release_ops" in tables
        assert conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0] == 3
    migrate.upgrade(engine)
    load(engine, _documents()[1])  # the XLA rows come back with a reload
    engine.dispose()
    assert [r.op for r in opregistry.ops("2.2", xla_gradient="fails", db=path)] == [
        "MatrixExponential", "ResizeNearestNeighbor"]


def test_an_op_without_a_gradient_holds_its_forward_verdict_itself(tmp_path):
    """Format 4: an op without a registered gradient has no probe record; the harvest
    compiles it alone and the document puts ``xla`` on the op. The loader stores its
    row, ``lookup`` shows it, and a bad verdict there is refused like a probe's."""
    shape, where = _op("Shape", "no_gradient"), _op("Where", "missing")
    shape["xla"] = {"device": "CPU", "forward": {"status": "compiles"},
                    "gradient": {"status": "unknown", "reason": "no gradient to compile"}}
    where["xla"] = {"device": "CPU", "forward": {
        "status": "fails", "op": "Where",
        "message": "InvalidArgumentError: unsupported on XLA_CPU_JIT: Where (No registered)"}}
    document = _document("2.4.0", [_with_xla(_op("MatMul", "registered", "differentiable", [
        ("a", "gradient"), ("b", "gradient")]), COMPILES), shape, where])
    validate(document)
    path = tmp_path / "alone.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, document)
    engine.dispose()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT op_name, forward, forward_op, gradient, gradient_reason "
                            "FROM op_xla JOIN xla_verdicts v ON v.id = verdict_id "
                            "ORDER BY op_name").fetchall()
    assert rows == [("MatMul", "compiles", None, "compiles", None),
                    ("Shape", "compiles", None, "unknown", "no gradient to compile"),
                    ("Where", "fails", "Where", "unknown", None)]
    found = opregistry.lookup("Where", db=path).rows[0].xla
    assert found is not None and (found.forward, found.forward_op) == ("fails", "Where")
    # releases --xla: every op compiled forward; the gradient columns, MatMul's only
    (counts,) = opregistry.releases(db=path)[0].xla
    assert (counts.ops, counts.forward, counts.gradient) == (
        3, {"compiles": 2, "fails": 1, "unknown": 0},
        {"compiles": 1, "fails": 0, "unknown": 0})
    bad = copy.deepcopy(document)
    bad["ops"][2]["xla"]["forward"]["status"] = "maybe"
    with pytest.raises(DocumentError, match=r"\$\.ops\[2\]\.xla\.forward\.status"):
        validate(bad)


def _answers(path):
    """What the read store says of every XLA fact: lookup's columns and release counts."""
    ops = ["MatMul", "ResizeNearestNeighbor", "MatrixExponential", "Shape"]
    rows = [(r.release, r.op, r.xla) for name in ops
            for r in opregistry.lookup(name, db=path).rows]
    counts = [(s.label, s.xla) for s in opregistry.releases(db=path)]
    return rows, counts


def test_migration_0008_moves_the_verdicts_both_ways_and_0007_is_still_read(tmp_path):
    """0008 stores each distinct verdict once; down to 0007 the wide op_xla comes back
    with every value, the read store answers the same at both revisions, and up again
    the same verdict rows (by digest) are made."""
    path = tmp_path / "verdicts.sqlite"
    engine = make_engine(resolve(path), create=True)
    for document in _documents():
        load(engine, document)
    at_head = _answers(path)
    with sqlite3.connect(path) as conn:
        before = conn.execute("SELECT COUNT(*), COUNT(DISTINCT verdict_id) FROM op_xla"
                              ).fetchone()
        digests = sorted(r[0] for r in conn.execute("SELECT digest FROM xla_verdicts"))
    assert before == (5, 3)  # COMPILES and STRUCTURE twice: one row each
    migrate.downgrade(engine, "0007_input_by_output")
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        wide = conn.execute("SELECT op_name, forward, gradient, gradient_op, "
                            "gradient_structure, gradient_agrees, kernels IS NOT NULL "
                            "FROM op_xla ORDER BY release_id, op_name").fetchall()
    assert "xla_verdicts" not in tables
    assert wide == [
        ("MatMul", "compiles", "compiles", None, None, 1, 0),
        ("MatrixExponential", "compiles", "fails", None, "tensor_list_unknown_size", None, 0),
        ("ResizeNearestNeighbor", "compiles", "fails", "ResizeNearestNeighborGrad", None, None,
         1),
        ("MatrixExponential", "compiles", "fails", None, "tensor_list_unknown_size", None, 0),
        ("ResizeNearestNeighbor", "compiles", "compiles", None, None, 1, 0)]
    assert _answers(path) == at_head  # 0007 is read as it is
    migrate.upgrade(engine)
    engine.dispose()
    with sqlite3.connect(path) as conn:
        assert sorted(r[0] for r in conn.execute("SELECT digest FROM xla_verdicts")) == digests
    assert _answers(path) == at_head


def test_a_replaced_release_leaves_no_verdict_nobody_points_at(tmp_path):
    path = tmp_path / "garbage.sqlite"
    engine = make_engine(resolve(path), create=True)
    first, second, third = _documents()
    load(engine, second)
    changed = copy.deepcopy(second)
    for op in changed["ops"]:
        if "xla" in op.get("probe", {}):
            op["probe"]["xla"]["forward"] = {"status": "fails", "op": op["name"]}
    load(engine, changed)
    engine.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM xla_verdicts WHERE id NOT IN "
                            "(SELECT verdict_id FROM op_xla)").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM xla_verdicts").fetchone()[0] == 3


def test_db_vacuum_gives_back_what_migration_0008_left_free_and_keeps_every_answer(
        tmp_path, cli):
    """A release replaced by a smaller harvest (or a migration that rebuilds a table)
    leaves pages free in the file until ``db vacuum``, which gives them back and
    changes no answer."""
    path = tmp_path / "vacuum.sqlite"
    engine = make_engine(resolve(path), create=True)
    big = _document("2.4.0", [_with_xla(_op(f"Op{i}", "registered", "differentiable",
                                            [("x", "gradient")]), dict(COMPILES, kernels={
                                                f"Op{i}": ["CPU", "XLA_CPU_JIT"]}))
                              for i in range(400)])
    for document in (*_documents(), big, _document("2.4.0", [_op("Shape", "no_gradient")])):
        load(engine, document)
    migrate.downgrade(engine, "0007_input_by_output")
    migrate.upgrade(engine)
    engine.dispose()
    answers = _answers(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0
    size = path.stat().st_size
    done = cli("db", "vacuum", "--db", str(path))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert done.stderr == (f"{path}: vacuumed, {size:,} bytes before, "
                           f"{path.stat().st_size:,} after\n")
    assert path.stat().st_size < size
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert _answers(path) == answers
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE mine (x)")
    refused = cli("db", "vacuum", "--db", str(other))
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"Error: {other} is not an opregistry database")
    assert refused.stderr.count("\n") == 1
