"""Database refusals with real processes on real SQLite files, without a harvest: an
upgrade or a lookup while another process holds the lock, and `--db` values that are
not databases (loads under contention, with a real harvest: tests/test_db_contention.py)."""
from __future__ import annotations

import subprocess
import sys
import time

import forked  # tests/unit is on sys.path
import pytest
from db_processes import cli, env, finish, hold_lock

from opregistry.db import migrate
from opregistry.db.engine import make_engine
from opregistry.db.location import resolve


def _forked(*args: str) -> tuple[int, str, str]:
    """``finish(cli(*args))`` in a process forked from this one (tests/unit/forked.py),
    for the refusals that involve no lock: no interpreter start-up per case."""
    done = forked.run(list(args), env=env(), timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_db_upgrade_under_a_lock_is_one_line(tmp_path):
    db = tmp_path / "old.sqlite"
    migrate.upgrade(make_engine(resolve(db), create=True), "0002_probes")
    holder = hold_lock(db, 20)
    try:
        code, _, err = finish(cli("db", "upgrade", "--db", str(db),
                                  OPREGISTRY_BUSY_TIMEOUT="0.5"))
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and err.count("\n") == 1 and "locked by another process" in err, err
    assert migrate.current(make_engine(resolve(db))) == "0002_probes"


@pytest.mark.parametrize("db", ["{tmp}", "/dev/null", "/proc/self/status", "{tmp}/missing/x.db",
                                "{tmp}/file.txt/x.db"])
@pytest.mark.parametrize("command", [["db", "upgrade"], ["db", "current"], ["lookup", "ArgMax"],
                                     ["db", "load", "{tmp}/doc.json"]])
def test_a_db_that_is_not_a_database_is_one_line(tmp_path, db, command):
    (tmp_path / "file.txt").write_text("not a database")
    (tmp_path / "doc.json").write_text("{}")
    args = [a.format(tmp=tmp_path) for a in command] + ["--db", db.format(tmp=tmp_path)]
    code, _, err = _forked(*args)
    assert code == 2 and err.count("\n") == 1 and err.startswith("Error: "), (args, err)
    assert "Traceback" not in err


def test_a_text_file_as_db_is_one_line(tmp_path):
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_text("hello, I am not SQLite" * 100)
    for args in (["db", "upgrade"], ["db", "current"], ["lookup", "ArgMax"]):
        code, _, err = _forked(*args, "--db", str(bogus))
        assert code == 2 and err.count("\n") == 1 and "not a database" in err, (args, err)


def test_db_upgrade_to_an_unknown_revision_is_one_line(tmp_path):
    code, _, err = _forked("db", "upgrade", "zzz", "--db", str(tmp_path / "n.sqlite"))
    assert code == 2 and err.count("\n") == 1 and "zzz" in err, err


def test_harvest_save_json_into_an_impossible_directory_fails_before_harvesting(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    started = time.monotonic()
    code, _, err = _forked("harvest", "--save-json", str(tmp_path / "file.txt" / "docs"),
                           "--db", str(tmp_path / "h.sqlite"))
    assert code == 2 and err.count("\n") == 1 and "save" in err.lower(), err
    assert time.monotonic() - started < 30  # refused up front, not after a harvest


def test_a_lookup_while_a_writer_holds_the_database_exclusively_is_one_line(small_db):
    db_copy = small_db()
    holder = hold_lock(db_copy, 20, exclusive=True)
    try:
        code, _, err = finish(cli("lookup", "ArgMax", "--db", str(db_copy),
                                OPREGISTRY_BUSY_TIMEOUT="0.5"))
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and err.count("\n") == 1, err
    assert "is locked by another process; retried for 0.5 s" in err


_UPGRADE = (
    "import sys\n"
    "from opregistry.db import migrate\n"
    "from opregistry.db.engine import make_engine\n"
    "from opregistry.db.location import resolve\n"
    "engine = make_engine(resolve(sys.argv[1]), create=True)\n"
    "print('start', flush=True)\n"
    "migrate.upgrade(engine)\n"
)


def test_a_new_file_migrated_by_another_writer_between_our_reads_is_not_foreign(
        tmp_path, monkeypatch):
    """`db load` into a new file, twice at once (CI saw it once, under load): one process
    read "no revision", the other migrated, and the first then saw tables and refused the
    file as foreign. Another process migrates exactly in that gap here; it must wait for
    our read to end, and both must end at head."""
    path = tmp_path / "new.sqlite"
    ours = make_engine(resolve(path), create=True)
    real_inspect = migrate.inspect
    others: list[subprocess.Popen[str]] = []

    def inspect_after_another_writer(target: object) -> object:
        other = subprocess.Popen([sys.executable, "-c", _UPGRADE, str(path)], text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
        others.append(other)
        assert other.stdout is not None and other.stdout.readline() == "start\n"
        try:  # done in well under a second unless our read holds the lock, as it should
            other.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        return real_inspect(target)

    monkeypatch.setattr(migrate, "inspect", inspect_after_another_writer)
    migrate.ensure_current(ours)
    [other] = others
    code, _, err = finish(other)
    assert code == 0, err
    assert migrate.current(ours) == migrate.heads()[0]
    ours.dispose()
