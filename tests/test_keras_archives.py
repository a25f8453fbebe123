"""Hostile `.keras` archives: a member that would be written outside the archive is
refused before Keras opens it (one `Error:` line, exit 2, no zipfile warnings)."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from opregistry import check
from opregistry.model.readers.model import ModelError


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
