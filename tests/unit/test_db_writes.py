"""What the database's write commands leave behind, with real processes on real SQLite
files: a `db load` killed mid-write (the read commands beside its hot journal), a
document loaded twice, and databases that are not opregistry's (another application's
Alembic database), which no write command may touch."""
from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest
from db_processes import cli, env
from documents import default_document, document, op

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.errors import DocumentError

# ------------------------------------------------------------------ a killed load


def _big_document() -> dict[str, object]:
    """A release whose load writes more pages than SQLite's page cache holds (2 MB), so
    a load killed in the middle has written into the database file itself."""
    ops = [op(f"Big{i}", "no_gradient") for i in range(1000)]
    for entry in ops:
        entry["op_def"]["summary"] = f"{entry['name']} " + "x" * 3000
    return document("9.9.0", ops)


def _killed_load(db: Path, doc: Path) -> None:
    """`opregistry db load` killed (SIGKILL) once it has written into ``db``: a hot
    journal beside it."""
    journal = db.with_name(db.name + "-journal")
    size = db.stat().st_size
    for _ in range(5):
        proc = cli("db", "load", str(doc), "--db", str(db))
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if journal.exists() and db.stat().st_size > size:
                proc.kill()
                break
            time.sleep(0.002)
        proc.communicate()
        if journal.exists() and journal.stat().st_size:
            return
    raise AssertionError("no load was killed in the middle of its writes")


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database beside the hot journal of a killed load (copy it before use)."""
    folder = tmp_path_factory.mktemp("killed")
    db = folder / "killed.sqlite"
    engine = make_engine(resolve(db), create=True)
    load(engine, default_document())
    engine.dispose()
    doc = folder / "big.json"
    doc.write_text(json.dumps(_big_document()))
    _killed_load(db, doc)
    return db


def _copy(db: Path, folder: Path) -> Path:
    """``db`` and its journal, copied together (as a backup would take them)."""
    folder.mkdir()
    for suffix in ("", "-journal"):
        shutil.copy(db.with_name(db.name + suffix), folder / (db.name + suffix))
    return folder / db.name


@pytest.mark.parametrize("command", [["releases"], ["lookup", "Floor", "-f", "json"],
                                     ["ops", "--tf", "2.1.0", "--all"],
                                     ["diff", "2.1.0", "2.1.0"]])
def test_read_commands_roll_back_the_journal_of_a_killed_load_and_say_so(
        tmp_path, killed, command):
    db = _copy(killed, tmp_path / "copy")
    before = db.read_bytes()
    code, out, err = _forked(*command, "--db", str(db))
    assert code == 0, err
    assert err.startswith(f"{db}: rolled back the journal of an interrupted write"), err
    assert "9.9.0" not in out and "Big1" not in out  # the killed load's rows are gone
    assert not db.with_name(db.name + "-journal").exists()
    assert db.read_bytes() != before  # rolled back in the file, not only in memory
    again = _forked(*command, "--db", str(db))
    assert again == (0, out, err.split("\n", 1)[1])  # said once: nothing left to roll back
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def _forked(*args: str) -> tuple[int, str, str]:
    done = forked.run(list(args), env=env(), timeout=300)
    return done.returncode, done.stdout, done.stderr


# ------------------------------------------------------------- another application's


def _foreign(path: Path, revision: str) -> Path:
    """Another application's Alembic database: an ``alembic_version`` table and a table
    without an INTEGER PRIMARY KEY whose rowids a VACUUM would renumber."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL "
                     "PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES (?)", (revision,))
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.executemany("INSERT INTO notes VALUES (?)", [(f"n{i}",) for i in range(5000)])
        conn.execute("DELETE FROM notes WHERE rowid % 2 = 0")
    conn.close()
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# their own revision id, and ours: the revision alone proves nothing
@pytest.mark.parametrize("revision", ["ae1027a6acf", "0008_xla_verdicts"])
@pytest.mark.parametrize("command", [["db", "vacuum"], ["db", "upgrade"],
                                     ["db", "downgrade", "base", "--yes"],
                                     ["db", "load", "{doc}"]])
def test_write_commands_never_touch_another_applications_alembic_database(
        tmp_path, revision, command):
    db = _foreign(tmp_path / "theirs.sqlite", revision)
    (tmp_path / "doc.json").write_text(json.dumps(default_document()))
    before = _digest(db)
    args = [a.format(doc=tmp_path / "doc.json") for a in command]
    code, out, err = _forked(*args, "--db", str(db))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"Error: {db} is not an opregistry database"), err
    assert _digest(db) == before


def test_our_database_with_a_table_of_someone_elses_is_not_vacuumed(tmp_path, small_db):
    db = small_db()
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = _digest(db)
    code, _, err = _forked("db", "vacuum", "--db", str(db))
    assert code == 2 and "tables opregistry never makes (notes)" in err, err
    assert _digest(db) == before


def test_an_empty_file_is_not_an_opregistry_database_to_vacuum(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    code, _, err = _forked("db", "vacuum", "--db", str(empty))
    assert code == 2 and "not an opregistry database (it has no tables)" in err, err


# ------------------------------------------------------------------ loading twice


def _dump(db: Path) -> list[tuple[object, ...]]:
    """Every row of every table, ids excluded where a re-load may renumber them."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = [(t, *r) for t in tables for r in conn.execute(f"SELECT * FROM {t}")]
    conn.close()
    return sorted(rows, key=repr)


def test_a_cpu_document_with_an_xla_record_of_another_device_is_refused(tmp_path):
    """It loaded once, then every second load failed (UNIQUE constraint failed: op_xla):
    the loader keyed the row by the record's device but kept the stored rows of every
    device but the document's. A record's device is the document's, or the document
    is refused; every document that loads, loads twice (test_fuzz_documents.py)."""
    doc = default_document()
    doc["ops"][1]["probe"]["xla"] = {"device": "GPU", "forward": {"status": "compiles"},
                                     "gradient": {"status": "fails", "op": "Floor"}}
    engine = make_engine(resolve(tmp_path / "twice.sqlite"), create=True)
    for _ in range(2):
        with pytest.raises(DocumentError, match=r"\$\.ops\[1\]\.probe\.xla\.device: 'GPU', "
                                                r"in a document of XLA verdicts on CPU"):
            load(engine, doc)
    doc["ops"][1]["probe"]["xla"]["device"] = "CPU"
    for _ in range(2):
        load(engine, doc)
    engine.dispose()


def test_a_device_harvest_loaded_twice_keeps_one_row_per_device(tmp_path):
    db = tmp_path / "devices.sqlite"
    engine = make_engine(resolve(db), create=True)
    cpu = default_document()
    cpu["ops"][1]["probe"]["xla"] = {"device": "CPU", "forward": {"status": "compiles"},
                                     "gradient": {"status": "compiles"}}
    gpu = json.loads(json.dumps(cpu))
    gpu["probes"]["xla_device"] = "GPU"
    gpu["ops"][1]["probe"]["xla"]["device"] = "GPU"
    for doc in (cpu, gpu, gpu, cpu, cpu, gpu):
        load(engine, doc)
    engine.dispose()
    with sqlite3.connect(db) as conn:
        devices = sorted(r[0] for r in conn.execute("SELECT device FROM op_xla"))
    conn.close()
    assert devices == ["CPU", "GPU"]
