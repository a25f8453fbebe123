"""Untrusted text (harvest documents, model node names, Python names, paths, policy
files) reaches the terminal escaped on every print path: table, markdown, CSV and DOT
cells, stderr summaries and ``Error:`` lines; JSON stays exact. No TensorFlow."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest
from documents import document, op

from opregistry.formats import csv_text, json_text, table
from opregistry.model.readers import schema
from opregistry.text import printable

HOSTILE = "a\x1b[31mred\nError: forged\r\t\x00\x7f\x9b\u202e\u2028z"
ESCAPED = "a\\x1b[31mred\\nError: forged\\r\\t\\x00\\x7f\\x9b\\u202e\\u2028z"
ARGUMENT = HOSTILE.replace("\x00", "")  # what a command line can carry
ARGUMENT_ESCAPED = ESCAPED.replace("\\x00", "")
# what a harvest document can carry: no NUL (refused at load: PostgreSQL's text cannot
# hold one, tests/unit/test_hostile_documents.py)
DOCUMENT, DOCUMENT_ESCAPED = ARGUMENT, ARGUMENT_ESCAPED
RAW = ("\x1b", "\x9b", "\u202e", "\u2028", "\x00", "\r")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    return forked.run(list(args), cwd=cwd, timeout=120, env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"))


def _clean(text: str) -> None:
    assert not any(char in text for char in RAW), repr(text)
    assert not any(line.startswith("Error: forged") for line in text.splitlines())


def test_printable_escapes_controls_and_invisible_format_characters():
    assert printable(HOSTILE) == ESCAPED
    assert printable("dense_1/kernel:0 ünïcode 中文 → ok") == "dense_1/kernel:0 ünïcode 中文 → ok"
    assert printable("\u200b\u2066\ufeff") == "\\u200b\\u2066\\ufeff"


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_table_markdown_and_csv_cells_are_escaped(fmt):
    rows = [{"node": HOSTILE, "n": 1}]
    text = {"table": table(rows), "markdown": table(rows, style="github"),
            "csv": csv_text(rows)}[fmt]
    _clean(text)
    assert ESCAPED in text and len(text.splitlines()) == (2 if fmt == "csv" else 3)
    if fmt == "csv":
        assert list(csv.DictReader(io.StringIO(text)))[0]["node"] == ESCAPED


def test_json_stays_exact():
    data = [{"node": HOSTILE}]
    text = json_text(data)
    assert "\x1b" not in text and json.loads(text) == data


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """x -> Round, the Round node named with control characters."""
    graph = schema.message_classes()["GraphDef"]()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = schema.DT_FLOAT
    node = graph.node.add(name=HOSTILE, op="Round", input=["x"])
    node.attr["T"].type = schema.DT_FLOAT
    path = tmp_path / "m.pb"
    path.write_bytes(graph.SerializeToString())
    return path


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "dot"])
def test_check_escapes_node_names(tmp_path, model, fmt):
    done = _cli("check", str(model), "--format", fmt, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    _clean(done.stdout)
    _clean(done.stderr)
    assert ESCAPED in done.stdout


def test_check_json_keeps_node_names_exact(tmp_path, model):
    done = _cli("check", str(model), "--format", "json", cwd=tmp_path)
    (finding,) = json.loads(done.stdout)["findings"]
    assert finding["stops"][0]["node"] == HOSTILE


def test_check_files_escapes_the_file_name_and_nodes(tmp_path, model):
    named = tmp_path / "m\x1b[2J\n.pb"
    named.write_bytes(model.read_bytes())
    done = _cli("check-files", str(named), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    _clean(done.stdout)
    _clean(done.stderr)
    assert "m\\x1b[2J\\n.pb" in done.stdout  # the table's model column
    assert "m\\x1b[2J\\n.pb: 1 blocked target" in done.stderr  # its summary line


def test_an_error_line_about_a_hostile_path_is_one_line(tmp_path):
    done = _cli("check", f"no{ARGUMENT}.pb", cwd=tmp_path)
    assert done.returncode == 2
    _clean(done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: no" + ARGUMENT_ESCAPED)


@pytest.fixture
def hostile_db(tmp_path: Path) -> Path:
    """A database loaded from a harvest document whose gradient function and Python
    name carry terminal escapes (the schema bounds lengths, not characters)."""
    doc = document("2.21.0", [op("Floor", "registered", "none", [("x", "none")])])
    function = doc["ops"][0]["gradient"]["function"]
    function.update(qualname="_FloorGrad" + DOCUMENT, module="m\x1b]0;title\x07",
                    file="m\u202e.py")
    doc["python_names"][0]["name"] = "tf.math.fl\x1boor"
    source = tmp_path / "doc.json"
    source.write_text(json.dumps(doc))
    db = tmp_path / "hostile.sqlite"
    done = _cli("db", "load", str(source), "--db", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_lookup_escapes_what_a_harvest_document_says(tmp_path, hostile_db, fmt):
    """ESC sequences of a harvest document reached the terminal raw through lookup."""
    done = _cli("lookup", "Floor", "--db", str(hostile_db), "--format", fmt, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _clean(done.stdout)
    assert "_FloorGrad" + DOCUMENT_ESCAPED in done.stdout and "m\\u202e.py" in done.stdout


def test_lookup_json_is_exact_and_a_python_name_on_stderr_escaped(tmp_path, hostile_db):
    done = _cli("lookup", "tf.math.fl\x1boor", "--db", str(hostile_db), "--format", "json",
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["function"]["qualname"] == "_FloorGrad" + DOCUMENT
    _clean(done.stderr)
    assert done.stderr.startswith("tf.math.fl\\x1boor -> Floor")


def test_an_unknown_op_error_is_escaped(tmp_path, hostile_db):
    done = _cli("lookup", ARGUMENT, "--db", str(hostile_db), cwd=tmp_path)
    assert done.returncode == 2
    _clean(done.stderr)
    assert len(done.stderr.splitlines()) == 1


def test_diff_source_escapes_each_line_of_the_diff(tmp_path):
    """``diff --source`` prints a gradient function's name from the harvest document."""
    db = tmp_path / "two.sqlite"
    for version, body in (("2.20.0", "return None"), ("2.21.0", "return grad")):
        doc = document(version, [op("Floor", "registered", "none", [("x", "none")])])
        doc["ops"][0]["gradient"]["function"].update(
            qualname="_FloorGrad" + DOCUMENT, source_hash=version,
            source=f"def _FloorGrad(op, grad):\n    {body}\n")
        source = tmp_path / f"{version}.json"
        source.write_text(json.dumps(doc))
        assert _cli("db", "load", str(source), "--db", str(db), cwd=tmp_path).returncode == 0
    done = _cli("diff", "2.20.0", "2.21.0", "--source", "--db", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _clean(done.stdout)
    assert f"# Floor: _FloorGrad{DOCUMENT_ESCAPED} in 2.21.0" in done.stdout
    assert "+    return grad" in done.stdout.splitlines()
