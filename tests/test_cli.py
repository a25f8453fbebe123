"""The command line and the Python API against a database harvested in this run (the
command line without TensorFlow: tests/unit/test_cli_commands.py)."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import opregistry
from opregistry.cli.app import load_commands
from opregistry.db.vocabulary import HEAD_REVISION

tf = pytest.importorskip("tensorflow")
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(load_commands(), list(args), catch_exceptions=False)


# ----------------------------------------------------------------------------- API


def test_api_lookup_by_op_name(harvested_db):
    result = opregistry.lookup("MatMul", release=tf.__version__, db=harvested_db)
    assert result.matched_by == "op" and result.ops == ("MatMul",)
    (row,) = result.rows
    assert row.function is not None
    assert row.gradient == "registered" and row.function.qualname == "_MatMulGrad"
    assert row.function.location.startswith("tensorflow/python/ops/math_grad.py:")


def test_api_lookup_any_case_and_python_names(harvested_db):
    assert opregistry.lookup("argmax", db=harvested_db).ops == ("ArgMax",)
    floor = opregistry.lookup("tf.math.floor", db=harvested_db)
    assert floor.matched_by == "python_name" and floor.ops == ("Floor",)
    assert floor.rows[0].via == "tf.math.floor"
    assert opregistry.lookup("tf.raw_ops.Shape", db=harvested_db).rows[0].gradient == "no_gradient"


def test_api_unknown_op_suggests(harvested_db):
    with pytest.raises(opregistry.UnknownOpError) as info:
        opregistry.lookup("ArgMx", db=harvested_db)
    assert "ArgMax" in info.value.suggestions


def test_api_unknown_release(harvested_db):
    with pytest.raises(opregistry.UnknownReleaseError):
        opregistry.lookup("MatMul", release="0.1", db=harvested_db)


def _page_rule(names):
    """The raw_ops page's own rule (tensorflow/tools/docs/generate2.py): "Has Gradient"
    when the gradient registry has *any* entry for the op, None included."""
    from tensorflow.python.framework import ops as tf_ops

    checked, crossed = set(), set()
    for name in sorted(names):
        if name.startswith("_"):
            continue
        try:
            tf_ops._gradient_registry.lookup(name)
            checked.add(name)
        except LookupError:
            crossed.add(name)
    return checked, crossed


def test_raw_ops_page_rule(harvested_db, tf_document):
    """In the same run (after the same imports as the harvest), registered + no_gradient
    among public ops is the page's "Has Gradient" count, and missing the rest."""
    import importlib

    for module in tf_document["imports"]["modules"]:
        importlib.import_module(module)
    checked, crossed = _page_rule(dir(tf.raw_ops))
    public = opregistry.ops(tf.__version__, public_only=True, db=harvested_db)
    by_status = {s: {r.op for r in public if r.gradient == s}
                 for s in ("registered", "no_gradient", "missing")}
    assert len(by_status["registered"]) + len(by_status["no_gradient"]) == len(checked)
    assert by_status["registered"] | by_status["no_gradient"] == checked
    assert by_status["missing"] == crossed


def test_entries_that_need_an_import_are_marked(harvested_db):
    """After a bare `import tensorflow`, the page rule misses exactly the ops whose
    registry entry needs a further import; the database names that module."""
    code = ("import json, tensorflow as tf\n"
            "from tensorflow.python.framework import ops\n"
            "print(json.dumps(sorted(n for n in dir(tf.raw_ops) if not n.startswith('_') "
            "and n in ops._gradient_registry.list())))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    bare = set(json.loads(done.stdout.strip().splitlines()[-1]))
    public = opregistry.ops(tf.__version__, public_only=True, db=harvested_db)
    has_entry = {r.op for r in public if r.gradient != "missing"}
    needs = {r.op: r.needs_import for r in public if r.needs_import}
    assert has_entry - bare == set(needs)
    assert all(module.startswith("tensorflow.") for module in needs.values())


def test_api_releases_counts(harvested_db, tf_document):
    (summary,) = opregistry.releases(db=harvested_db)
    assert summary.release == tf.__version__
    assert summary.ops == len(tf_document["ops"])
    assert summary.registered + summary.no_gradient + summary.missing == summary.ops
    assert summary.orphan_gradients == len(tf_document["orphan_gradients"])


# ----------------------------------------------------------------------------- CLI


def test_lookup_table(harvested_db):
    result = invoke("lookup", "ArgMax", "shape", "--db", str(harvested_db))
    assert result.exit_code == 0, result.output
    assert "_ArgMaxGrad" in result.stdout and "no_gradient" in result.stdout
    assert "ArgMax -> ArgMax: registered (effective: none) in 1 release" in result.stderr


def test_lookup_json_carries_op_release_gradient(harvested_db):
    result = invoke("lookup", "Shape", "MatMul", "AdjustHue", "-f", "json", "--db",
                    str(harvested_db))
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {(r["op"], r["release"], r["gradient"]) for r in rows} == {
        ("Shape", tf.__version__, "no_gradient"), ("MatMul", tf.__version__, "registered"),
        ("AdjustHue", tf.__version__, "missing")}


def test_ops_csv_filters(harvested_db, tf_document, cli):
    """Through the real command line (a subprocess, as users run it)."""
    result = cli("ops", "--status", "no_gradient", "--public", "--format", "csv",
                 "--db", str(harvested_db))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    expected = {o["name"] for o in tf_document["ops"]
                if o["public"] and o["gradient"]["status"] == "no_gradient"}
    assert {r["op"] for r in rows} == expected
    assert f"{len(expected)} ops in {tf.__version__}" in result.stderr


def test_releases_command(harvested_db, cli):
    result = cli("releases", "--format", "json", "--db", str(harvested_db))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["release"] == tf.__version__


def test_harvest_current_interpreter_through_the_cli(tmp_path, cli, tf_document):
    db = tmp_path / "cli.sqlite"
    done = cli("harvest", "--no-probes", "--no-trace-names", "--db", str(db),
               "--format", "json")
    assert done.returncode == 0, done.stderr
    (outcome,) = json.loads(done.stdout)
    assert outcome["ok"] and outcome["release"] == tf.__version__
    assert outcome["ops"] == len(tf_document["ops"])
    row = opregistry.lookup("MatMul", db=db).rows[0]
    assert row.gradient == "registered" and row.effective is None  # not probed
    report = cli("probe-report", "--db", str(db))
    assert report.returncode == 2 and "harvested without probes" in report.stderr
    unchecked = opregistry.lookup("tf.math.floor", db=db).resolution
    assert unchecked is not None and not unchecked.checked and unchecked.traced == ()
    # the names traced too (the default): each checked against what TF built
    again = cli("harvest", "--no-probes", "--db", str(db), "--format", "json")
    assert json.loads(again.stdout)[0]["replaced"] is True
    checked = opregistry.lookup("tf.math.floor", db=db).resolution
    assert checked is not None and checked.checked and checked.traced == ("Floor",)
    assert checked.release == tf.__version__
    current = cli("db", "current", "--db", str(db))
    assert current.returncode == 0
    assert current.stdout.strip() == HEAD_REVISION

