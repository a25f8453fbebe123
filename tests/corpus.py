"""A corpus of real models, built offline in the test run (no weights downloaded): the
SavedModels users actually have, each written here with real TensorFlow and Keras.

``build(root)`` writes every model under ``root`` and returns one ``Entry`` per
SavedModel: its path, and, where the model runs in this process, the live object with
example inputs (for gradcheck and live checks).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@dataclass
class Entry:
    name: str
    path: Path
    live: Any = None  # a Keras model or tf.Module / tf.function that runs here
    inputs: tuple[Any, ...] = ()  # example inputs for ``live``
    tags: list[str] = field(default_factory=list)  # what the model is for (reports)
    keep: Any = None  # the module a tf.function method belongs to (held weakly by TF)


def _tf():
    import tensorflow as tf

    return tf


def _keras():
    import keras

    return keras


def _serve(model: Any, specs: Any) -> Any:
    """The signature a user writes for tf.saved_model.save: inference mode."""
    tf: Any = _tf()
    return tf.function(lambda *args: model(*args, training=False)).get_concrete_function(*specs)


def _save_both(name: str, root: Path, model: Any, specs: list[Any], inputs: tuple[Any, ...],
               tags: list[str]) -> list[Entry]:
    """The two ways a Keras 3 model becomes a SavedModel: ``model.export`` (two
    signatures, variables tracked twice) and ``tf.saved_model.save`` with a signature."""
    tf: Any = _tf()
    exported = root / f"{name}-export"
    model.export(str(exported), verbose=False)
    saved = root / f"{name}-saved"
    tf.saved_model.save(model, str(saved), signatures=_serve(model, specs))
    return [Entry(f"{name}-export", exported, model, inputs, tags + ["model.export"]),
            Entry(f"{name}-saved", saved, model, inputs, tags + ["tf.saved_model.save"])]


def keras_application(name: str, root: Path, size: int = 96) -> list[Entry]:
    import numpy as np

    keras, tf = _keras(), _tf()
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3))
    spec = tf.TensorSpec([1, size, size, 3], tf.float32)
    x = tf.constant(np.random.default_rng(0).uniform(0, 1, (1, size, size, 3)), tf.float32)
    return _save_both(name, root, model, [spec], (x,), ["keras.applications"])


def bert_backbone(root: Path) -> list[Entry]:
    """A keras-hub BERT backbone with random weights, from its config (offline)."""
    import keras_hub
    import numpy as np

    keras, tf = _keras(), _tf()
    keras.utils.set_random_seed(0)
    model = keras_hub.models.BertBackbone(vocabulary_size=40, num_layers=2, num_heads=2,
                                          hidden_dim=16, intermediate_dim=32,
                                          max_sequence_length=8)
    spec = {"token_ids": tf.TensorSpec([1, 6], tf.int32),
            "segment_ids": tf.TensorSpec([1, 6], tf.int32),
            "padding_mask": tf.TensorSpec([1, 6], tf.int32)}
    rng = np.random.default_rng(0)
    inputs = {"token_ids": tf.constant(rng.integers(0, 40, (1, 6)), tf.int32),
              "segment_ids": tf.zeros((1, 6), tf.int32),
              "padding_mask": tf.ones((1, 6), tf.int32)}
    return _save_both("BertBackbone", root, model, [spec], (inputs,), ["keras-hub"])


def multi_head(root: Path) -> list[Entry]:
    """One trunk, four heads: clean, through argmax, through round, through a
    float->int->float cast; plus the issue's Dense -> round -> Dense chain."""
    keras, tf = _keras(), _tf()
    keras.utils.set_random_seed(0)
    x = keras.Input((4,), name="features")
    trunk = keras.layers.Dense(5, activation="tanh", name="trunk")(x)
    clean = keras.layers.Dense(1, name="clean")(trunk)
    index = keras.ops.cast(keras.ops.argmax(trunk, axis=-1), "float32")
    argmax = keras.layers.Dense(1, name="argmax_head")(keras.ops.expand_dims(index, -1))
    rounded = keras.layers.Dense(1, name="round_head")(keras.ops.round(trunk * 3.0))
    as_int = keras.ops.cast(keras.ops.cast(trunk * 10.0, "int32"), "float32")
    cast = keras.layers.Dense(1, name="cast_head")(as_int)
    model = keras.Model(x, {"clean": clean, "argmax": argmax, "rounded": rounded,
                            "cast": cast}, name="multi_head")
    spec = tf.TensorSpec([2, 4], tf.float32)
    value = tf.constant([[0.3, -0.2, 0.5, 0.1], [-0.4, 0.6, 0.2, -0.1]])
    entries = _save_both("multi_head", root, model, [spec], (value,), ["keras", "heads"])

    inp = keras.Input((4,), name="x")
    h = keras.layers.Dense(3, name="d1")(inp)
    chain = keras.Model(inp, keras.layers.Dense(1, name="d2")(keras.ops.round(h)))
    entries += _save_both("dense_round_dense", root, chain, [spec], (value,), ["keras"])
    return entries


