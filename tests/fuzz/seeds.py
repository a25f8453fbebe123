"""Seeds of the fuzz harness: small real models, written by real TensorFlow and Keras.

Run in a subprocess of its own (``python -m tests.fuzz.seeds DIR``) so that the fuzzing
processes never import TensorFlow: they fork from a worker that only holds opregistry.
Each seed is one file the static readers take: a SavedModel's ``saved_model.pb`` (its
directory holds nothing else the readers look at), a GraphDef ``.pb`` or a ``.pbtxt``.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# seed name -> file name inside the seed's directory ("" : the directory is a SavedModel)
KINDS = {"keras_export": "saved_model.pb", "module_while_custom": "saved_model.pb",
         "multi_signature": "saved_model.pb", "tf1": "saved_model.pb",
         "frozen": "frozen.pb", "frozen_text": "frozen.pbtxt"}


def _keras_export(out: Path) -> None:
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu"),
                              keras.layers.Dense(2)])
    model.export(str(out), verbose=False)


def _module_while_custom(out: Path) -> None:
    import tensorflow as tf

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.ones([3]), name="w")
            self.b = tf.Variable(tf.zeros([3]), name="b", trainable=False)

        @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
        def serve(self, x):
            @tf.custom_gradient
            def clipped(t):
                return tf.identity(t), lambda dy: tf.clip_by_value(dy, -1.0, 1.0)

            def body(i, acc):
                return i + 1, acc * self.w + tf.cast(i, tf.float32)

            _, acc = tf.while_loop(lambda i, _: i < 3, body, (tf.constant(0), x))
            return {"y": clipped(acc) + self.b, "n": tf.argmax(acc)}

    module = Module()
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=True)
    tf.saved_model.save(module, str(out), signatures=module.serve, options=options)


def _multi_signature(out: Path) -> None:
    import tensorflow as tf

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="w")

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
        def predict(self, x):
            return {"p": tf.nn.softmax(tf.matmul(x, self.w))}

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32),
                                      tf.TensorSpec([None], tf.int64)])
        def loss(self, x, label):
            logits = tf.matmul(x, self.w)
            return {"loss": tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=label, logits=logits)), "k": tf.argmax(logits, axis=1)}

    module = Module()
    tf.saved_model.save(module, str(out), signatures={
        "serving_default": module.predict, "loss": module.loss})


def _tf1(out: Path) -> None:
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 2], initializer=tf1.ones_initializer())
        frozen = tf1.get_variable("frozen", [2], trainable=False,
                                  initializer=tf1.zeros_initializer())
        y = tf.nn.relu(tf.matmul(x, w)) + frozen
        index = tf.argmax(y, axis=1)
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            builder = tf1.saved_model.Builder(str(out))
            signature = tf1.saved_model.predict_signature_def({"x": x}, {"y": y, "i": index})
            builder.add_meta_graph_and_variables(session, ["serve"],
                                                 signature_def_map={"serving_default": signature})
            builder.save()


def _frozen(out: Path, text: bool) -> None:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    w = tf.Variable(tf.ones([3, 2]))

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def f(x):
        h = tf.nn.relu(tf.matmul(x, w))
        return tf.concat([tf.nn.softmax(h), tf.round(h)], axis=1)

    graph_def = convert_variables_to_constants_v2(f.get_concrete_function()).graph.as_graph_def()
    out.mkdir(parents=True)
    if text:
        (out / "frozen.pbtxt").write_text(str(graph_def))
    else:
        (out / "frozen.pb").write_bytes(graph_def.SerializeToString())


BUILDERS = {"keras_export": _keras_export, "module_while_custom": _module_while_custom,
            "multi_signature": _multi_signature, "tf1": _tf1,
            "frozen": lambda out: _frozen(out, False),
            "frozen_text": lambda out: _frozen(out, True)}


def _canonical(message: Any) -> bytes:
    """The same model in one order: nodes and functions sorted by name, maps written in
    key order (Keras and TF write both in an order that differs from run to run)."""
    graphs = [m.graph_def for m in message.meta_graphs] if hasattr(message, "meta_graphs") \
        else [message]
    for graph in graphs:
        _sort(graph.node, lambda n: n.name)
        for function in graph.library.function:
            _sort(function.node_def, lambda n: n.name)
        _sort(graph.library.function, lambda f: f.signature.name)
    return bytes(message.SerializeToString(deterministic=True))


def _sort(repeated: Any, key: Any) -> None:
    items = sorted([_copy(r) for r in repeated], key=key)
    del repeated[:]
    repeated.extend(items)


def _copy(message: Any) -> Any:
    out = type(message)()
    out.CopyFrom(message)
    return out


def build(root: Path) -> dict[str, Path]:
    """Every seed under ``root``: name -> the file the fuzzer mutates. Only the
    ``saved_model.pb`` of a SavedModel is kept (variables are never read statically).
    Byte-identical on every run: see ``_canonical``."""
    from opregistry.model.readers import schema

    found = {}
    for name, builder in BUILDERS.items():
        work = root / f"{name}.build"
        builder(work)
        target = root / name
        target.mkdir(parents=True, exist_ok=True)
        data = (work / KINDS[name]).read_bytes()
        if not KINDS[name].endswith(".pbtxt"):  # map entries in a fixed order
            message = "SavedModel" if KINDS[name] == "saved_model.pb" else "GraphDef"
            data = _canonical(schema.parse(message, data))
        (target / KINDS[name]).write_bytes(data)
        shutil.rmtree(work)
        found[name] = target / KINDS[name]
    return found


if __name__ == "__main__":
    for name, path in build(Path(sys.argv[1])).items():
        print(name, path, path.stat().st_size)
