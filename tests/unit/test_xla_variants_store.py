"""XLA verdicts per attribute setting (issue 37) on the read side, without TensorFlow:
a format 5 document's ``xla.variants`` loaded into op_xla_variants, read back by
``lookup`` (and its JSON and table), migration 0009 in both directions, and the
verdict ``check --xla`` takes for a node's setting (``setting_verdict``)."""
from __future__ import annotations

import copy
import json
import re
import sqlite3
from types import SimpleNamespace
from typing import Any

import pytest
from documents import document as _document  # tests/unit is on sys.path
from documents import op as _op

import opregistry
from opregistry.db import migrate
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.db.validate import validate
from opregistry.errors import DocumentError
from opregistry.model.xla_check import setting_verdict

PIVOTING = {"status": "fails", "op": "TridiagonalSolve",
            "message": "UnimplementedError: Current implementation does not yet support "
                       "pivoting."}
COMPILES = {"status": "compiles"}
# as the harvest writes it: the op's own verdict (the OpDef's default: pivoting), then
# each setting compiled
XLA = {"device": "CPU", "forward": PIVOTING, "gradient": PIVOTING, "variants": [
    {"attrs": {"partial_pivoting": False}, "forward": COMPILES,
     "gradient": dict(COMPILES, agrees=True, max_error=1e-7, tolerance=0.02)},
    {"attrs": {"partial_pivoting": True}, "forward": PIVOTING, "gradient": PIVOTING}]}
DEFINITION: dict[str, Any] = {"name": "TridiagonalSolve",
                               "attrs": [{"name": "partial_pivoting", "type": "bool",
                                          "default": {"b": True}}]}


def _tridiagonal(xla=XLA):
    entry = _op("TridiagonalSolve", "registered", "differentiable",
                [("diagonals", "gradient"), ("rhs", "gradient")])
    entry["op_def"]["attrs"] = [dict(a) for a in DEFINITION["attrs"]]
    entry["probe"]["xla"] = copy.deepcopy(xla)
    return entry


@pytest.fixture()
def db(tmp_path):
    path = tmp_path / "variants.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, _document("2.21.0", [_tridiagonal()]))
    engine.dispose()
    return path


