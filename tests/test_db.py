"""Schema migrations and loading, on real SQLite files with a real harvest."""
from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from opregistry.db import migrate
from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.db.vocabulary import HEAD_REVISION
from opregistry.errors import DocumentError


def counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name != 'alembic_version'")]
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}


def test_downgrade_to_base_and_upgrade_again_with_a_release_loaded(db_copy, tf_document):
    engine = make_engine(resolve(db_copy))
    assert migrate.current(engine) == HEAD_REVISION
    migrate.downgrade(engine, "base")
    assert migrate.current(engine) is None
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    migrate.upgrade(engine)
    assert migrate.current(engine) == HEAD_REVISION
    result = load(engine, tf_document)
    assert result.ops == len(tf_document["ops"])


def test_reloading_a_release_replaces_it(db_copy, tf_document):
    before = counts(db_copy)
    engine = make_engine(resolve(db_copy))
    result = load(engine, tf_document)
    assert result.replaced and result.new_op_defs == 0 and result.new_gradient_functions == 0
    assert counts(db_copy) == before


def test_identical_records_are_stored_once(db_copy, tf_document):
    """A second release with the same content adds no OpDef or gradient function rows."""
    twin = copy.deepcopy(tf_document)
    twin["release"]["version"] = "0.0.1-twin"
    engine = make_engine(resolve(db_copy))
    before = counts(db_copy)
    load(engine, twin)
    after = counts(db_copy)
    assert after["op_defs"] == before["op_defs"]
    assert after["gradient_functions"] == before["gradient_functions"]
    assert after["python_names"] == before["python_names"]
    assert after["release_ops"] == 2 * before["release_ops"]


def test_a_failing_load_leaves_the_database_as_it_was(db_copy, tf_document):
    before = counts(db_copy)
    broken = copy.deepcopy(tf_document)
    broken["ops"].append(copy.deepcopy(broken["ops"][0]))  # duplicate key: fails mid-insert
    engine = make_engine(resolve(db_copy))
    with pytest.raises((IntegrityError, DocumentError)):  # refused, by validation or SQL
        load(engine, broken)
    assert counts(db_copy) == before


def test_a_malformed_document_is_refused_before_writing(db_copy, tf_document):
    before = counts(db_copy)
    bad = copy.deepcopy(tf_document)
    bad["ops"][5]["gradient"]["status"] = "maybe"
    with pytest.raises(DocumentError):
        load(make_engine(resolve(db_copy)), bad)
    with pytest.raises(DocumentError):
        load(make_engine(resolve(db_copy)), {"format": "something else"})
    assert counts(db_copy) == before