class SameNamed:
    """A tf.Module with unnamed variables (all saved as ``Variable``), as TensorFlow
    Probability code writes them; one of them only through round."""

    @staticmethod
    def make():
        tf: Any = _tf()

        class Distribution(tf.Module):
            def __init__(self):
                super().__init__()
                self.loc = tf.Variable(0.3)
                self.raw_scale = tf.Variable(0.8)
                self.logits = tf.Variable([0.1, 0.7, -0.2])
                self.raw_conc = tf.Variable(1.2)

            @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
            def log_prob(self, x):
                scale = tf.nn.softplus(self.raw_scale)
                z = (x - self.loc) / scale
                mixture = tf.reduce_sum(tf.nn.log_softmax(self.logits))
                conc = tf.round(self.raw_conc)  # blocked: round
                return {"log_prob": tf.reduce_sum(-0.5 * z * z) - tf.math.log(scale),
                        "mixture": mixture * conc}

        return Distribution()


def same_named(root: Path) -> list[Entry]:
    tf: Any = _tf()
    module = SameNamed.make()
    path = root / "same_named"
    tf.saved_model.save(module, str(path), signatures=module.log_prob)
    return [Entry("same_named", path, module.log_prob, (tf.constant([0.2, -0.5]),),
                  ["tf.Module"], keep=module)]


