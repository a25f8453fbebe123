"""The command line and the Python API against a database harvested in this run."""
from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

import opregistry
from opregistry.cli.app import load_commands
from opregistry.cli.fast import try_fast
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


def test_ops_csv_filters(harvested_db, tf_document):
    result = invoke("ops", "--status", "no_gradient", "--public", "--format", "csv",
                    "--db", str(harvested_db))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    expected = {o["name"] for o in tf_document["ops"]
                if o["public"] and o["gradient"]["status"] == "no_gradient"}
    assert {r["op"] for r in rows} == expected
    assert f"{len(expected)} ops in {tf.__version__}" in result.stderr


def test_releases_command(harvested_db):
    result = invoke("releases", "--format", "json", "--db", str(harvested_db))
    assert result.exit_code == 0
    assert json.loads(result.stdout)[0]["release"] == tf.__version__


@pytest.mark.parametrize("args, message", [
    (["lookup", "ArgMx"], "did you mean ArgMax"),
    (["lookup", "MatMul", "--tf", "0.1"], "unknown release '0.1'"),
    (["ops", "--tf", "0.1"], "unknown release '0.1'"),
    (["diff", "0.1", "latest"], "unknown release '0.1'"),
    (["ops", "--status", "sometimes"], "unknown status 'sometimes'"),
    (["ops", "--effective", "mostly"], "unknown effective status 'mostly'"),
    (["probe-report", "--tf", "0.1"], "unknown release '0.1'"),
])
def test_bad_input_is_one_line_and_exit_2(harvested_db, cli, args, message):
    done = cli(*args, "--db", str(harvested_db))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: ")
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_database_file(tmp_path, cli):
    done = cli("lookup", "ArgMax", "--db", str(tmp_path / "nope.sqlite"))
    assert done.returncode == 2
    assert done.stderr == f"Error: database not found: {tmp_path / 'nope.sqlite'}\n"


def test_corrupt_database_file(tmp_path, cli):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    done = cli("releases", "--db", str(bad))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "not a database" in done.stderr


def test_locked_database(db_copy, cli):
    holder = sqlite3.connect(db_copy, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        done = cli("lookup", "ArgMax", "--db", str(db_copy))
    finally:
        holder.rollback()
        holder.close()
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "locked" in done.stderr


def test_opregistry_db_environment_variable(harvested_db, cli):
    done = cli("lookup", "MatMul", "-f", "json", env={"OPREGISTRY_DB": str(harvested_db)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["op"] == "MatMul"


def test_fast_path_gives_the_same_output_as_typer(harvested_db, capsys):
    for args in (["lookup", "ArgMax", "tf.math.floor"], ["lookup", "shape", "-f", "csv"],
                 ["lookup", "ArgMx"], ["lookup", "MatMul", "--format=json", "--tf", "latest"]):
        full = args + ["--db", str(harvested_db)]
        code = try_fast(full)
        fast = capsys.readouterr()
        result = invoke(*full)
        assert code == result.exit_code
        assert fast.out == result.stdout and fast.err == result.stderr


def test_fast_path_leaves_everything_else_to_typer():
    assert try_fast(["lookup", "ArgMax", "--help"]) is None  # help: tests/unit/test_fast_path.py
    assert try_fast(["lookup", "ArgMax", "--unknown"]) is None
    assert try_fast(["lookup", "ArgMax", "--format", "xml"]) is None
    assert try_fast(["lookup"]) is None
    assert try_fast(["ops"]) is None


def test_lookup_never_imports_tensorflow_or_sqlalchemy(harvested_db):
    code = (f"import sys; sys.argv = ['opregistry', 'lookup', 'ArgMax', '--db', {str(harvested_db)!r}]\n"
            "from opregistry.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('tensorflow', 'sqlalchemy', 'typer', 'alembic') "
            "if m in sys.modules]\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in done.stderr, done.stderr


def test_every_command_has_help():
    app = load_commands()
    group = typer.main.get_command(app)
    names = []

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            assert sub.help, f"{' '.join(path + [name])} has no help"
            names.append(" ".join(path + [name]))
            walk(sub, path + [name])

    walk(group, [])
    assert {"lookup", "ops", "diff", "releases", "harvest", "db upgrade", "db current",
            "probe-report"} <= set(names)
    for name in names:
        result = invoke(*name.split(), "--help")
        assert result.exit_code == 0 and "Usage:" in result.stdout


def test_harvest_needs_a_writable_database(cli, monkeypatch):
    done = cli("harvest", env={"OPREGISTRY_DB": ""})
    assert done.returncode == 2 and "read-only" in done.stderr


def test_harvest_a_python_without_tensorflow(tmp_path, cli):
    venv = tmp_path / "no-tf"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = cli("harvest", "--python", str(venv / "bin" / "python"), "--db",
               str(tmp_path / "h.sqlite"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "cannot import TensorFlow" in done.stderr and "Traceback" not in done.stderr


def test_harvest_unknown_tf_version(tmp_path, cli):
    done = cli("harvest", "--tf-version", "9.9", "--db", str(tmp_path / "h.sqlite"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no install recipe for TensorFlow 9.9" in done.stderr


def test_harvest_current_interpreter_through_the_cli(tmp_path, cli, tf_document):
    db = tmp_path / "cli.sqlite"
    done = cli("harvest", "--no-probes", "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    (outcome,) = json.loads(done.stdout)
    assert outcome["ok"] and outcome["release"] == tf.__version__
    assert outcome["ops"] == len(tf_document["ops"])
    row = opregistry.lookup("MatMul", db=db).rows[0]
    assert row.gradient == "registered" and row.effective is None  # not probed
    report = cli("probe-report", "--db", str(db))
    assert report.returncode == 2 and "harvested without probes" in report.stderr
    again = cli("harvest", "--no-probes", "--db", str(db), "--format", "json")
    assert json.loads(again.stdout)[0]["replaced"] is True
    current = cli("db", "current", "--db", str(db))
    assert current.returncode == 0
    assert current.stdout.strip() == HEAD_REVISION


def test_every_format_is_handled(harvested_db):
    from opregistry.formats import OutputFormat

    for fmt in OutputFormat:
        result = invoke("lookup", "MatMul", "--format", fmt.value, "--db", str(harvested_db))
        assert result.exit_code == 0 and "MatMul" in result.stdout, fmt
