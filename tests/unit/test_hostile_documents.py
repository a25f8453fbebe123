"""Harvest documents that are not what they claim: one DocumentError before anything
touches a database; the CLI says one line. No TensorFlow."""
from __future__ import annotations

import os

import forked  # tests/unit is on sys.path
import pytest
from documents import document, op

from opregistry.db.validate import read_document, validate
from opregistry.errors import DocumentError
from opregistry.harvest.inenv.document import FORMAT


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_special_files_are_refused_before_they_are_read(tmp_path):
    fifo = tmp_path / "doc.json"
    os.mkfifo(fifo)
    with pytest.raises(DocumentError, match="not a regular file"):
        read_document(fifo)  # reading would block forever
    with pytest.raises(DocumentError, match="not a regular file"):
        read_document(__import__("pathlib").Path("/dev/zero"))  # would grow forever


def test_deep_json_and_bad_utf8_are_one_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(DocumentError, match="nested too deeply|cannot read"):
        read_document(deep)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(DocumentError, match="cannot read"):
        read_document(bad)


@pytest.mark.parametrize("version", [0, 6, "1", True, None])
def test_the_format_version_message_says_what_was_found(version):
    with pytest.raises(DocumentError, match=r"format_version .* is not supported \(this "
                                            r"opregistry reads format_version 1 to 5\)"):
        validate({"format": FORMAT, "format_version": version})


