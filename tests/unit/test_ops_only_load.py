"""``probes.ops_only`` (data/harvest_probe_ops.py): the facts of a few ops probed again
replace theirs in a stored release, and nothing else of it. Real SQLite files from
hand-written documents (tests/unit/documents.py)."""
from __future__ import annotations

import sqlite3

import pytest
from documents import document, op

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.errors import DocumentError
from opregistry.registry.facts import op_facts

OPS = [op("Transform", "registered", None),  # its probe failed: unknown, no input rows
       op("MatMul", "registered", "differentiable", [("a", "gradient"), ("b", "gradient")]),
       op("Floor", "registered", "none", [("x", "none")])]


def _rows(db: str, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_the_listed_ops_facts_are_replaced_and_nothing_else(tmp_path):
    db = str(tmp_path / "ops.sqlite")
    engine = make_engine(resolve(db), create=True)
    load(engine, document("2.21.0", OPS))
    assert op_facts("2.21.0", ["Transform"], db=db)[1]["Transform"].effective == "unknown"
    before = _rows(db, "SELECT * FROM release_ops WHERE op_name != 'Transform' ORDER BY 2")
    names = _rows(db, "SELECT * FROM release_python_names")
    again = dict(document("2.21.0", [op("Transform", "registered", "partial",
                                        [("images", "gradient"), ("transforms", "none")])]))
    again["probes"] = {"seconds": 1.0, "ops_only": True}
    result = load(engine, again)
    assert (result.ops, result.replaced) == (1, True)
    facts = op_facts("2.21.0", ["Transform"], db=db)[1]["Transform"]
    assert facts.effective == "partial"
    assert [(i.name, i.result) for i in facts.inputs] == [("images", "gradient"),
                                                         ("transforms", "none")]
    # the other ops, the release's names: as they were
    assert _rows(db, "SELECT * FROM release_ops WHERE op_name != 'Transform' "
                     "ORDER BY 2") == before
    assert _rows(db, "SELECT * FROM release_python_names") == names
    # an op the release does not have, a release the database does not hold: refused
    stray = dict(document("2.21.0", [op("Nowhere", "missing")]), probes=again["probes"])
    with pytest.raises(DocumentError, match="ops 2.21.0 .tensorflow-cpu. does not have: "
                                            "Nowhere"):
        load(engine, stray)
    with pytest.raises(DocumentError, match="which the database does not hold"):
        load(engine, dict(again, release=dict(again["release"], version="2.20.0")))
    engine.dispose()
    assert op_facts("2.21.0", ["Transform"], db=db)[1]["Transform"].effective == "partial"
