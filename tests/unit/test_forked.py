"""The forked command line (tests/unit/forked.py) answers as ``python -m opregistry``
does: the same exit code, stdout and stderr, for success, findings, a usage error, a
domain error, a missing file and help; so the tests that use it test the real thing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest

CASES = [
    ["lookup", "ArgMax", "--tf", "2.21", "--format", "json"],
    ["lookup", "NoSuchOpAnywhere"],
    ["lookup", "ArgMax", "--format", "nope"],
    ["lookup", "ArgMax", "--tf", "9.9"],
    ["db", "upgrade", "zzz", "--db", "{tmp}/n.sqlite"],
    ["check", "{tmp}/missing.pb"],
    ["ops", "--help"],
    ["--version"],
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) for a in CASES])
def test_a_forked_run_says_what_a_real_process_says(args: list[str], tmp_path: Path):
    args = [a.format(tmp=tmp_path) for a in args]
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    env["COLUMNS"] = "120"
    real = subprocess.run([sys.executable, "-m", "opregistry", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    fork = forked.run(args, env=env, cwd=tmp_path, timeout=120)
    assert (fork.returncode, fork.stdout, fork.stderr) == (
        real.returncode, real.stdout, real.stderr)
    assert real.stdout or real.stderr  # each case says something


def test_the_child_has_its_own_environment_directory_and_umask(tmp_path: Path):
    """Nothing set for the child leaks into this process."""
    cwd, umask = os.getcwd(), os.umask(0o022)
    os.umask(umask)
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = forked.run(["db", "upgrade", "--db", "new.sqlite"], env=dict(env, X_FORKED="1"),
                      cwd=tmp_path, umask=0o077)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new.sqlite").stat().st_mode & 0o777 == 0o600
    assert os.getcwd() == cwd and "X_FORKED" not in os.environ
    assert os.umask(umask) == umask
