"""A TF Serving model base path (numbered SavedModel folders): ``check`` and
``upgrade_check`` read its newest version, their results carry it (the library chooses
it, once, in the reader), every format shows it (JSON's ``serving_version``, stderr's
line for the others) and the command line only renders it. No TensorFlow: SavedModels
written by hand, the shipped database."""
from __future__ import annotations

import json
import os
from pathlib import Path

import forked  # tests/unit is on sys.path
import pytest
from google.protobuf import text_format
from test_output_file import BLOCKED

from opregistry import UpgradeResult, check, upgrade_check
from opregistry.db.location import shipped_database_path
from opregistry.formats import render
from opregistry.model.readers import schema


def _saved_model(folder: Path) -> None:
    saved = schema.message_classes()["SavedModel"]()
    meta = saved.meta_graphs.add()
    meta.meta_info_def.tags.append("serve")
    text_format.Parse(BLOCKED, meta.graph_def, allow_unknown_field=True)
    folder.mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(saved.SerializeToString())


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Versions 3 and 10 (10 sorts before 3 as text) and an export in progress."""
    base = tmp_path_factory.mktemp("serving") / "model"
    for name in ("3", "10", "tmp-1700000000"):
        _saved_model(base / name)
    return base


SERVED = {"version": 10, "versions": 2, "ignored": ["tmp-1700000000"]}


def test_check_carries_the_version_in_every_format(base):
    db = shipped_database_path()
    result = check(base, db=db)
    assert result.serving_version is not None and result.serving_version.version == 10
    data = json.loads(render(result, "json"))
    assert data["serving_version"] == {"path": str(base / "10"), **SERVED}
    assert json.loads(render(check(base / "10", db=db), "json"))["serving_version"] is None


def test_upgrade_check_carries_the_version_it_read(base):
    db = shipped_database_path()
    result = upgrade_check(base, "2.13.1", "2.21.0", db=db)
    assert isinstance(result, UpgradeResult) and result.serving_version is not None
    assert (result.serving_version.path, result.serving_version.version) == (base / "10", 10)
    data = json.loads(render(result, "json"))
    assert data["serving_version"] == {"path": str(base / "10"), **SERVED}
    assert data["before"] == "2.13.1" and "changes" in data  # rendered as a diff
    plain = upgrade_check(base / "10", "2.13.1", "2.21.0", db=db)
    assert plain.serving_version is None and plain.to_dict()["serving_version"] is None
    assert plain.to_dict() == {**result.to_dict(), "serving_version": None}


@pytest.mark.parametrize("command", [["check"], ["upgrade-check", "--from", "2.13",
                                                 "--to", "2.21"]])
def test_the_command_line_renders_the_results_version(base, command, tmp_path):
    """The stderr line says the version the result carries (not one the command
    worked out again): both commands, the same line, first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPREGISTRY_")}
    done = forked.run([command[0], str(base), *command[1:], "--db",
                       str(shipped_database_path()), "-f", "json"], env=env, cwd=tmp_path)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"{base}: a model base path with 2 versions; checking the newest, '10' (version "
        f"10); ignored 1 folder not named by a number: 'tmp-1700000000'"), done.stderr
    assert json.loads(done.stdout)["serving_version"]["version"] == 10