def shared_function(root: Path) -> list[Entry]:
    """Two signatures, same input key, both calling one inner tf.function; one of them
    rounds the result."""
    tf: Any = _tf()

    class Shared(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable([[0.5], [-0.3]], name="w")
            self.b = tf.Variable([0.1], name="b")

        @tf.function
        def body(self, x):
            return tf.matmul(x, self.w) + self.b

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
        def a(self, x):
            return {"y": self.body(x)}

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
        def b_round(self, x):
            return {"y": tf.round(self.body(x) * 4.0), "z": self.body(x) * 2.0}

    module = Shared()
    path = root / "shared_function"
    tf.saved_model.save(module, str(path), signatures={"a": module.a, "b": module.b_round})
    return [Entry("shared_function", path, None, (), ["tf.Module", "signatures"])]


def functions(root: Path) -> list[Entry]:
    """Custom gradients saved with and without their function, one that gives an input
    none, a py_function, a numpy_function and a While loop, each in its own module
    (a py_function stops the whole signature of a loaded model)."""
    import numpy as np

    tf: Any = _tf()
    spec = tf.TensorSpec([None, 1], tf.float32)
    x = tf.constant([[1.3]])
    entries = []

    class Custom(tf.Module):
        def __init__(self):
            super().__init__()
            self.u = tf.Variable(0.9, name="u")
            self.w = tf.Variable(1.5, name="w")
            self.v = tf.Variable(0.5, name="v")

        @tf.function(input_signature=[spec])
        def serve(self, x):
            @tf.custom_gradient
            def scaled(t):
                return t * 2.0, lambda dy: dy * 2.0

            @tf.custom_gradient
            def product(a, b):
                return a * b, lambda dy: (dy * b, tf.zeros_like(b))

            return {"custom": tf.reduce_sum(scaled(x * self.u)),
                    "partial": tf.reduce_sum(product(x * self.w, x + self.v)),
                    "plain": tf.reduce_sum(x * self.v)}

    for saved in (True, False):
        module = Custom()
        path = root / f"custom_gradient_{'saved' if saved else 'not_saved'}"
        options = tf.saved_model.SaveOptions(experimental_custom_gradients=saved)
        tf.saved_model.save(module, str(path), signatures=module.serve, options=options)
        entries.append(Entry(path.name, path, module.serve, (x,), ["custom_gradient"],
                             keep=module))

    class Python(tf.Module):
        def __init__(self, kind):
            super().__init__()
            self.kind = kind
            self.w = tf.Variable(1.5, name="w")
            self.v = tf.Variable(0.7, name="v")

        @tf.function(input_signature=[spec])
        def serve(self, x):
            if self.kind == "numpy_function":
                out = tf.numpy_function(np.sinh, [x * self.w], tf.float32)
            else:
                out = tf.py_function(np.sinh, [x * self.w], tf.float32)
            return {"python": tf.reduce_sum(out), "plain": tf.reduce_sum(x * self.v)}

    for kind in ("py_function", "numpy_function"):
        module = Python(kind)
        path = root / kind
        tf.saved_model.save(module, str(path), signatures=module.serve)
        entries.append(Entry(kind, path, module.serve, (x,), ["python"], keep=module))

    class Loop(tf.Module):
        """c reaches p only through q after two iterations (through round in one
        loop); d is unrelated to the loops."""

        def __init__(self):
            super().__init__()
            self.a = tf.Variable(1.0, name="a")
            self.b = tf.Variable(0.5, name="b")
            self.c = tf.Variable(1.3, name="c")  # round(c) = 1: x's gradient not zero
            self.d = tf.Variable(0.7, name="d")

        @tf.function(input_signature=[spec])
        def serve(self, x):
            scale = tf.reduce_sum(x)

            def run(step):
                def body(i, p, q, r):
                    return i + 1, p + q, step(r) * scale, r

                start = (0, self.a * 1.0, self.b * 1.0, self.c * 1.0)
                return tf.while_loop(lambda i, *_: i < 3, body, start)[1]

            return {"smooth": tf.reduce_sum(run(lambda r: r * 2.0)),
                    "rounded": tf.reduce_sum(run(tf.round)),
                    "other": tf.reduce_sum(self.d * x)}

    module = Loop()
    path = root / "while_loop"
    tf.saved_model.save(module, str(path), signatures=module.serve)
    entries.append(Entry("while_loop", path, module.serve, (x,), ["while"], keep=module))

    class Partial(tf.Module):
        """mean(cast(argmax(l)) * sum(l)): a gradient still arrives through the sum."""

        def __init__(self):
            super().__init__()
            self.w = tf.Variable([[0.4, -0.2, 0.9]], name="w")

        @tf.function(input_signature=[spec])
        def serve(self, x):
            logits = tf.matmul(x, self.w)
            hard = tf.cast(tf.argmax(logits, axis=1), tf.float32)
            # Keras-style negative-zero handling: bits that only feed a condition
            negative_zero = tf.equal(tf.bitcast(logits, tf.int32), -2 ** 31)
            safe = tf.where(negative_zero, tf.zeros_like(logits), logits)
            return {"partial": tf.reduce_mean(hard * tf.reduce_sum(safe)),
                    "hard": tf.reduce_mean(hard * 1.0)}

    module = Partial()
    path = root / "partial_path"
    tf.saved_model.save(module, str(path), signatures=module.serve)
    entries.append(Entry("partial_path", path, module.serve, (x,), ["argmax"], keep=module))
    return entries


def tf1_two_meta_graphs(root: Path) -> list[Entry]:
    """A TF1 ``SavedModelBuilder`` model: a serving and a training MetaGraph, a
    non-trainable global step."""
    tf: Any = _tf()
    tf1 = tf.compat.v1
    path = root / "tf1_builder"
    with tf.Graph().as_default(), tf1.Session() as sess:
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 2], use_resource=True)
        b = tf1.get_variable("b", [2], use_resource=True)
        step = tf1.get_variable("step", [], trainable=False, use_resource=True)
        logits = tf.matmul(x, w) + b + step
        served = tf.identity(logits, name="served")
        hard = tf.cast(tf.argmax(logits, axis=1), tf.float32, name="hard")
        sess.run(tf1.global_variables_initializer())
        builder = tf1.saved_model.Builder(str(path))

        def sig(out):
            return tf1.saved_model.signature_def_utils.predict_signature_def({"x": x},
                                                                             {"y": out})

        builder.add_meta_graph_and_variables(sess, ["serve"],
                                             signature_def_map={"predict": sig(served)})
        builder.add_meta_graph(["train"], signature_def_map={"hard": sig(hard)})
        builder.save()
    return [Entry("tf1_builder", path, None, (), ["tf1"])]


