"""The static site built from the shipped database, without TensorFlow or a browser:
complete, small, saying what lookup says, and never destroying a folder it did not make
(in Chromium: tests/test_site.py)."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest

import opregistry
from opregistry.db.location import shipped_database_path
from opregistry.registry.sources import source_url
from opregistry.site import build
from opregistry.site.export import from_script

SHIPPED = shipped_database_path()


def _site(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    return forked.run(["site", *args], env=env, timeout=600)


def test_the_site_is_complete_small_and_marked(site: Path, data: dict):
    with sqlite3.connect(f"{SHIPPED.as_uri()}?mode=ro", uri=True) as conn:
        ops_in_db = {r[0] for r in conn.execute("SELECT DISTINCT op_name FROM release_ops")}
    assert set(data["ops"]) == ops_in_db and len(ops_in_db) > 2000
    assert [r["key"] for r in data["releases"]] == [
        f"{r.library}-{r.library_version}" if r.library else r.release
        for r in opregistry.releases(db=SHIPPED)]
    for op in data["ops"].values():
        assert (site / op["page"]).is_file()
    # the matrix's whole download: the page, its data and its assets
    index = sum((site / p).stat().st_size for p in (
        "index.html", "data/matrix.js", "static/matrix.js", "static/style.css"))
    assert index < 1_500_000
    script = (site / "data" / "ops.js").read_text()
    assert script.startswith("window.OPREGISTRY_OPS=JSON.parse('{") and from_script(script) == data
    marker = json.loads((site / build.MARKER).read_text())
    assert marker["ops"] == len(data["ops"])
    assert marker["releases"] == len(opregistry.releases(db=SHIPPED))


@pytest.mark.parametrize("op", ["ArgMax", "Floor", "ClipByValue", "TensorMapInsert", "Shape"])
def test_the_export_says_what_lookup_says(data: dict, op: str):
    for row in opregistry.lookup(op, db=SHIPPED).rows:
        entry = data["ops"][op]["releases"][row.release]
        assert entry["gradient"] == row.gradient
        assert entry.get("effective") == row.effective
        assert [(i["position"], i["name"], i["result"]) for i in entry.get("inputs", [])] == [
            (i.position, i.name, i.result) for i in row.inputs]
        assert entry.get("second_order") == row.second_order
        if row.function:
            assert entry["function"]["qualname"] == row.function.qualname
            assert entry["function"]["url"] == source_url(row.release, row.function.source_file,
                                                          row.function.line)


def test_the_site_shows_the_canonical_name_first(data: dict):
    """Python names lead home (tests/unit/test_python_names.py): the canonical public
    name first, then ``tf.math.*``-style aliases, ``tf.compat.v1.*`` last."""
    add_n = _names(data, "AddN")
    assert add_n[0] == "tf.add_n"
    assert add_n.index("tf.math.add_n") < add_n.index("tf.compat.v1.add_n")
    assert "tf.accumulate_n" not in add_n
    argmax = _names(data, "ArgMax")
    assert argmax[:2] == ["tf.argmax", "tf.math.argmax"]
    assert not [n for n in argmax if "specificity_at_sensitivity" in n]
    assert argmax.index("tf.argmax") < argmax.index("tf.arg_max")  # gone since 2.0
    assert all(n.startswith("tf.compat.v1.") for n in argmax[argmax.index(
        next(n for n in argmax if n.startswith("tf.compat.v1."))):])
    floor = _names(data, "Floor")
    assert floor[:2] == ["tf.floor", "tf.math.floor"]
    assert "tf.nn.dropout" not in floor and "tf.linalg.expm" not in floor
    assert "tf.raw_ops.Floor" in floor


def _names(data: dict, op: str) -> list[str]:
    return list(data["ops"][op]["python_names"])


def test_a_folder_that_is_not_a_site_is_refused_with_or_without_force(tmp_path: Path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    for force in ([], ["--force"]):
        done = _site(str(target), "--db", str(SHIPPED), *force)
        assert done.returncode == 2
        assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1
        assert "holds no site manifest" in done.stderr
        assert (target / "notes.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    done = _site(str(tmp_path / "file"), "--db", str(SHIPPED))
    assert done.returncode == 2 and "is not a directory" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "mine"]  # nothing left over
