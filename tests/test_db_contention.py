"""Database writes under contention, with real processes on real SQLite files and a real
harvest: two loads at once, a load while another process holds the write lock, a SIGKILL
in the middle of `db upgrade` (without a harvest, in tests/unit/test_db_refusals.py: an
upgrade or a lookup under a lock, and `--db` values that are not databases)."""
from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from opregistry.db import migrate
from opregistry.db.engine import make_engine
from opregistry.db.location import resolve
from opregistry.db.vocabulary import HEAD_REVISION
from tests.unit.db_processes import cli, finish, hold_lock


def _releases(path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute(
            "SELECT r.version, COUNT(ro.op_name) FROM releases r LEFT JOIN release_ops ro "
            "ON ro.release_id = r.id GROUP BY r.id ORDER BY r.version").fetchall()


@pytest.fixture
def docs(tf_document: dict, tmp_path: Path) -> tuple[Path, Path, int]:
    """The session harvest under two release names, as files."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(tf_document))
    other = dict(tf_document, release=dict(tf_document["release"], version="9.9.9"))
    second.write_text(json.dumps(other))
    return first, second, len(tf_document["ops"])


def test_two_loads_of_the_same_release_queue_and_the_second_replaces_it(docs, tmp_path):
    first, _, n_ops = docs
    db = tmp_path / "same.sqlite"
    procs = [cli("db", "load", str(first), "--db", str(db)) for _ in range(2)]
    results = [finish(p) for p in procs]
    for code, _, err in results:
        assert code == 0 and "Traceback" not in err, err
    assert sorted("(replaced)" in err for _, _, err in results) == [False, True]
    assert [n for _, n in _releases(db)] == [n_ops]


def test_two_loads_of_different_releases_both_land(docs, tmp_path):
    first, second, n_ops = docs
    db = tmp_path / "two.sqlite"
    migrate.upgrade(make_engine(resolve(db), create=True))
    procs = [cli("db", "load", str(path), "--db", str(db)) for path in (first, second)]
    for code, _, err in (finish(p) for p in procs):
        assert code == 0 and "Traceback" not in err, err
    found = _releases(db)
    assert len(found) == 2 and all(n == n_ops for _, n in found)


def test_a_load_while_another_process_holds_the_lock_is_one_line(docs, db_copy):
    first, _, _ = docs
    before = _releases(db_copy)
    holder = hold_lock(db_copy, 20)
    try:
        started = time.monotonic()
        code, out, err = finish(cli("db", "load", str(first), "--db", str(db_copy),
                                    OPREGISTRY_BUSY_TIMEOUT="1"))
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and err.count("\n") == 1, err
    assert "is locked by another process; retried for 1 s" in err
    assert waited < 15  # it gave up after its timeout, not the holder's 20 s
    assert _releases(db_copy) == before


def test_a_load_waits_for_a_lock_that_is_released_in_time(docs, db_copy):
    first, _, _ = docs
    holder = hold_lock(db_copy, 2)
    code, _, err = finish(cli("db", "load", str(first), "--db", str(db_copy),
                              OPREGISTRY_BUSY_TIMEOUT="60"))
    holder.wait()
    assert code == 0 and "(replaced)" in err, err


def test_a_killed_db_upgrade_leaves_a_sound_database(db_copy, tf_document):
    """SIGKILL `db upgrade` from 0002 at many moments: the database is always sound,
    at one revision or the other, with every row of the per-input table."""
    engine = make_engine(resolve(db_copy))
    with sqlite3.connect(db_copy) as conn:
        n_inputs = conn.execute("SELECT COUNT(*) FROM op_inputs").fetchone()[0]
    outcomes = set()
    for delay in (0.0, 0.4, 0.8, 1.2, 1.6, 2.0, 2.5, 3.0):
        migrate.downgrade(engine, "0002_probes")
        proc = cli("db", "upgrade", "--db", str(db_copy))
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        revision = migrate.current(engine)
        outcomes.add(revision)
        assert revision in ("0002_probes", HEAD_REVISION)
        column = "carries_gradient" if revision == HEAD_REVISION else "trainable"
        with sqlite3.connect(db_copy) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute(f"SELECT COUNT({column}) FROM op_inputs").fetchone()[0] \
                == n_inputs
        migrate.upgrade(engine)  # whatever happened, it can be completed
    assert _releases(db_copy)[0][1] == len(tf_document["ops"])
    assert "0002_probes" in outcomes  # some kills landed before the migration finished