BUILDERS: dict[str, Callable[[Path], list[Entry]]] = {
    "ResNet50": lambda root: keras_application("ResNet50", root),
    "MobileNetV2": lambda root: keras_application("MobileNetV2", root),
    "EfficientNetB0": lambda root: keras_application("EfficientNetB0", root),
    "BertBackbone": bert_backbone,
    "multi_head": multi_head,
    "same_named": same_named,
    "shared_function": shared_function,
    "functions": functions,
    "tf1_builder": tf1_two_meta_graphs,
}


def gpt2_backbone(root: Path) -> list[Entry]:
    """A keras-hub GPT-2 backbone, random weights, from a tiny config."""
    import keras_hub

    keras, tf = _keras(), _tf()
    keras.utils.set_random_seed(0)
    model = keras_hub.models.GPT2Backbone(vocabulary_size=40, num_layers=2, num_heads=2,
                                          hidden_dim=16, intermediate_dim=32,
                                          max_sequence_length=8)
    spec = {"token_ids": tf.TensorSpec([1, 6], tf.int32),
            "padding_mask": tf.TensorSpec([1, 6], tf.int32)}
    inputs = {"token_ids": tf.ones((1, 6), tf.int32), "padding_mask": tf.ones((1, 6), tf.int32)}
    return _save_both("GPT2Backbone", root, model, [spec], (inputs,), ["keras-hub"])


def vit_backbone(root: Path) -> list[Entry]:
    """A keras-hub ViT backbone, random weights, from a tiny config."""
    import keras_hub
    import numpy as np

    keras, tf = _keras(), _tf()
    keras.utils.set_random_seed(0)
    model = keras_hub.models.ViTBackbone(image_shape=(32, 32, 3), patch_size=8, num_layers=2,
                                         num_heads=2, hidden_dim=16, mlp_dim=32)
    spec = tf.TensorSpec([1, 32, 32, 3], tf.float32)
    x = tf.constant(np.random.default_rng(0).uniform(0, 1, (1, 32, 32, 3)), tf.float32)
    return _save_both("ViTBackbone", root, model, [spec], (x,), ["keras-hub"])


# more real models for a longer run (python tests/differential.py --only ...): the
# issue's list of models that were wrong before; not in every CI run (minutes each)
EXTRA_BUILDERS: dict[str, Callable[[Path], list[Entry]]] = {
    name: functools.partial(keras_application, name)
    for name in ("DenseNet121", "InceptionV3", "ConvNeXtTiny", "NASNetMobile")
}
EXTRA_BUILDERS.update({"GPT2Backbone": gpt2_backbone, "ViTBackbone": vit_backbone})
# built in a process of their own: keras-hub imports tensorflow-text, whose ops would
# then be registered in the test process (tests compare the registry with a harvest)
OUT_OF_PROCESS = frozenset({"BertBackbone", "GPT2Backbone", "ViTBackbone"})


def build(root: Path, only: list[str] | None = None, in_process: bool = False
          ) -> list[Entry]:
    """Every model of the corpus (or ``only`` these parts) under ``root``; the parts
    in OUT_OF_PROCESS are built by a subprocess (no live object) unless ``in_process``."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    entries: list[Entry] = []
    for name, builder in {**BUILDERS, **EXTRA_BUILDERS}.items():
        if (only is None and name in EXTRA_BUILDERS) or (only is not None and name not in only):
            continue
        if name in OUT_OF_PROCESS and not in_process:
            entries.extend(_built_elsewhere(name, root / name))
        else:
            entries.extend(builder(root))
    return entries


def _built_elsewhere(name: str, root: Path) -> list[Entry]:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, __file__, str(root), name], capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"building {name} failed: {done.stderr[-3000:]}")
    listed = json.loads(done.stdout.strip().splitlines()[-1])
    return [Entry(e["name"], Path(e["path"]), tags=e["tags"]) for e in listed]


if __name__ == "__main__":  # python tests/corpus.py ROOT [PART ...]: build, list as JSON
    import json
    import sys

    built = build(Path(sys.argv[1]), sys.argv[2:] or None, in_process=True)
    print(json.dumps([{"name": e.name, "path": str(e.path), "tags": e.tags} for e in built]))
