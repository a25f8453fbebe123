"""The command line at its edges, on the shipped database and files made here (no
TensorFlow): a closed pipe, every release named in an error, files that are not what
their name says, and one error family for the library."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from documents import default_document  # tests/unit is on sys.path

import opregistry


def _env():
    return {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}


@pytest.mark.parametrize("args", [["lookup", "ArgMax", "AddV2", "Floor", "Round"],
                                  ["ops", "--tf", "2.21"]])
def test_a_reader_that_stops_early_gets_no_traceback(args):
    for _ in range(3):  # the race between writer and reader differs from run to run
        proc = subprocess.Popen([sys.executable, "-m", "opregistry", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # as `| head -1` does
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0
        assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_an_unknown_release_lists_every_release(cli):
    done = cli("lookup", "ArgMax", "--tf", "9.9", env=_env())
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    releases = {r.release for r in opregistry.releases() if not r.library}
    assert len(releases) > 1 and all(release in done.stderr for release in releases)


def test_csv_writes_yes_and_no_as_the_table_does(cli):
    done = cli("ops", "--tf", "2.21", "--format", "csv", env=_env())
    body = done.stdout.splitlines()[1:]
    assert any(line.endswith(",no,,") for line in body)
    assert not any("True" in line or "False" in line for line in body)


def test_model_errors_are_opregistry_errors(tmp_path, cli):
    with pytest.raises(opregistry.OpregistryError, match="no such file"):
        opregistry.check(tmp_path / "nope")
    text = tmp_path / "model.keras"
    text.write_text("not a model\n")
    done = cli("check", str(text), env=_env())
    assert done.returncode == 2
    assert done.stderr == f"Error: {text}: not a Keras file (a .keras file is a zip archive)\n"
    fake = tmp_path / "model.h5"
    fake.write_bytes(b"PK\x03\x04 not hdf5")
    assert "an .h5 file is HDF5" in cli("check", str(fake), env=_env()).stderr


def test_db_commands_that_print_data_take_format(tmp_path, cli):
    import json

    db = tmp_path / "new.sqlite"
    assert cli("db", "upgrade", "--db", str(db)).returncode == 0
    current = json.loads(cli("db", "current", "--db", str(db), "--format", "json").stdout)
    assert current["at_head"] and current["revision"] == current["head"][0]
    document = tmp_path / "harvest.json"
    document.write_text(json.dumps(default_document()))
    done = cli("db", "load", str(document), "--db", str(db), "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "file,release,package,ops,replaced"
    assert done.stdout.splitlines()[1].endswith(",no")
