"""Commands run from a deleted working directory, and ``db upgrade`` on a full disk
(RLIMIT_FSIZE: writes past the limit fail with EFBIG, no root needed): one ``Error:``
line or a normal run, never a traceback; no empty database file left behind."""
from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest

MODEL = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Square" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
"""


def cli(*args: str, cwd: Path, gone: bool = False, limit_kb: int | None = None
        ) -> subprocess.CompletedProcess[str]:
    def before_exec() -> None:
        if gone:  # the working directory is deleted under the command
            os.rmdir(cwd)
        if limit_kb is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_kb << 10, limit_kb << 10))

    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    return subprocess.run([sys.executable, "-m", "opregistry", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300, preexec_fn=before_exec)


@pytest.mark.parametrize("args, code, message", [
    (["check", "{model}"], 2, "Error: the working directory no longer exists, so no policy "
                              "file can be looked for: cd to a folder that exists or pass "
                              "--policy FILE"),
    (["check", "{model}", "--policy", "{policy}"], 0, None),
    (["lookup", "ArgMax", "--tf", "2.21"], 0, None),
    (["releases", "-o", "r.txt"], 2, "Error: cannot write r.txt: No such file or directory"),
    (["db", "upgrade", "--db", "new.sqlite"], 2,
     "Error: cannot resolve the database path new.sqlite: No such file or directory"),
    (["site", "out"], 2, "Error: cannot resolve out: No such file or directory"),
])
def test_a_deleted_working_directory_is_one_line_or_just_works(args, code, message, tmp_path):
    (tmp_path / "m.pbtxt").write_text(MODEL)
    (tmp_path / "policy.toml").write_text("")  # an empty policy: a regular file
    cwd = tmp_path / "gone"
    cwd.mkdir()
    done = cli(*(a.format(model=tmp_path / "m.pbtxt", policy=tmp_path / "policy.toml")
                 for a in args), cwd=cwd, gone=True)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    if message:
        assert done.stderr.splitlines() == [message]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pbtxt", "policy.toml"]


def dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        lines = list(conn.iterdump())
    conn.close()
    return lines


def test_db_upgrade_on_a_full_disk_leaves_no_file_and_an_old_database_intact(tmp_path):
    done = cli("db", "upgrade", "--db", "new.sqlite", cwd=tmp_path, limit_kb=8)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"Error: cannot upgrade {tmp_path / 'new.sqlite'}: disk I/O error"]
    assert list(tmp_path.iterdir()) == []  # not an empty database file, no temporary file
    done = cli("db", "upgrade", "--db", "new.sqlite", cwd=tmp_path)
    assert done.returncode == 0 and list(tmp_path.iterdir()) == [tmp_path / "new.sqlite"]
    assert done.stderr == f"{tmp_path / 'new.sqlite'} is at 0010_name_traces\n"
    done = cli("db", "downgrade", "0001", "--db", "new.sqlite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    before = dump(tmp_path / "new.sqlite")
    size_kb = (tmp_path / "new.sqlite").stat().st_size >> 10
    done = cli("db", "upgrade", "--db", "new.sqlite", cwd=tmp_path, limit_kb=size_kb // 2)
    assert done.returncode == 2 and "disk I/O error" in done.stderr, done.stderr
    # the same database (byte for byte but for free pages, which SQLite does not journal)
    assert dump(tmp_path / "new.sqlite") == before
    assert list(tmp_path.iterdir()) == [tmp_path / "new.sqlite"]
    done = cli("db", "current", "--db", "new.sqlite", cwd=tmp_path)
    assert done.stdout == "0001_initial\n"


def test_a_new_database_follows_the_umask(tmp_path):
    # not at the interpreter's exit: forked (tests/unit/forked.py), with its own umask
    done = forked.run(["db", "upgrade", "--db", str(tmp_path / "db.sqlite")],
                      env=dict(os.environ), umask=0o027, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "db.sqlite").stat().st_mode & 0o777 == 0o640
