"""The command line without TensorFlow, on the shipped database and on small databases
built here: every command's help, a missing, corrupt or locked database, bad input,
the lookup fast path, and the harvest's refusals before it starts."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time

import pytest
import typer.main
from cli_run import run_cli  # tests/ is on sys.path (tests/conftest.py)
from typer.testing import CliRunner

from opregistry.cli.app import load_commands
from opregistry.cli.fast import try_fast
from opregistry.db.location import (
    DEFAULT_BUSY_SECONDS,
    busy_timeout,
    locked_error,
    shipped_database_path,
)
from opregistry.settings import BUSY_TIMEOUT as BUSY_ENV_VAR
from opregistry.settings import SettingError

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(load_commands(), list(args), catch_exceptions=False)


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


@pytest.mark.parametrize("args, message", [
    (["lookup", "ArgMx"], "did you mean ArgMax"),
    (["lookup", "MatMul", "--tf", "0.1"], "unknown release '0.1'"),
    (["ops", "--tf", "0.1"], "unknown release '0.1'"),
    (["diff", "0.1", "latest"], "unknown release '0.1'"),
    (["ops", "--status", "sometimes"], "unknown status 'sometimes'"),
    (["ops", "--effective", "mostly"], "unknown effective status 'mostly'"),
    (["probe-report", "--tf", "0.1"], "unknown release '0.1'"),
])
def test_bad_input_is_one_line_and_exit_2(small_db, cli, args, message):
    done = cli(*args, "--db", str(small_db()))
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


# the two tests below hold an SQLite lock in this process: the command runs in a process
# of its own (run_cli), not forked from this one, whose copy of SQLite's per-process lock
# table would still say the lock is held after it is released here
def _hold_exclusive(path):
    holder = sqlite3.connect(path, timeout=0, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_a_locked_database_is_one_line_after_the_busy_timeout(small_db):
    """The wait is OPREGISTRY_BUSY_TIMEOUT (here half a second, not the default 30 s):
    the command waits that long, then says so in one line."""
    db = small_db()
    holder = _hold_exclusive(db)
    try:
        started = time.monotonic()
        done = run_cli("lookup", "ArgMax", "--db", str(db), env={BUSY_ENV_VAR: "0.5"})
        waited = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is locked by another process; retried for 0.5 s" in done.stderr
    assert waited >= 0.5  # it did wait before giving up


def test_a_lock_released_within_the_busy_timeout_is_waited_for(small_db):
    db = small_db()
    holder = _hold_exclusive(db)
    release = threading.Timer(1.0, lambda: (holder.rollback(), holder.close()))
    release.start()
    try:
        done = run_cli("lookup", "ArgMax", "--db", str(db), env={BUSY_ENV_VAR: "60"})
    finally:
        release.join()
    assert done.returncode == 0, done.stderr
    assert "ArgMax" in done.stdout


def test_the_busy_timeout_defaults_to_30_s_and_reads_the_environment(monkeypatch):
    monkeypatch.delenv(BUSY_ENV_VAR, raising=False)
    assert busy_timeout() == DEFAULT_BUSY_SECONDS == 30.0
    assert "retried for 30 s" in str(locked_error("x"))
    monkeypatch.setenv(BUSY_ENV_VAR, "2.5")
    assert busy_timeout() == 2.5 and "retried for 2.5 s" in str(locked_error("x"))
    monkeypatch.setenv(BUSY_ENV_VAR, "0")
    assert busy_timeout() == 0.0
    for bad in ("-1", "soon", "inf", "nan", "1e9"):  # never a silent default
        monkeypatch.setenv(BUSY_ENV_VAR, bad)
        with pytest.raises(SettingError, match=f"OPREGISTRY_BUSY_TIMEOUT='{bad}' is not a"):
            busy_timeout()


def test_opregistry_db_environment_variable(small_db, cli):
    import json

    done = cli("lookup", "MatMul", "-f", "json", env={"OPREGISTRY_DB": str(small_db())})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["op"] == "MatMul"


@pytest.mark.parametrize("which", ["shipped", "small"])
def test_fast_path_gives_the_same_output_as_typer(small_db, capsys, which):
    db = shipped_database_path() if which == "shipped" else small_db()
    for args in (["lookup", "ArgMax", "tf.math.floor"], ["lookup", "shape", "-f", "csv"],
                 ["lookup", "ArgMx"], ["lookup", "MatMul", "--format=json", "--tf", "latest"]):
        full = args + ["--db", str(db)]
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


def test_lookup_never_imports_tensorflow_or_sqlalchemy(small_db):
    db = small_db()
    code = (f"import sys; sys.argv = ['opregistry', 'lookup', 'ArgMax', '--db', {str(db)!r}]\n"
            "from opregistry.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('tensorflow', 'sqlalchemy', 'typer', 'alembic') "
            "if m in sys.modules]\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in done.stderr, done.stderr


def test_every_format_is_handled(small_db):
    from opregistry.formats.lookup import LookupsRenderer

    db = small_db()
    for fmt in LookupsRenderer.formats:
        result = invoke("lookup", "MatMul", "--format", fmt.value, "--db", str(db))
        assert result.exit_code == 0 and "MatMul" in result.stdout, fmt


def test_harvest_needs_a_writable_database(cli):
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
