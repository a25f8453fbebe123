"""Hostile SavedModel object graphs and files read once: size and depth bounded with one
ModelError, object paths in linear time and memory, a sparse file never doubled in
memory. Peak RSS is measured in a fresh process (VmHWM). No TensorFlow."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from test_hostile_models import _graph_with_input, _saved_model, _write  # tests/unit: on sys.path

from opregistry import check
from opregistry.model.graph import ModelError
from opregistry.model.readers import objects as object_bounds
from opregistry.model.readers import savedmodel

_MEASURE = """
import json, sys
from opregistry import check
from opregistry.model.graph import ModelError

def peak():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) * 1024

check(sys.argv[2], release="2.21")  # warm: imports and the database read
before = peak()
try:
    check(sys.argv[1], release="2.21")
    said = "checked"
except ModelError as exc:
    said = str(exc)
print(json.dumps([said, peak() - before]))
"""


def _checked_in_a_fresh_process(tmp_path, path):
    """What checking ``path`` said, and how much the peak RSS of a fresh process grew
    (bytes) while it did (the process is warmed up first on a tiny graph)."""
    warm = _write(tmp_path, _graph_with_input("x"), "warm.pb")
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(warm)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    said, growth = json.loads(done.stdout)
    return said, growth


def _objects(saved):
    return saved.meta_graphs[0].object_graph_def


def _chain(length, name="c"):
    """A change hanging a chain of ``length`` objects below the variable (object 1)."""
    def change(saved):
        objects = _objects(saved)
        for i in range(length):
            objects.nodes[len(objects.nodes) - 1].children.add(
                node_id=len(objects.nodes), local_name=f"{name}{i}")
            objects.nodes.add()
    return change


def test_a_chain_of_100000_objects_is_refused_at_the_depth_bound(tmp_path):
    """A 1.6 MB chain was a MemoryError traceback after 23 s: every object's path was
    built by copying its parent's (quadratic in depth). Now one line, at once."""
    model = _saved_model(tmp_path, _chain(100_000))
    started = time.monotonic()
    said, growth = _checked_in_a_fresh_process(tmp_path, model)
    assert said.endswith("its objects nest deeper than 200 (v -> c0 -> c1 -> ... -> c196 "
                         "-> c197 -> c198)"), said
    assert time.monotonic() - started < 60
    assert growth < 60 * 2 ** 20, growth  # the parsed file, not gigabytes


def test_20000_objects_stay_within_the_documented_bound(tmp_path):
    """20,000 objects (0.3 MB) peaked at 437 MB (1.2 GB here), over the README's
    200 MB + 10 x the file; 20,000 objects wide, each a variable, now cost megabytes."""
    def wide(saved):
        objects = _objects(saved)
        for i in range(20_000):
            objects.nodes[0].children.add(node_id=len(objects.nodes), local_name=f"w{i}")
            variable = objects.nodes.add().variable
            variable.dtype, variable.trainable, variable.name = 1, True, f"w{i}"
    for change, expected in ((_chain(20_000), "nest deeper than 200"), (wide, "checked")):
        (tmp_path / expected.split()[0]).mkdir()
        model = _saved_model(tmp_path / expected.split()[0], change)
        said, growth = _checked_in_a_fresh_process(tmp_path, model)
        assert expected in said, said
        assert growth < 60 * 2 ** 20, (expected, growth)


def test_paths_are_made_for_the_variables_a_result_names(tmp_path):
    """Object paths 199 objects deep: the variable's path is right, made from parent
    pointers when asked."""
    def change(saved):
        _chain(198)(saved)
        objects = _objects(saved)
        objects.nodes[0].children[0].local_name = "root_v"
        objects.nodes[-1].children.add(node_id=len(objects.nodes), local_name="deep")
        variable = objects.nodes.add().variable
        variable.dtype, variable.trainable, variable.name = 1, True, "deep"
    model = savedmodel.read(_saved_model(tmp_path, change))
    assert model.variable_paths == {"v": "root_v"}
    assert model.unused_variables == ["root_v/" + "/".join(f"c{i}" for i in range(198)) +
                                      "/deep"]


