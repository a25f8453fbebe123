"""Real processes against real SQLite files, for the database tests of both tiers:
the command line in a child process, and a process that holds the write lock. TF-free:
the unit tier imports it as ``db_processes``, the TF tier as ``tests.unit.db_processes``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def env(**extra: str) -> dict[str, str]:
    """This environment without OPREGISTRY_DB, plus ``extra``."""
    kept = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    return dict(kept, **extra)


def cli(*args: str, **extra_env: str) -> subprocess.Popen[str]:
    """``opregistry ARGS`` started in a child process."""
    return subprocess.Popen([sys.executable, "-m", "opregistry", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env(**extra_env))


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


_HOLD_LOCK = (
    "import sqlite3, sys, time\n"
    "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "conn.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
    "conn.execute('ROLLBACK')\n"
)


def hold_lock(db: Path, seconds: float, exclusive: bool = False) -> subprocess.Popen[str]:
    """A process holding ``db``'s write lock (``exclusive``: readers are shut out too)
    for ``seconds``, returned once it has it."""
    code = _HOLD_LOCK.replace("IMMEDIATE", "EXCLUSIVE") if exclusive else _HOLD_LOCK
    holder = subprocess.Popen([sys.executable, "-c", code, str(db), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder
