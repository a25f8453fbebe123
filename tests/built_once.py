"""Expensive test inputs built once per run, however many pytest-xdist workers ask.

A session fixture is per worker process under xdist; for what is costly to build (a full
harvest with probes, a database loaded from it) the first worker builds it into the run's
shared temporary folder, holding a file lock, and the others wait and read it (the pattern
from pytest-xdist's documentation, with the standard library's ``fcntl``).
"""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], None]) -> Path:
    """The folder ``name``, filled by ``build(folder)`` once per test run.

    Under xdist every worker's base temp is ``<run>/popen-gwN``, so ``<run>`` is shared by
    this run's workers and no other run's. Without xdist the folder is this session's own.
    A marker file says the build finished: a worker that failed half-way leaves no marker,
    and the next one starts again from an empty folder (ours: made under this run's temp).
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    root = tmp_path_factory.getbasetemp().parent
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
