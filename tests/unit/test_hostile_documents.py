"""Harvest documents that are not what they claim: one DocumentError before anything
touches a database; the CLI says one line. No TensorFlow."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from opregistry.db.loader import read_document, validate
from opregistry.errors import DocumentError
from opregistry.harvest.collector import FORMAT


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_special_files_are_refused_before_they_are_read(tmp_path):
    fifo = tmp_path / "doc.json"
    os.mkfifo(fifo)
    with pytest.raises(DocumentError, match="not a regular file"):
        read_document(fifo)  # reading would block forever
    with pytest.raises(DocumentError, match="not a regular file"):
        read_document(__import__("pathlib").Path("/dev/zero"))  # would grow forever


def test_deep_json_and_bad_utf8_are_one_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(DocumentError, match="nested too deeply|cannot read"):
        read_document(deep)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(DocumentError, match="cannot read"):
        read_document(bad)


@pytest.mark.parametrize("version", [2, "1", True, None])
def test_the_format_version_message_says_what_was_found(version):
    with pytest.raises(DocumentError, match=r"format_version .* is not supported \(this "
                                            r"opregistry reads format_version 1\)"):
        validate({"format": FORMAT, "format_version": version})


def test_db_load_of_a_device_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = subprocess.run([sys.executable, "-m", "opregistry", "db", "load", "/dev/zero",
                           "--db", str(tmp_path / "x.sqlite")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "not a regular file" in done.stderr
