"""Hostile `.keras` archives: a member that would be written outside the archive is
refused before Keras opens it (one `Error:` line, exit 2, no zipfile warnings)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from opregistry import check
from opregistry.model.graph import ModelError


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory):
    import keras

    path = tmp_path_factory.mktemp("keras") / "good.keras"
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(path)
    return path


def _with_member(source, target, member):
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr(member, b"owned")
    return target


@pytest.mark.parametrize("member", ["../../slip.txt", "/tmp/slip.txt", "assets/../../slip.txt",
                                    "..\\slip.txt", "C:/slip.txt", "a\nb.txt"])
def test_a_member_outside_the_archive_is_refused(keras_file, tmp_path, member):
    path = _with_member(keras_file, tmp_path / "slip.keras", member)
    with pytest.raises(ModelError, match="would be written outside the archive"):
        check(path, release="2.21")


def test_zip_slip_through_the_command_line_is_one_line_and_exit_2(keras_file, tmp_path):
    """It was refused by zipfile, with a UserWarning per extraction, and the rest of the
    archive loaded: exit 0."""
    path = _with_member(keras_file, tmp_path / "slip.keras", "../../slip.txt")
    env = {k: v for k, v in os.environ.items() if k not in ("OPREGISTRY_DB",
                                                             "TF_CPP_MIN_LOG_LEVEL")}
    for command in ("check", "gradcheck"):
        done = subprocess.run([sys.executable, "-m", "opregistry", command, str(path),
                               "--tf", "2.21"], capture_output=True, text=True, env=env,
                              timeout=600, cwd=tmp_path)
        assert done.returncode == 2 and done.stderr == (
            f"Error: {path}: archive member '../../slip.txt' would be written outside the "
            f"archive (refused)\n"), (command, done.stderr)
    assert not (tmp_path.parent / "slip.txt").exists()


def test_the_good_archive_is_still_read(keras_file):
    (report,) = check(keras_file, release="2.21").outputs
    assert len(report.with_gradient) == 3  # the input, the kernel and the bias


ARCHIVE_INPUTS = 120


def test_mutated_archives_never_run_code_and_fail_in_one_line(tmp_path):
    """tests/fuzz/archives.py: 120 mutated `.keras`/`.h5` files through the command
    line's main() in one fresh process (TensorFlow imported once): each a result or
    exit 2 with one `Error:` line, no traceback, no code run (the canary file never
    appears), and each input's peak RSS growth within the bound's allowance."""
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = subprocess.run([sys.executable, "-m", "tests.fuzz.archives", "--inputs",
                           str(ARCHIVE_INPUTS), "--work", str(tmp_path), "--json"],
                          capture_output=True, text=True, env=env, cwd=root, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout)
    assert len(outcomes) == ARCHIVE_INPUTS
    failures = [o for o in outcomes if o["outcome"] == "failure"]
    assert not failures, failures
    assert not (tmp_path / "canary").exists()
    for o in outcomes:  # the static readers' bound, over what TensorFlow already holds
        assert o["growth_kb"] * 1024 <= 200 * 2 ** 20 + 10 * o["size"], o
    labels = " ".join(label for o in outcomes for label in o["labels"])
    for family in ("zip-slip", "lambda bytecode", "module names code", "nested",
                   "bits flipped", "truncated", "model_config"):
        assert family in labels, family
    assert {o["outcome"] for o in outcomes} == {"clean", "model_error"}
