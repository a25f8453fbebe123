"""`pip install .` (not editable, no TensorFlow) answers a lookup from the shipped
database and can migrate a database of its own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import checkout_copy

from opregistry.db.location import shipped_database_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    if not shipped_database_path().exists():
        pytest.fail("the shipped database is missing from data/")
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check",
                           str(checkout_copy(venv.parent / "source"))],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return venv


def test_installed_package_has_no_tensorflow(installed, tmp_path):
    done = subprocess.run([str(installed / "bin" / "python"), "-c", "import tensorflow"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode != 0


def test_installed_lookup_uses_the_shipped_database(installed, tmp_path):
    done = subprocess.run([str(installed / "bin" / "opregistry"), "lookup", "ArgMax",
                           "--format", "json"], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    import json

    rows = json.loads(done.stdout)
    assert {r["op"] for r in rows} == {"ArgMax"}
    assert len(rows) >= 20  # every shipped release
    assert all(r["gradient"] == "registered" for r in rows)


def test_installed_package_migrates_a_new_database(installed, tmp_path):
    db = tmp_path / "new.sqlite"
    done = subprocess.run([str(installed / "bin" / "opregistry"), "db", "upgrade", "--db",
                           str(db)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    current = subprocess.run([str(installed / "bin" / "opregistry"), "db", "current", "--db",
                              str(db)], capture_output=True, text=True, cwd=tmp_path)
    from opregistry.db.vocabulary import HEAD_REVISION

    assert current.stdout.strip() == HEAD_REVISION