def test_the_object_count_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(object_bounds, "MAX_OBJECTS", 1000)

    def change(saved):
        for _ in range(1000):
            _objects(saved).nodes.add()
    with pytest.raises(ModelError, match=r"holds 1,002 objects, more than 1,000$"):
        check(_saved_model(tmp_path, change), release="2.21")


def test_the_references_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(object_bounds, "MAX_REFERENCES", 1000)

    def change(saved):
        for _ in range(1000):
            _objects(saved).nodes[0].children.add(node_id=1, local_name="again")
    with pytest.raises(ModelError, match=r"holds 1,001 child references, more than 1,000$"):
        check(_saved_model(tmp_path, change), release="2.21")


def test_the_text_of_the_paths_is_bounded(tmp_path):
    """150 objects deep with 10,000-character names (1.5 MB), named by 100 variables:
    150 MB of path text; refused before any is made."""
    def change(saved):
        _chain(150, name="n" * 10_000)(saved)
        objects = _objects(saved)
        deepest = len(objects.nodes) - 1
        for i in range(100):
            objects.nodes[deepest].children.add(node_id=len(objects.nodes), local_name=f"v{i}")
            variable = objects.nodes.add().variable
            variable.dtype, variable.trainable, variable.name = 1, True, f"v{i}"
    model = _saved_model(tmp_path, change)
    said, growth = _checked_in_a_fresh_process(tmp_path, model)
    assert "the object paths of its variables would take 150,0" in said, said
    assert growth < 80 * 2 ** 20, growth


def _sparse(path, size, head):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as file:
        file.write(head)
        file.truncate(size)
    return path


def test_a_sparse_file_with_a_valid_first_field_is_refused_unread(tmp_path):
    """2 GiB - 1 of holes after a valid first field was read (and doubled: 4 GiB)
    before the parser refused it: the fields after the first are walked first."""
    path = _sparse(tmp_path / "m" / "saved_model.pb", 2 ** 31 - 1, b"\x0a\x00")
    said, growth = _checked_in_a_fresh_process(tmp_path, path.parent)
    assert said.endswith("(its bytes at offset 2 are no protobuf field)"), said
    assert growth < 20 * 2 ** 20, growth


def test_a_field_past_the_end_of_the_file(tmp_path):
    path = tmp_path / "g.pb"
    path.write_bytes(_graph_with_input("x").SerializeToString() + b"\x0a\x7f\x0a")
    with pytest.raises(ModelError, match="the field at offset [0-9]+ ends 126 bytes past "
                                         "the file's end"):
        check(path, release="2.21")


def test_a_file_is_read_once_without_doubling(tmp_path):
    """A 256 MiB sparse file whose first field spans it is read (it costs its size, as
    a dense one would) but once: it cost twice its size (the first bytes, read
    apart, were joined to the rest)."""
    size = 256 * 2 ** 20
    length = size - 5  # a tag byte and a 4-byte varint: meta_graphs, spanning the file
    head = bytes([0x12] + [(length >> s) & 0x7F | (0x80 if s < 21 else 0) for s in (0, 7, 14, 21)])
    path = _sparse(tmp_path / "m" / "saved_model.pb", size, head)
    said, growth = _checked_in_a_fresh_process(tmp_path, path.parent)
    assert "saved_model.pb is not a SavedModel" in said, said
    assert 0.9 * size < growth < 1.2 * size, growth


def test_a_sparse_file_is_walked_to_its_end(tmp_path):
    """A GraphDef of 500 nodes (more fields than a dense file's walk checks), then
    holes to 2 GiB - 1: every field of a sparse file is walked, the hole is never
    read."""
    graph = _graph_with_input("x")
    for i in range(500):
        graph.node.add(name=f"n{i}", op="Relu", input=["x"]).attr["T"].type = 1
    data = graph.SerializeToString()
    path = _sparse(tmp_path / "g.pb", 2 ** 31 - 1, data)
    said, growth = _checked_in_a_fresh_process(tmp_path, path)
    assert said.endswith(f"(its bytes at offset {len(data)} are no protobuf field)"), said
    assert growth < 20 * 2 ** 20, growth