def test_a_killed_load_leaves_the_database_as_it_was(db_copy, tf_document_path):
    """SIGKILL a process in the middle of re-loading the release, many times over."""
    before = counts(db_copy)
    script = (
        "import json, sys\n"
        "from opregistry.db.engine import make_engine\n"
        "from opregistry.db.loader import load\n"
        "from opregistry.db.location import resolve\n"
        "doc = json.load(open(sys.argv[2]))\n"
        "engine = make_engine(resolve(sys.argv[1]))\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    doc['release']['version'] = 'killed-' + doc['release']['version']\n"
        "    load(engine, doc)\n"
    )
    for delay in (0.3, 0.7, 1.1):
        proc = subprocess.Popen([sys.executable, "-c", script, str(db_copy), str(tf_document_path)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.kill()
        proc.wait()
        with sqlite3.connect(db_copy) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            # every release present is complete: as many op rows as its document had ops
            per_release = conn.execute(
                "SELECT r.version, COUNT(ro.op_name) FROM releases r "
                "LEFT JOIN release_ops ro ON ro.release_id = r.id GROUP BY r.id").fetchall()
        assert all(n == before["release_ops"] for _, n in per_release), per_release
    # the original release is untouched
    with sqlite3.connect(db_copy) as conn:
        original = json.loads(tf_document_path.read_text())["release"]["version"]
        assert conn.execute("SELECT COUNT(*) FROM releases WHERE version = ?",
                            (original,)).fetchone()[0] == 1


def test_a_database_at_the_first_revision_upgrades_keeping_every_release(tmp_path, tf_document):
    """Fill a database at 0001 the way that revision's code did, then upgrade it."""
    path = tmp_path / "rev1.sqlite"
    engine = make_engine(resolve(path), create=True)
    migrate.upgrade(engine, "0001_initial")
    rel = tf_document["release"]
    with sqlite3.connect(path) as conn:
        for version in ("1.0.0-old", "2.0.0-old"):
            cur = conn.execute(
                "INSERT INTO releases (version, package, package_version, git_version, "
                "python_version, platform, machine, harvested_at, collector_format, "
                "raw_ops_available, imports_attempted, import_failures) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 1, 0, '[]')",
                (version, rel["package"], version, None, "3.11", "linux", "x86_64", "then"))
            conn.execute("INSERT OR IGNORE INTO op_defs (id, digest, name, summary, is_stateful, "
                         "definition) VALUES (1, 'd', 'MatMul', '', 0, '{}')")
            conn.executemany(
                "INSERT INTO release_ops (release_id, op_name, op_def_id, public, gradient) "
                "VALUES (?, ?, 1, 1, ?)",
                [(cur.lastrowid, op["name"], op["gradient"]["status"])
                 for op in tf_document["ops"]])
    migrate.upgrade(engine)
    assert migrate.current(engine) == HEAD_REVISION
    import opregistry

    summaries = opregistry.releases(db=path)
    assert [s.release for s in summaries] == ["1.0.0-old", "2.0.0-old"]
    assert all(s.ops == len(tf_document["ops"]) for s in summaries)
    row = opregistry.lookup("MatMul", release="1.0.0-old", db=path).rows[0]
    assert row.gradient == "registered" and row.effective is None  # not probed then
    load(engine, tf_document)  # and the new release loads next to them
    assert len(opregistry.releases(db=path)) == 3


def test_per_input_rows_survive_the_rename_to_carries_gradient(db_copy):
    """0003 renames op_inputs.trainable; a database at 0002 keeps every row and value."""
    import opregistry

    engine = make_engine(resolve(db_copy))
    before = opregistry.lookup("GatherV2", db=db_copy).rows[0].inputs
    migrate.downgrade(engine, "0002_probes")
    with sqlite3.connect(db_copy) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(op_inputs)")]
        old = conn.execute("SELECT op_name, position, trainable FROM op_inputs "
                           "ORDER BY op_name, position").fetchall()
    assert "trainable" in columns and "carries_gradient" not in columns
    migrate.upgrade(engine)
    with sqlite3.connect(db_copy) as conn:
        new = conn.execute("SELECT op_name, position, carries_gradient FROM op_inputs "
                           "ORDER BY op_name, position").fetchall()
    assert new == old and len(new) > 500
    after = opregistry.lookup("GatherV2", db=db_copy).rows[0].inputs
    assert after == before
    assert [i.carries_gradient for i in after] == [True, False, False]  # params, indices, axis


def test_function_sources_are_stored_once_across_releases(db_copy, tf_document):
    with_source = [op for op in tf_document["ops"] if op["gradient"].get("function", {})
                   .get("source")]
    assert len(with_source) > 300  # the collector keeps each gradient function's source
    before = counts(db_copy)
    assert before["function_sources"] >= len({op["gradient"]["function"]["source"]
                                                for op in with_source})
    again = copy.deepcopy(tf_document)
    again["release"]["version"] = "9.9.9"
    load(make_engine(resolve(db_copy)), again)
    after = counts(db_copy)
    assert after["function_sources"] == before["function_sources"]
    assert after["release_ops"] == 2 * before["release_ops"]
