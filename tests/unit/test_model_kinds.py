"""The model kind is decided in one function (``model/kinds.py``): the static reader,
the sniffer and SARIF's artifact follow ``model_kind``, so a path is the same kind of
model for every command. A directory is a SavedModel whatever its name."""
from __future__ import annotations

from pathlib import Path

from test_hostile_models import _graph_with_input, _saved_model  # tests/unit: on sys.path
from test_output_file import BLOCKED

from opregistry import check
from opregistry.formats.sarif import artifact_uri
from opregistry.model.kinds import model_file, model_kind
from opregistry.model.readers import savedmodel
from opregistry.model.sniff import model_of


def _models(tmp_path: Path) -> dict[str, Path]:
    """One model of each kind the static reader takes, and a SavedModel directory named
    like a Keras file."""
    folder = _saved_model(tmp_path)
    keras_named = folder.rename(tmp_path / "exported.keras")
    folder = _saved_model(tmp_path)
    text = tmp_path / "g.pbtxt"
    text.write_text(BLOCKED)
    binary = tmp_path / "g.pb"
    binary.write_bytes(_graph_with_input("x").SerializeToString())
    return {"savedmodel": folder, "saved_model.pb": folder / "saved_model.pb",
            "keras-named folder": keras_named, "pbtxt": text, "graphdef": binary}


def test_the_reader_reads_each_path_as_model_kind_names_it(tmp_path):
    formats = {"savedmodel": "savedmodel", "pbtxt": "pbtxt", "graphdef": "graphdef"}
    for name, path in _models(tmp_path).items():
        kind = model_kind(path)
        assert kind != "keras", name
        assert {m.format for m in savedmodel.read_all(path)} == {formats[kind]}, name


def test_a_folder_named_like_a_keras_file_is_checked_as_a_saved_model(tmp_path):
    folder = _models(tmp_path)["keras-named folder"]
    assert model_kind(folder) == "savedmodel"
    result = check(folder, release="2.21")  # read statically: no TensorFlow traced
    assert [t.name for t in result.targets] == ["v", "x"] and not result.findings
    assert model_of(folder) == str(folder)
    assert model_of(folder / "saved_model.pb") == str(folder)


def test_sarif_points_at_the_file_of_the_model_kind(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    models = _models(tmp_path)
    for name in ("savedmodel", "keras-named folder"):
        assert model_file(models[name]) == str(models[name] / "saved_model.pb")
        assert artifact_uri(str(models[name])) == f"{models[name].name}/saved_model.pb"
    for name in ("saved_model.pb", "pbtxt", "graphdef"):
        assert model_file(models[name]) == str(models[name])
    empty = tmp_path / "empty"
    empty.mkdir()  # a directory without saved_model.pb stays what it is
    assert artifact_uri(str(empty)) == "empty"


def test_gradcheck_and_check_files_name_a_saved_model_by_model_kind(tmp_path):
    """gradcheck's target check and check-files' output guard ask ``saved_model_dir``:
    a directory whatever its name, or the folder of its saved_model.pb."""
    import pytest

    from opregistry.cli.gradcheck import check_target
    from opregistry.gradcheck.results import GradcheckError
    from opregistry.model.kinds import saved_model_dir

    models = _models(tmp_path)
    folder = models["savedmodel"]
    assert saved_model_dir(folder) == str(folder)
    assert saved_model_dir(models["saved_model.pb"]) == str(folder)
    assert saved_model_dir(models["keras-named folder"]) == str(models["keras-named folder"])
    assert saved_model_dir(models["pbtxt"]) is None
    for name in ("savedmodel", "saved_model.pb", "keras-named folder"):
        check_target(str(models[name]))  # accepted, before TensorFlow is imported
    empty = tmp_path / "empty.keras"
    empty.mkdir()
    with pytest.raises(GradcheckError, match="no saved_model.pb"):
        check_target(str(empty))