def test_db_load_of_a_device_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = forked.run(["db", "load", "/dev/zero", "--db", str(tmp_path / "x.sqlite")],
                      env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "not a regular file" in done.stderr


# ---------------------------------------------------------------- the written schema
# Each case: a change to a valid document, and the JSON path the error must name.
# These are the documents that ended in a traceback, or were stored although invalid.

def _base():
    return document("2.21.0", [
        op("Floor", "registered", "none", [("x", "none")]),
        op("MatMul", "registered", "differentiable", [("a", "gradient"), ("b", "gradient")]),
        op("Shape", "no_gradient")])


def _set(path, value):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _delete(path):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return change


def _deep(levels):
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


HOSTILE = {
    "op name a list": (_set(["ops", 0, "name"], ["Floor"]), r"\$\.ops\[0\]\.name"),
    "op name an object": (_set(["ops", 0, "name"], {"a": 1}), r"\$\.ops\[0\]\.name"),
    "op name null": (_set(["ops", 0, "name"], None), r"\$\.ops\[0\]\.name"),
    "op name a lone surrogate": (_set(["ops", 0, "name"], "\ud800"), r"\$\.ops\[0\]\.name"),
    "op name with spaces": (_set(["ops", 0, "name"], "Floor; DROP"), r"\$\.ops\[0\]\.name"),
    "duplicate op names": (_set(["ops", 1, "name"], "Floor"), r"\$\.ops\[1\]\.name.*twice"),
    "public a string": (_set(["ops", 0, "public"], "yes"), r"\$\.ops\[0\]\.public"),
    "probes a list": (_set(["probes"], [1, 2]), r"\$\.probes"),
    "probe a list": (_set(["ops", 0, "probe"], []), r"\$\.ops\[0\]\.probe"),
    "probe without effective": (_delete(["ops", 0, "probe", "effective"]),
                                r"\$\.ops\[0\]\.probe: missing key 'effective'"),
    "input without result": (_delete(["ops", 0, "probe", "inputs", 0, "result"]),
                             r"\$\.ops\[0\]\.probe\.inputs\[0\]"),
    "position 2**80": (_set(["ops", 0, "probe", "inputs", 0, "position"], 2 ** 80),
                       r"\$\.ops\[0\]\.probe\.inputs\[0\]\.position"),
    "position a float": (_set(["ops", 0, "probe", "inputs", 0, "position"], 0.5),
                         r"\.position: expected an integer"),
    "position true": (_set(["ops", 0, "probe", "inputs", 0, "position"], True),
                      r"\.position: expected an integer"),
    "duplicate positions": (_set(["ops", 1, "probe", "inputs", 1, "position"], 0),
                            r"\$\.ops\[1\]\.probe\.inputs\[1\]\.position.*twice"),
    "gradient status unknown": (_set(["ops", 0, "gradient", "status"], "maybe"),
                                r"\$\.ops\[0\]\.gradient\.status"),
    "registered without function": (_delete(["ops", 0, "gradient", "function"]),
                                    r"\$\.ops\[0\]\.gradient"),
    "function line a string": (_set(["ops", 0, "gradient", "function", "line"], "1"),
                               r"\.function\.line"),
    "op_def missing": (_delete(["ops", 0, "op_def"]), r"missing key 'op_def'"),
    "op_def for another op": (_set(["ops", 0, "op_def", "name"], "Ceil"),
                              r"\$\.ops\[0\]\.op_def\.name"),
    "an integer version": (_set(["release", "version"], 221), r"\$\.release\.version"),
    "a 5 MB version": (_set(["release", "version"], "2" * 5_000_000), r"\$\.release\.version"),
    "a version that is not one": (_set(["release", "version"], "../../etc"),
                                  r"\$\.release\.version"),
    "probe seconds NaN": (_set(["probes", "seconds"], float("nan")), r"\$\.probes\.seconds"),
    "probe seconds infinite": (_set(["probes", "seconds"], float("inf")),
                               r"\$\.probes\.seconds"),
    "verification error NaN": (_set(["ops", 0, "probe", "verification"],
                                    {"status": "verified", "max_error": float("nan")}),
                               r"\.verification\.max_error"),
    "NaN in a free-form field": (_set(["ops", 0, "op_def", "extra"], [float("nan")]),
                                 r"\$\.ops\[0\]\.op_def\.extra\[0\]"),
    "a 200,000-deep value": (_set(["ops", 0, "probe", "deep"], _deep(200_000)),
                             r"nested deeper than"),
    "ops empty": (_set(["ops"], []), r"\$\.ops: no ops"),
    "ops an object": (_set(["ops"], {"Floor": {}}), r"\$\.ops: expected a list"),
    "release missing": (_delete(["release"]), r"missing key 'release'"),
    "python name entry a string": (_set(["python_names", 0], "tf.floor"),
                                   r"\$\.python_names\[0\]"),
    "python name too long": (_set(["python_names", 0, "name"], "x" * 300),
                             r"\$\.python_names\[0\]\.name"),
    "effective unknown word": (_set(["ops", 0, "probe", "effective"], "sometimes"),
                               r"\.probe\.effective"),
    # loaded, then a traceback in every read command of the release (issue 35)
    "second-order blockers of numbers": (
        _set(["ops", 1, "probe", "second_order_blockers"], [1]),
        r"\$\.ops\[1\]\.probe\.second_order_blockers\[0\]: expected an object"),
    "second-order blockers a string": (
        _set(["ops", 1, "probe", "second_order_blockers"], "abc"),
        r"\$\.ops\[1\]\.probe\.second_order_blockers: expected a list"),
    "a second-order blocker without its reason": (
        _set(["ops", 1, "probe", "second_order_blockers"], [{"op": "X"}]),
        r"\$\.ops\[1\]\.probe\.second_order_blockers\[0\]: missing key 'reason'"),
    "verified without its error": (
        _set(["ops", 1, "probe", "verification"], {"status": "verified", "tolerance": 1e-6}),
        r"\$\.ops\[1\]\.probe\.verification: missing key 'max_error'"),
    "flagged with a null error": (
        _set(["ops", 1, "probe", "verification"],
             {"status": "flagged", "max_error": None, "tolerance": 1e-6}),
        r"\$\.ops\[1\]\.probe\.verification\.max_error: expected a number"),
    "second order a word of no vocabulary": (
        _set(["ops", 1, "probe", "second_order"], "maybe"), r"\.probe\.second_order"),
    # SQLite stored it; PostgreSQL refused the load ("cannot contain NUL")
    "a NUL in a summary": (_set(["ops", 0, "op_def", "summary"], "a\x00b"),
                           r"\$\.ops\[0\]\.op_def\.summary: a string with a NUL"),
    "a NUL in a free-form key": (_set(["ops", 0, "probe", "extra"], {"k\x00": 1}),
                                 r"\$\.ops\[0\]\.probe\.extra\.k.*: a key that is not text"),
    "an op name ending in a newline": (_set(["ops", 0, "name"], "Floor\n"),
                                       r"\$\.ops\[0\]\.name: 'Floor\\n' is not a valid"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_an_invalid_document_names_its_first_problem(case):
    change, path = HOSTILE[case]
    doc = _base()
    validate(doc)  # the base is valid: the change alone makes it invalid
    change(doc)
    with pytest.raises(DocumentError, match=path):
        validate(doc)


def _rows(path):
    import sqlite3

    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}


def test_an_invalid_document_never_reaches_the_database(tmp_path):
    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.location import resolve

    path = tmp_path / "db.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, _base())
    before = _rows(path)
    for case, (change, _) in sorted(HOSTILE.items()):
        doc = _base()
        change(doc)
        with pytest.raises(DocumentError):
            load(engine, doc)
        assert _rows(path) == before, case
    engine.dispose()


def test_the_cli_names_the_path_in_one_line(tmp_path):
    import json

    doc = _base()
    doc["ops"][1]["probe"]["inputs"][0]["position"] = 2 ** 80
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = forked.run(["db", "load", str(path), "--db", str(tmp_path / "x.sqlite")],
                      env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "$.ops[1].probe.inputs[0].position: 1208925819614629174706176 is outside" \
        in done.stderr
