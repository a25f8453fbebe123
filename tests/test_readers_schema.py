"""The static schema parses real SavedModels and GraphDefs exactly as TensorFlow does."""
from __future__ import annotations

from typing import Any

import pytest

from opregistry.model.readers import schema

tf: Any = pytest.importorskip("tensorflow")  # a module: its classes are bases below


class _Model(tf.Module):
    def __init__(self):
        super().__init__()
        self.kernel = tf.Variable([[1.0, 2.0]], name="dense/kernel")

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def __call__(self, x):
        y = tf.matmul(x, self.kernel)
        return {"loss": tf.reduce_sum(tf.round(y)), "index": tf.argmax(y, axis=1)}


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("sm") / "model"
    tf.saved_model.save(_Model(), str(path))
    return path


def test_savedmodel_matches_tensorflows_own_parse(saved_model):
    from tensorflow.core.protobuf import saved_model_pb2

    data = (saved_model / "saved_model.pb").read_bytes()
    theirs = saved_model_pb2.SavedModel.FromString(data)
    ours = schema.parse("SavedModel", data)
    assert len(ours.meta_graphs) == len(theirs.meta_graphs)
    for mine, real in zip(ours.meta_graphs, theirs.meta_graphs):
        assert list(mine.meta_info_def.tags) == list(real.meta_info_def.tags)
        assert [(n.name, n.op, list(n.input)) for n in mine.graph_def.node] == \
            [(n.name, n.op, list(n.input)) for n in real.graph_def.node]
        for a, b in zip(mine.graph_def.library.function, real.graph_def.library.function):
            assert a.signature.name == b.signature.name
            assert [x.type for x in a.signature.input_arg] == [x.type for x in b.signature.input_arg]
            assert [(n.name, n.op, list(n.input)) for n in a.node_def] == \
                [(n.name, n.op, list(n.input)) for n in b.node_def]
            assert dict(a.ret) == dict(b.ret)
            for n_a, n_b in zip(a.node_def, b.node_def):
                assert {k: v.type for k, v in n_a.attr.items()} == \
                    {k: v.type for k, v in n_b.attr.items()}
        assert set(mine.signature_def) == set(real.signature_def)
        serving = mine.signature_def["serving_default"]
        assert set(serving.outputs) == {"loss", "index"}
        assert serving.outputs["index"].dtype == schema.DT_INT64
        names = {n.variable.name for n in mine.object_graph_def.nodes if n.variable.name}
        assert names == {"dense/kernel"}


def test_graphdef_parses(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        tf.identity(tf.nn.relu(x) * 2.0, name="y")
    data = graph.as_graph_def().SerializeToString()
    ours = schema.parse("GraphDef", data)
    assert [n.op for n in ours.node] == [n.type for n in graph.get_operations()]
    relu = next(n for n in ours.node if n.op == "Relu")
    assert relu.attr["T"].type == schema.DT_FLOAT and list(relu.input) == ["x"]
