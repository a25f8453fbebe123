"""Per-output facts (issue 22) on the read side: a format-3 document's ``outputs`` per
input row, migration 0007 in both directions, the read store on a database one revision
behind (no per-output facts: NULL), and the validator. No TensorFlow."""
from __future__ import annotations

import copy
import sqlite3

import pytest
from documents import document as _document  # tests/unit is on sys.path
from documents import op as _op
from typer.testing import CliRunner

from opregistry.cli.app import app, load_commands
from opregistry.db import migrate
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.db.validate import validate
from opregistry.errors import DocumentError
from opregistry.registry.facts import op_facts

load_commands()


def _fbn() -> dict:
    entry = _op("FusedBatchNormV3", "registered", "partial",
                [("x", "gradient"), ("scale", "gradient"), ("mean", "none")])
    entry["op_def"]["outputs"] = [{"name": n, "type_attr": "U"}
                                  for n in ("y", "batch_mean", "batch_variance")]
    for row in entry["probe"]["inputs"]:
        row["outputs"] = ["none"] * 3 if row["result"] == "none" else \
            ["gradient", "zero", "zero"]
    return entry


def _db(tmp_path, document):
    path = tmp_path / "facts.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, document)
    return path, engine


def test_per_output_facts_load_and_read(tmp_path):
    path, engine = _db(tmp_path, _document("2.1.0", [_fbn()]))
    engine.dispose()
    _, facts = op_facts("2.1.0", ["FusedBatchNormV3"], db=path)
    by_name = {i.name: i.by_output for i in facts["FusedBatchNormV3"].inputs}
    assert by_name == {"x": ("gradient", "zero", "zero"),
                       "scale": ("gradient", "zero", "zero"), "mean": ("none",) * 3}


def test_a_document_without_them_loads_as_before(tmp_path):
    old = _document("2.1.0", [_fbn()])
    old["format_version"] = 2
    for row in old["ops"][0]["probe"]["inputs"]:
        del row["outputs"]
    path, engine = _db(tmp_path, old)
    engine.dispose()
    _, facts = op_facts("2.1.0", ["FusedBatchNormV3"], db=path)
    assert {i.by_output for i in facts["FusedBatchNormV3"].inputs} == {None}


def test_migration_0007_down_and_up_and_the_store_reads_0006(tmp_path):
    path, engine = _db(tmp_path, _document("2.1.0", [_fbn()]))
    refused = CliRunner().invoke(app, ["db", "downgrade", "0006_xla", "--db", str(path)])
    assert refused.exit_code == 2 and "deletes 3 per-output probe facts" in refused.output
    migrate.downgrade(engine, "0006_xla")
    with sqlite3.connect(path) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(op_inputs)")}
    assert "by_output" not in columns and "result" in columns
    # one revision behind: read, with no per-output facts (the analysis as before)
    _, facts = op_facts("2.1.0", ["FusedBatchNormV3"], db=path)
    assert [i.result for i in facts["FusedBatchNormV3"].inputs] == ["gradient", "gradient",
                                                                     "none"]
    assert {i.by_output for i in facts["FusedBatchNormV3"].inputs} == {None}
    migrate.upgrade(engine)
    load(engine, _document("2.2.0", [_fbn()]))
    engine.dispose()
    _, facts = op_facts("2.2.0", ["FusedBatchNormV3"], db=path)
    assert facts["FusedBatchNormV3"].inputs[0].by_output == ("gradient", "zero", "zero")


@pytest.mark.parametrize("bad", ["maybe", 3, None])
def test_the_validator_names_a_bad_result(bad):
    document = _document("2.1.0", [_fbn()])
    broken = copy.deepcopy(document)
    broken["ops"][0]["probe"]["inputs"][0]["outputs"][1] = bad
    validate(document)
    with pytest.raises(DocumentError, match=r"\$\.ops\[0\]\.probe\.inputs\[0\]\.outputs\[1\]"):
        validate(broken)