def test_lookup_reads_each_setting_beside_the_ops_own_verdict(db, cli):
    (row,) = opregistry.lookup("TridiagonalSolve", db=db).rows
    assert row.xla is not None and (row.xla.forward, row.xla.forward_op) == (
        "fails", "TridiagonalSolve")
    assert [(v.attrs, v.xla.forward, v.xla.gradient, v.xla.gradient_agrees)
            for v in row.xla.variants] == [
        ((("partial_pivoting", False),), "compiles", "compiles", True),
        ((("partial_pivoting", True),), "fails", "fails", None)]
    done = cli("lookup", "TridiagonalSolve", "--format", "json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    (variant, _) = json.loads(done.stdout)[0]["xla"]["variants"]
    assert variant["attrs"] == {"partial_pivoting": False} and variant["forward"] == "compiles"
    done = cli("lookup", "TridiagonalSolve", "--format", "csv", "--db", str(db))
    assert "partial_pivoting=False: compiles, gradient compiles; partial_pivoting=True: " \
        "fails: TridiagonalSolve, gradient fails: TridiagonalSolve" in done.stdout, done.stdout
    done = cli("explain", "TridiagonalSolve", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "XLA (CPU) in 2.21.0, per attribute setting:\n  partial_pivoting=False: " \
        "compiles, gradient compiles\n" in done.stdout, done.stdout


def test_the_node_setting_picks_the_verdict(db):
    (row,) = opregistry.lookup("TridiagonalSolve", db=db).rows
    assert row.xla is not None

    def node(**attrs):
        return {k: SimpleNamespace(b=v, i=0, s=b"") for k, v in attrs.items()}

    assert setting_verdict(row.xla, node(partial_pivoting=False), DEFINITION).forward == \
        "compiles"
    assert setting_verdict(row.xla, node(partial_pivoting=True), DEFINITION).forward == "fails"
    # a SavedModel leaves an attribute at its default out: the OpDef's default decides
    assert setting_verdict(row.xla, node(), DEFINITION).forward == "fails"
    assert setting_verdict(row.xla, node(), {"attrs": [{"name": "partial_pivoting",
                                                        "default": {"b": False}}]}
                           ).forward == "compiles"
    # no setting matches (an attribute no default names): the op's own verdict
    assert setting_verdict(row.xla, node(), {}) is row.xla


def test_bad_variants_are_refused():
    for bad in ({"forward": COMPILES}, {"attrs": [True], "forward": COMPILES},
                {"attrs": {"partial_pivoting": [1]}, "forward": COMPILES}):
        xla = dict(XLA, variants=[bad])
        with pytest.raises(DocumentError):
            validate(_document("2.21.0", [_tridiagonal(xla)]))


def test_migration_0009_both_ways_and_0008_is_still_read(db):
    engine = make_engine(resolve(db))
    migrate.downgrade(engine, "0008_xla_verdicts")
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        verdicts = conn.execute("SELECT COUNT(*) FROM xla_verdicts").fetchone()[0]
    conn.close()
    assert "op_xla_variants" not in tables
    assert verdicts == 1  # the compiling setting's verdict went with its table
    (row,) = opregistry.lookup("TridiagonalSolve", db=db).rows
    assert row.xla is not None and row.xla.forward == "fails" and row.xla.variants == ()
    migrate.upgrade(engine)
    load(engine, _document("2.21.0", [_tridiagonal()]))
    engine.dispose()
    (row,) = opregistry.lookup("TridiagonalSolve", db=db).rows
    assert row.xla is not None and len(row.xla.variants) == 2


def test_a_replaced_release_leaves_no_variant_verdict_behind(db):
    engine = make_engine(resolve(db))
    load(engine, _document("2.21.0", [_tridiagonal(dict(XLA, variants=[]))]))
    engine.dispose()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM op_xla_variants").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM xla_verdicts").fetchone()[0] == 1
    conn.close()


def test_an_xla_only_document_replaces_the_rows_of_its_ops_only(db):
    """data/harvest_xla_ops.py: the listed ops' XLA rows replaced, every other row kept;
    a release the database does not hold is refused."""
    engine = make_engine(resolve(db))
    matmul = _op("MatMul", "registered", "differentiable", [("a", "gradient")])
    matmul["probe"]["xla"] = {"device": "CPU", "forward": COMPILES, "gradient": COMPILES}
    load(engine, _document("2.21.0", [_tridiagonal(dict(XLA, variants=[])), matmul]))
    update = _document("2.21.0", [_tridiagonal()])
    update["probes"] = {"xla": True, "xla_only": True}
    result = load(engine, update)
    assert (result.ops, result.replaced) == (1, True)
    missing = _document("2.20.0", [_tridiagonal()])
    missing["probes"] = {"xla": True, "xla_only": True}
    with pytest.raises(DocumentError, match="which the database does not hold"):
        load(engine, missing)
    engine.dispose()
    (row,) = opregistry.lookup("TridiagonalSolve", db=db).rows
    assert row.xla is not None and len(row.xla.variants) == 2
    (row,) = opregistry.lookup("MatMul", db=db).rows
    assert row.xla is not None and row.xla.forward == "compiles"


def _two_releases(tmp_path):
    """2.20.0, where TridiagonalSolve without pivoting still fails under XLA, and 2.21.0
    (XLA above), each with ResizeBilinear, whose gradient with align_corners=True starts
    compiling: two ops with a setting that changed, one verdict per op unchanged."""
    settings: list[dict[str, Any]] = XLA["variants"]  # type: ignore[assignment]
    failing = dict(XLA, variants=[dict(settings[0], forward=PIVOTING, gradient=PIVOTING),
                                  settings[1]])
    refused = {"status": "fails", "op": "ResizeBilinearGrad", "message": "not implemented"}

    def resize(aligned_gradient):
        entry = _op("ResizeBilinear", "registered", "differentiable", [("images", "gradient")])
        entry["op_def"]["attrs"] = [{"name": "align_corners", "type": "bool",
                                     "default": {"b": False}}]
        entry["probe"]["xla"] = {"device": "CPU", "forward": COMPILES, "gradient": refused,
                                 "variants": [
            {"attrs": {"align_corners": False}, "forward": COMPILES, "gradient": refused},
            {"attrs": {"align_corners": True}, "forward": COMPILES,
             "gradient": aligned_gradient}]}
        return entry

    path = tmp_path / "two.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, _document("2.20.0", [_tridiagonal(failing), resize(refused)]))
    load(engine, _document("2.21.0", [_tridiagonal(), resize(COMPILES)]))
    engine.dispose()
    return path


def test_diff_upgrade_check_and_the_site_show_each_setting_that_changed(tmp_path, cli):
    """A verdict per attribute setting that changed between releases is a change of
    ``diff`` (every format), of ``upgrade-check`` (the model's ops only) and of the site
    (the export, the op page, the diff page), though the op's own verdict did not."""
    from opregistry.formats import TABULAR, render
    from opregistry.formats.diff import upgrade_rows
    from opregistry.model.readers import schema
    from opregistry.site import build_site

    db = _two_releases(tmp_path)
    result = opregistry.diff("2.20.0", "2.21.0", db=db)
    assert (result.xla_changes, result.xla_gradient_changes) == ((), ())
    assert [(c.op, c.setting, c.part, c.before, c.after)
            for c in result.xla_variant_changes] == [
        ("ResizeBilinear", "align_corners=True", "gradient", "fails", "compiles"),
        ("TridiagonalSolve", "partial_pivoting=False", "forward", "fails", "compiles"),
        ("TridiagonalSolve", "partial_pivoting=False", "gradient", "fails", "compiles")]
    for fmt in TABULAR:
        text = render(result, fmt)
        for c in result.xla_variant_changes:
            assert c.setting in text, (fmt, text)
    (shown,) = [c for c in json.loads(render(result, "json"))["xla_variant_changes"]
                if c["op"] == "ResizeBilinear"]
    assert shown == {"op": "ResizeBilinear", "setting": "align_corners=True",
                     "part": "gradient", "before": "fails", "after": "compiles",
                     "public": True}
    done = cli("diff", "2.20.0", "2.21.0", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "; 3 XLA changes" in done.stderr, done.stderr
    assert re.search(r"xla_gradient +ResizeBilinear +fails +compiles +yes +align_corners=True",
                     done.stdout), done.stdout

    graph = schema.message_classes()["GraphDef"]()
    for name in ("d", "r"):
        graph.node.add(name=name, op="Placeholder").attr["dtype"].type = schema.DT_FLOAT
    graph.node.add(name="t", op="TridiagonalSolve", input=["d", "r"]).attr["T"].type = \
        schema.DT_FLOAT
    model = tmp_path / "tridiagonal.pb"
    model.write_bytes(graph.SerializeToString())
    upgrade = opregistry.upgrade_check(model, "2.20.0", "2.21.0", db=db)
    assert {c.op for c in upgrade.xla_variant_changes} == {"TridiagonalSolve"}
    assert len(upgrade_rows(upgrade)) == 2
    done = cli("upgrade-check", str(model), "--from", "2.20.0", "--to", "2.21.0", "-f",
               "markdown", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("partial_pivoting=False") == 2 and "Resize" not in done.stdout
    assert "2 changes for this model's ops" in done.stderr, done.stderr

    site = tmp_path / "site"
    build_site(site, db=db)
    data = json.loads((site / "data" / "ops.json").read_text())
    variants = data["ops"]["TridiagonalSolve"]["releases"]["2.21.0"]["xla"]["variants"]
    assert [(v["setting"], v["state"]) for v in variants] == [
        ("partial_pivoting=False", "compiles"), ("partial_pivoting=True", "fails")]
    page = (site / "ops" / "TridiagonalSolve.html").read_text()
    assert page.count('class="xla-row xla-variant"') == 4  # two settings, two releases
    assert "under XLA with partial_pivoting=False fails → compiles" in page
    diff_page = (site / "diff" / "2.20.0--2.21.0.html").read_text()
    assert 'data-count="3"><h2 id="under-xla-per-setting">' in diff_page
    assert 'data-count="0"><h2 id="under-xla">' in diff_page
