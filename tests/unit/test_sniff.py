"""check-files decides by content which files are models (the pre-commit hook hands it
every file a commit touches); no TensorFlow."""
from __future__ import annotations

import zipfile

from opregistry.model.check_files import models_of
from opregistry.model.readers import schema
from opregistry.model.sniff import model_of


def _graph_def() -> bytes:
    graph = schema.message_classes()["GraphDef"]()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = schema.DT_FLOAT
    graph.node.add(name="ArgMax", op="ArgMax", input=["x"])
    return graph.SerializeToString()


def test_a_graphdef_is_a_model_whatever_its_name(tmp_path):
    for name in ("frozen_graph.pb", "model.bin", "graph"):
        (tmp_path / name).write_bytes(_graph_def())
        assert model_of(tmp_path / name) == str(tmp_path / name)


def test_files_that_are_no_model_are_left_alone(tmp_path):
    files = {
        "notes.txt": b"import tensorflow as tf\n",
        "picture.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "fingerprint.pb": b"\x08\x96\x01\x10\x05",  # varints: no GraphDef, no SavedModel
        "empty.pb": b"",
        "fake.keras": b"not a zip",
        "plain.pbtxt": b"just words\n",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        assert model_of(tmp_path / name) is None, name
    with zipfile.ZipFile(tmp_path / "archive.keras", "w") as archive:
        archive.writestr("readme.md", "no config")
    assert model_of(tmp_path / "archive.keras") is None


def test_text_graphs_keras_files_and_savedmodels_are_models(tmp_path):
    (tmp_path / "graph.pbtxt").write_text('# a graph\nnode {\n  name: "x"\n  op: "Const"\n}\n')
    assert model_of(tmp_path / "graph.pbtxt") == str(tmp_path / "graph.pbtxt")
    with zipfile.ZipFile(tmp_path / "model.keras", "w") as archive:
        archive.writestr("config.json", "{}")
    assert model_of(tmp_path / "model.keras") == str(tmp_path / "model.keras")
    (tmp_path / "old.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64))
    assert model_of(tmp_path / "old.h5") == str(tmp_path / "old.h5")
    saved = tmp_path / "export"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"\x08\x01")
    assert model_of(saved / "saved_model.pb") == str(saved)


def test_models_of_keeps_order_once_each_and_passes_missing_paths_to_check(tmp_path):
    (tmp_path / "a.pb").write_bytes(_graph_def())
    (tmp_path / "b.txt").write_text("text")
    saved = tmp_path / "export"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"\x08\x01")
    (saved / "fingerprint.pb").write_bytes(b"\x08\x96\x01")
    files = [str(p) for p in (saved / "saved_model.pb", tmp_path / "b.txt", tmp_path / "a.pb",
                              saved / "fingerprint.pb", tmp_path / "a.pb",
                              tmp_path / "gone.pb")]
    assert models_of(files) == [str(saved), str(tmp_path / "a.pb"), str(tmp_path / "gone.pb")]


def test_check_files_checks_each_model_and_keeps_going_past_an_error(tmp_path):
    """The library loop behind ``check-files``: a result or the error per model, in
    order, and check's exit rule (``fails``) the command uses for both commands."""
    from test_output_file import BLOCKED, CLEAN  # tests/unit is on sys.path

    from opregistry.db.location import shipped_database_path
    from opregistry.errors import OpregistryError
    from opregistry.model.check_files import check_files, fails

    (tmp_path / "blocked.pbtxt").write_text(BLOCKED)
    (tmp_path / "clean.pbtxt").write_text(CLEAN)
    (tmp_path / "notes.txt").write_text("no model")
    files = [str(tmp_path / n) for n in ("gone.pb", "notes.txt", "blocked.pbtxt",
                                         "clean.pbtxt")]
    out = list(check_files(files, release="2.21", db=shipped_database_path()))
    assert [model for model, _ in out] == [files[0], files[2], files[3]]
    assert isinstance(out[0][1], OpregistryError) and "no such file" in str(out[0][1])
    blocked, clean = out[1][1], out[2][1]
    assert not isinstance(blocked, OpregistryError) and fails(blocked)
    assert not isinstance(clean, OpregistryError) and not fails(clean)
    assert clean.release == blocked.release == "2.21.0"
