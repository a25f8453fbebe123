"""Name traces in the database (revision 0010, issue 39): what TensorFlow built when a
public Python name was called with generated arguments, stored per release, and how
``lookup`` and ``explain`` use them: the op shown first is one the trace built, every
row says whether TF built it, and a name no trace confirms says so and why. Real SQLite
files from hand-written documents (tests/unit/documents.py); TF's own traces are
tested in tests/test_python_name_traces.py and tests/unit/test_shipped_name_traces.py."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from documents import document, op

from opregistry.db.engine import make_engine
from opregistry.db.loader import load, load_name_traces, replace_python_names
from opregistry.db.location import resolve
from opregistry.db.store import using
from opregistry.errors import DocumentError
from opregistry.registry.lookup import lookup, lookup_many
from opregistry.remedies.explain import explain

OPS = [op("Alpha", "registered", "differentiable", [("x", "gradient")]),
       op("Beta", "missing"), op("Where", "registered"), op("SelectV2", "registered"),
       op("Floor", "registered", "none", [("x", "none")])]
NAMES = [
    # a composite: its code creates Alpha and Beta, named after neither (Alpha first)
    {"name": "tf.compose", "op": "Alpha", "method": "calls_wrapper_multi"},
    {"name": "tf.compose", "op": "Beta", "method": "calls_wrapper_multi"},
    {"name": "tf.math.floor", "op": "Floor", "method": "generated_wrapper"},
    {"name": "tf.where", "op": "Where", "method": "calls_wrapper_multi"},
    {"name": "tf.rnn", "op": "Alpha", "method": "calls_wrapper"},
    {"name": "tf.old_only", "op": "Alpha", "method": "calls_wrapper"},
]
TRACES: list[dict[str, Any]] = [
    {"name": "tf.compose", "family": "square", "ops": ["Beta", "Mul"]},
    {"name": "tf.math.floor", "family": "square", "ops": ["Floor"]},
    # the required arguments only: tf.where(c), not the usual tf.where(c, x, y)
    {"name": "tf.where", "family": "bool", "ops": ["Where"]},
    {"name": "tf.rnn", "family": None, "why": "no generated argument for parameter 'cell'"},
]


def _db(tmp_path: Path, traces: list[dict[str, Any]] | None = TRACES) -> str:
    path = str(tmp_path / "traces.sqlite")
    engine = make_engine(resolve(path), create=True)
    for version, names in (("2.0.0", NAMES), ("2.1.0", NAMES[:5])):
        doc = dict(document(version, OPS), python_names=names)
        if traces is not None and version == "2.1.0":
            doc["name_traces"] = traces
        load(engine, doc)
    engine.dispose()
    return path


def test_a_trace_decides_the_first_op_and_each_row_says_what_tf_built(tmp_path):
    db = _db(tmp_path)
    found = lookup("tf.compose", db=db)
    # the harvest alone puts Alpha first (alphabetical among ops named after none)
    # what TF built first (of the harvest's ops before the trace's own), then the rest
    assert found.ops == ("Beta", "Mul", "Alpha")
    how = found.resolution
    assert how is not None and how.by == "trace" and how.checked and how.release == "2.1.0"
    assert how.traced == ("Beta", "Mul") and how.candidates == 2
    traced = {(r.op, r.release): r.traced for r in found.rows}
    assert traced == {("Beta", "2.1.0"): "built", ("Alpha", "2.1.0"): "not_built",
                      ("Beta", "2.0.0"): None, ("Alpha", "2.0.0"): None}
    floor = lookup("tf.math.floor", db=db).resolution
    assert floor is not None and floor.by == "only_op" and floor.checked
    assert lookup("Floor", db=db).resolution is None  # an op name: nothing to check


def test_a_release_without_traces_leaves_the_harvest_order_unchecked(tmp_path):
    db = _db(tmp_path, traces=None)
    found = lookup("tf.compose", db=db)
    assert found.ops[0] == "Alpha"
    how = found.resolution
    assert how is not None and how.by == "code_creates" and not how.checked
    assert how.traced == () and how.untraced is None
    assert {r.traced for r in found.rows} == {None}


def test_the_usual_call_of_a_name_keeps_its_order_where_the_generated_call_differs(tmp_path):
    found = lookup("tf.where", db=_db(tmp_path))
    assert found.ops[0] == "SelectV2"  # default_calls: tf.where(c, x, y)
    how = found.resolution
    assert how is not None and how.by == "usual_call" and not how.checked
    assert how.traced == ("Where",)


def test_a_name_another_release_has_is_checked_in_that_release(tmp_path):
    db = _db(tmp_path)
    # 2.1.0 traced every name it has: tf.old_only is not one of them
    with using(db) as store:
        assert store.traced_releases() and len(store.traced_releases()) == 1
    how = lookup("tf.old_only", db=db).resolution
    assert how is not None and how.untraced == (
        "not among the public names the harvest of TensorFlow 2.1.0 lists")
    assert how.release == "2.1.0" and how.asked is None and not how.checked
    # a name the release has, that no generated call reached
    how = lookup("tf.rnn", db=db).resolution
    assert how is not None and how.untraced == "no generated argument for parameter 'cell'"
    assert not how.checked and how.traced == ()
    # once 2.0.0 is traced too, its trace checks the name it has (a TF 1 name asked of TF 2)
    engine = make_engine(resolve(db))
    load_name_traces(engine, "2.0.0", [{"name": "tf.old_only", "family": "int",
                                        "ops": ["Alpha", "Cast"]}])
    engine.dispose()
    how = lookup("tf.old_only", db=db).resolution
    assert how is not None and how.checked and (how.release, how.asked) == ("2.0.0", "2.1.0")
    assert explain("tf.old_only", db=db).resolution == how
    assert lookup("tf.old_only", checked_in="2.0.0", db=db).resolution.asked is None  # type: ignore[union-attr]


def test_explain_says_how_the_name_was_resolved_in_every_format(tmp_path):
    db = _db(tmp_path)
    from opregistry.formats import render

    result = explain("tf.compose", db=db)
    assert result.name == "Beta" and result.resolution is not None
    text = render(result, "table")
    line = ("tf.compose -> Beta: TF built Beta when it traced the name; checked: TF 2.1.0 "
            "built Beta for a call with generated arguments (family square)")
    assert line in text.splitlines()
    # the traced call built two ops: each one's state (Mul is no op of this release)
    built = ("the traced call built, in 2.1.0: missing: Beta; unknown: Mul (an op without "
             "a gradient stops it only on a path from an input: opregistry.check(fn, x) "
             "says which)")
    assert built in text.splitlines()
    assert json.loads(render(result, "json"))["built"] == [
        {"op": "Beta", "gradient": "missing", "effective": "missing", "state": "missing"},
        {"op": "Mul", "gradient": None, "effective": None, "state": "unknown"}]
    assert explain("tf.math.floor", db=db).built == ()  # one op: said above it
    assert line.replace(">", "&gt;") in render(result, "markdown")
    data = json.loads(render(result, "json"))
    assert data["resolution"]["by"] == "trace" and data["resolution"]["checked"] is True
    unchecked = render(explain("tf.old_only", db=db), "table")
    assert ("tf.old_only -> Alpha: its code reaches Alpha alone; not checked by a trace in "
            "2.1.0: not among the public names the harvest of TensorFlow 2.1.0 lists"
            ) in unchecked
    assert result.created == ()  # traced: what it built is said, not what it can create
    # no trace: every op the name's code can create, each with its state (the op
    # explained is one of them, not one its call is known to build)
    (tmp_path / "untraced").mkdir()
    untraced = explain("tf.compose", db=_db(tmp_path / "untraced", None))
    assert untraced.built == () and [c.op for c in untraced.created] == ["Alpha", "Beta"]
    created = ("its code can create, in 2.1.0 (no trace says which its call builds): "
               "differentiable: Alpha; missing: Beta (an op without a gradient stops it only "
               "on a path from an input: opregistry.check(fn, x) says which)")
    assert created in render(untraced, "table").splitlines()
    assert created in render(untraced, "markdown")
    assert json.loads(render(untraced, "json"))["created"] == [
        {"op": "Alpha", "gradient": "registered", "effective": "differentiable",
         "state": "differentiable"},
        {"op": "Beta", "gradient": "missing", "effective": "missing", "state": "missing"}]


def test_lookup_shows_the_traced_column_in_every_format(tmp_path, cli):
    db = _db(tmp_path)
    table = cli("lookup", "tf.compose", "--tf", "2.1.0", "--db", db)
    assert table.returncode == 0, table.stderr
    assert "traced" in table.stdout.splitlines()[0]
    assert "not built" in table.stdout and "tf.compose -> Beta: TF built Beta" in table.stderr
    rows = json.loads(cli("lookup", "tf.compose", "--tf", "2.1.0", "-f", "json",
                          "--db", db).stdout)
    assert {(r["op"], r["traced"]) for r in rows} == {("Beta", "built"), ("Alpha", "not_built")}
    csv = cli("lookup", "tf.compose", "--tf", "2.1.0", "-f", "csv", "--db", db).stdout
    assert csv.splitlines()[0].endswith(",traced") and "not built" in csv
    markdown = cli("lookup", "tf.compose", "--tf", "2.1.0", "-f", "markdown", "--db", db)
    assert "| traced" in markdown.stdout and "not built" in markdown.stdout


def test_reloading_a_release_replaces_its_traces_and_drops_unused_ones(tmp_path):
    db = _db(tmp_path)
    engine = make_engine(resolve(db))
    assert load_name_traces(engine, "2.1.0", TRACES[:2]) == 2
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT t.name FROM release_name_traces JOIN name_traces t "
                            "ON t.id = trace_id ORDER BY t.name").fetchall()
        assert rows == [("tf.compose",), ("tf.math.floor",)]
        # the traces only tf.where and tf.old_only used are gone
        assert conn.execute("SELECT count(*) FROM name_traces").fetchone() == (2,)
    load(engine, dict(document("2.1.0", OPS), python_names=NAMES))  # a harvest without
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM name_traces").fetchone() == (0,)
    engine.dispose()


def test_a_release_s_python_names_read_again_replace_its_own_only(tmp_path):
    """data/harvest_name_traces.py --python-names: a newer reading of TF's code (a name
    the harvest had missed, one it reads differently) replaces one release's names; the
    other release keeps its own, and names no release links any more are gone."""
    db = _db(tmp_path)
    engine = make_engine(resolve(db))
    again = [{"name": "tf.compose", "op": "Beta", "method": "calls_wrapper"},
             {"name": "tf.map_fn", "op": "Alpha", "method": "calls_wrapper"}]
    assert replace_python_names(engine, "2.1.0", again) == 2
    assert lookup("tf.map_fn", "2.1.0", db=db).ops == ("Alpha",)
    assert lookup("tf.compose", "2.1.0", db=db).ops[0] == "Beta"
    with sqlite3.connect(db) as conn:
        names = conn.execute("SELECT pn.name FROM release_python_names JOIN releases r "
                             "ON r.id = release_id JOIN python_names pn ON pn.id = "
                             "python_name_id WHERE r.version = '2.1.0' ORDER BY 1").fetchall()
        assert names == [("tf.compose",), ("tf.map_fn",)]
        assert conn.execute("SELECT count(*) FROM release_python_names JOIN releases r ON "
                            "r.id = release_id WHERE r.version = '2.0.0'").fetchone() == (len(NAMES),)
        # tf.old_only, tf.rnn... are 2.0.0's still; none is left unlinked
        assert conn.execute("SELECT count(*) FROM python_names WHERE id NOT IN "
                            "(SELECT python_name_id FROM release_python_names)"
                            ).fetchone() == (0,)
    with pytest.raises(DocumentError, match=r"\$\.python_names\[0\]\.op"):
        replace_python_names(engine, "2.1.0", [{"name": "tf.a", "op": "no op", "method": "m"}])
    with pytest.raises(DocumentError, match="Python names of TensorFlow 9.9.9, which the "
                                            "database does not hold"):
        replace_python_names(engine, "9.9.9", again)
    engine.dispose()
    assert lookup("tf.map_fn", "2.1.0", db=db).ops == ("Alpha",)  # kept


@pytest.mark.parametrize(("entries", "where"), [
    ([{"name": "tf.a", "ops": ["A"]}, {"name": "tf.a", "ops": ["B"]}],
     r"\$\.name_traces\[1\]\.name: 'tf\.a' appears twice"),
    ([{"name": "tf.a", "ops": "A"}], r"\$\.name_traces\[0\]\.ops"),
    ([{"name": "tf.a", "ops": ["no spaces"]}], r"\$\.name_traces\[0\]\.ops\[0\]"),
    ([{"name": "x" * 300}], r"\$\.name_traces\[0\]\.name"),
    ({"tf.a": {"ops": ["A"]}}, r"\$\.name_traces"),
])
def test_hostile_traces_are_refused_with_their_path(tmp_path, entries, where):
    db = _db(tmp_path)
    engine = make_engine(resolve(db))
    with pytest.raises(DocumentError, match=where):
        load_name_traces(engine, "2.1.0", entries)
    doc = dict(document("2.2.0", OPS), name_traces=entries)
    with pytest.raises(DocumentError, match=where):
        load(engine, doc)
    with pytest.raises(DocumentError, match="which the database does not hold"):
        load_name_traces(engine, "9.9.9", TRACES)
    engine.dispose()
    assert lookup("tf.compose", db=db).ops[0] == "Beta"  # nothing changed


def test_many_names_read_every_trace_in_one_query(tmp_path):
    db = _db(tmp_path)
    names = ["tf.compose", "tf.math.floor", "tf.where"] * 800
    results, errors = lookup_many(names, db=db)
    assert not errors and [r.resolution.checked for r in results[:3]  # type: ignore[union-attr]
                           ] == [True, True, False]


def test_a_control_flow_call_is_its_own_op_before_its_bodies_and_work_before_helpers(
        tmp_path):
    db = _db(tmp_path)
    engine = make_engine(resolve(db))
    # a trace records the loop's op and its body's (the caller's AddV2) and the
    # helpers around them; a composite's work comes before its casts and shapes
    load(engine, dict(document("2.1.0", OPS), python_names=NAMES[:5] + [
        {"name": "tf.loop", "op": "Alpha", "method": "calls_wrapper_multi"},
        {"name": "tf.istft", "op": "Cast", "method": "calls_wrapper_multi"},
        {"name": "tf.istft", "op": "Alpha", "method": "calls_wrapper_multi"}],
        name_traces=TRACES + [
        {"name": "tf.loop", "family": "square", "ops": ["AddV2", "Shape", "StatelessWhile"]},
        {"name": "tf.istft", "family": "complex", "ops": ["Cast", "IRFFT", "Reshape"]}]))
    engine.dispose()
    assert lookup_many(["tf.loop"], db=db)[0][0].ops[:3] == ("StatelessWhile", "AddV2", "Shape")
    # the harvest's Cast was built, but it is a helper: TF's IRFFT first
    assert lookup_many(["tf.istft"], db=db)[0][0].ops[:2] == ("IRFFT", "Cast")
