"""The static check's verdict for every (output, variable) pair against what
tf.GradientTape returns for the same computation."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from opregistry import check

tf: Any = pytest.importorskip("tensorflow")  # a module: its classes are bases below


def _tape_verdicts(module, x):
    """{(output, variable name): gets a gradient} from eager execution."""
    with tf.GradientTape(persistent=True) as tape:
        outputs = module.compute(x)
    verdicts = {}
    variables = list(module.trainable_variables)
    for name, value in outputs.items():
        # one call per output: py_function's gradient can run only once per forward
        for var, grad in zip(variables, tape.gradient(value, variables)):
            got = grad is not None and bool(np.any(tf.convert_to_tensor(grad).numpy() != 0))
            verdicts[(name, var.name.split(":")[0])] = got
    return verdicts


def _static_verdicts(result, module):
    names = {v.name.split(":")[0] for v in module.trainable_variables}
    verdicts = {}
    for report in result.outputs:
        for name in names:
            verdicts[(report.output, name)] = name in report.with_gradient
    return verdicts


class Mixed(tf.Module):
    """Outputs through argmax, round, a float->int->float cast, and one clean head."""

    def __init__(self):
        super().__init__()
        self.a = tf.Variable([[-0.7, 1.3, 0.4]], name="a")  # argmax 1: a non-zero index
        self.b = tf.Variable([[0.5], [1.5], [-0.8]], name="b")
        self.c = tf.Variable([[2.0]], name="c")
        self.d = tf.Variable([[0.3]], name="d")

    def compute(self, x):
        h = tf.matmul(x, self.a)
        y = tf.matmul(h, self.b)
        index = tf.cast(tf.argmax(h, axis=1), tf.float32)
        as_int = tf.cast(tf.cast(y * 10.0, tf.int32), tf.float32)
        return {
            "clean": tf.reduce_sum(y * self.c),
            "argmax": tf.reduce_sum(index * self.c),
            "rounded": tf.reduce_sum(tf.round(y) * self.c),
            "cast": tf.reduce_sum(as_int) + tf.reduce_sum(self.c),
            "other_head": tf.reduce_sum(self.d * 3.0),
        }

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def serve(self, x):
        return self.compute(x)


class Functions(tf.Module):
    """numpy_function, py_function, a custom gradient and a while loop."""

    def __init__(self):
        super().__init__()
        self.w = tf.Variable(1.5, name="w")
        self.v = tf.Variable(0.7, name="v")
        self.u = tf.Variable(0.9, name="u")
        self.s = tf.Variable(1.1, name="s")
        self._triple = lambda t: t * 3.0  # kept alive: py_function's gradient looks it up

    def compute(self, x):
        @tf.custom_gradient
        def scaled(t):
            return t * 2.0, lambda dy: dy * 2.0

        numpy_out = tf.numpy_function(np.sinh, [x * self.w], tf.float32)
        py_out = tf.py_function(self._triple, [x * self.v], tf.float32)
        _, looped = tf.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * self.s),
                                  [tf.constant(0), x])
        return {
            "numpy": tf.reduce_sum(numpy_out),
            "py": tf.reduce_sum(py_out),
            "custom": tf.reduce_sum(scaled(x * self.u)),
            "loop": tf.reduce_sum(looped),
        }

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def serve(self, x):
        return self.compute(x)


class PartialCustomGradient(tf.Module):
    """A saved custom gradient that gives one of its inputs nothing (zeros): the
    analysis reads the saved gradient function's body to tell."""

    def __init__(self):
        super().__init__()
        self.w = tf.Variable(1.5, name="w")
        self.v = tf.Variable(0.5, name="v")
        self.u = tf.Variable(0.8, name="u")

    def compute(self, x):
        @tf.custom_gradient
        def product(a, b):
            return a * b, lambda dy: (dy * b, tf.zeros_like(b))

        return {"y": product(x * self.w, x + self.v) + self.u * x,
                "direct": self.v * x}

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def serve(self, x):
        return self.compute(x)


class LoopCarried(tf.Module):
    """While loops whose variables feed each other across iterations: c reaches p only
    through q after two iterations (smoothly in one loop, through round in the other)."""

    def __init__(self):
        super().__init__()
        self.a = tf.Variable(1.0, name="a")
        self.b = tf.Variable(0.5, name="b")
        self.c = tf.Variable(0.3, name="c")
        self.d = tf.Variable(0.7, name="d")

    def compute(self, x):
        scale = tf.reduce_sum(x)

        def run(step):
            def body(i, p, q, r):
                return i + 1, p + q, step(r) * scale, r

            start = (0, self.a * 1.0, self.b * 1.0, self.c * 1.0)
            return tf.while_loop(lambda i, *_: i < 3, body, start)[1]

        return {"smooth": tf.reduce_sum(run(lambda r: r * 2.0)),
                "rounded": tf.reduce_sum(run(tf.round)),
                "other": tf.reduce_sum(self.d * x)}

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def serve(self, x):
        return self.compute(x)


class AffineTransform(tf.Module):
    """A learned projective transform of an image, as keras.ops.image.affine_transform
    builds it under TF (ImageProjectiveTransformV3): TF's gradient reaches the image, not
    the transform (its probe once failed, and check let the transform have a gradient)."""

    def __init__(self):
        super().__init__()
        self.image = tf.Variable(tf.reshape(tf.range(16.0), [1, 4, 4, 1]) / 16.0, name="image")
        self.transform = tf.Variable([[1.0, 0.1, 0.3, -0.1, 1.0, 0.2, 0.0, 0.0]],
                                     name="transform")
        self.d = tf.Variable([[0.3]], name="d")

    def compute(self, x):
        warped = tf.raw_ops.ImageProjectiveTransformV3(
            images=self.image * tf.reshape(x, [-1, 1, 1, 1]), transforms=self.transform * 1.0,
            output_shape=[4, 4], fill_value=0.0, interpolation="BILINEAR",
            fill_mode="REFLECT")
        return {"warped": tf.reduce_sum(warped * warped), "other": tf.reduce_sum(self.d * x)}

    @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
    def serve(self, x):
        return self.compute(x)


def _save(module, path, custom_gradients=True):
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=custom_gradients)
    tf.saved_model.save(module, str(path), signatures=module.serve, options=options)
    return path


@pytest.mark.parametrize("make", [Mixed, PartialCustomGradient, LoopCarried, AffineTransform])
def test_static_verdict_matches_gradient_tape(make, tmp_path, harvested_db):
    """Saved models without Python in them: the loaded model differentiates as the live
    one does (models with py_functions: tests/test_check_corpus.py, loaded)."""
    module = make()
    path = _save(module, tmp_path / "model")
    result = check(path, db=harvested_db)
    x = tf.constant([[1.3]])
    assert _static_verdicts(result, module) == _tape_verdicts(module, x)


@pytest.mark.parametrize("make", [Mixed, Functions, PartialCustomGradient, LoopCarried,
                                  AffineTransform])
def test_live_verdict_matches_gradient_tape(make, harvested_db):
    """A live object keeps its Python: numpy_function has no gradient, py_function is
    differentiated through Python, custom gradients are the Python functions."""
    module = make()
    result = check(module.serve, tf.TensorSpec([None, 1], tf.float32), db=harvested_db)
    x = tf.constant([[1.3]])
    assert _static_verdicts(result, module) == _tape_verdicts(module, x)


def test_the_shipped_database_blocks_a_learned_transform_as_tf_does(tmp_path):
    """The shipped facts of ImageProjectiveTransformV3 (probed again, issue 39's stop:
    data/harvest_probe_ops.py): the transform gets no gradient, the image does, both
    from the exported model and live; the finding names the op and why."""
    module = AffineTransform()
    want = _tape_verdicts(module, tf.constant([[1.3]]))
    assert want[("warped", "transform")] is False and want[("warped", "image")] is True
    saved = check(_save(module, tmp_path / "model"))
    assert _static_verdicts(saved, module) == want
    live = check(module.serve, tf.TensorSpec([None, 1], tf.float32))
    assert _static_verdicts(live, module) == want
    (finding,) = saved.to_dict()["findings"]
    assert (finding["output"], finding["target"]) == ("warped", "transform")
    assert [(s["op"], s["reason"]) for s in finding["stops"]] == [
        ("ImageProjectiveTransformV3", "partial_input")]


def test_a_keras_layer_learning_its_transform_exported_as_tf_trains_it(tmp_path):
    """Keras 3's affine_transform (ImageProjectiveTransformV3) with a learned transform,
    model.export: every variable's verdict in both directions is what TF's tape gives
    the model in training mode (the pixels' layer gets a gradient, the transform none)."""
    import keras  # Keras 3, a test dependency (beside tensorflow)

    class Warp(keras.layers.Layer):
        def build(self, shape):
            self.transform = self.add_weight(shape=(1, 8), name="transform",
                                             initializer=keras.initializers.Constant(
                                                 [[1.0, 0.1, 0.3, -0.1, 1.0, 0.2, 0.0, 0.0]]))

        def call(self, x):
            return keras.ops.image.affine_transform(x, self.transform, fill_mode="reflect")

    inputs = keras.Input((4, 4, 1))
    warped = Warp(name="warp")(keras.layers.Dense(1, name="pixel")(inputs))
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(warped))
    x = np.random.RandomState(0).rand(2, 4, 4, 1).astype("float32")
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(model(x, training=True))
    want = {v.path: g is not None and bool(np.any(g.numpy() != 0)) for v, g in
            zip(model.trainable_variables, tape.gradient(y, model.trainable_variables))}
    assert want == {"pixel/kernel": True, "pixel/bias": True, "warp/transform": False}
    model.export(str(tmp_path / "export"), verbose=False)
    result = check(tmp_path / "export")
    for report in result.outputs:
        assert {name: name in report.with_gradient for name in want} == want
    assert {(f.target, tuple(s.op for s in f.stops)) for f in result.findings} == {
        ("warp/transform", ("ImageProjectiveTransformV3",))}


def test_findings_name_every_blocking_op(tmp_path, harvested_db):
    module = Mixed()
    result = check(_save(module, tmp_path / "m"), db=harvested_db)
    by_output: dict[str, set[tuple[str, str]]] = {}
    for finding in result.findings:
        by_output.setdefault(finding.output, set()).update(
            (b.op, b.reason) for b in finding.stops)
    assert ("ArgMax", "none") in by_output["argmax"]
    assert ("Round", "none") in by_output["rounded"]
    assert any(op == "Cast" and reason == "integer_edge" for op, reason in by_output["cast"])
    assert "clean" not in by_output and "other_head" not in by_output
    clean = next(o for o in result.outputs if o.output == "clean")
    assert "d" in clean.unrelated and "d" not in clean.blocked  # not blocked: unrelated
    assert not result.unknown_ops


def test_loop_carried_dependencies_are_followed(tmp_path, harvested_db):
    result = check(_save(LoopCarried(), tmp_path / "loop"), db=harvested_db)
    rounded = next(o for o in result.outputs if o.output == "rounded")
    assert "c" in rounded.blocked and "d" in rounded.unrelated  # blocked, not unrelated
    (finding,) = [f for f in result.findings if f.target == "c"]
    assert {b.op for b in finding.stops} == {"Round"}


def test_custom_gradient_saved_or_not(tmp_path, harvested_db):
    with_grad = check(_save(Functions(), tmp_path / "with"), db=harvested_db)
    without = check(_save(Functions(), tmp_path / "without", custom_gradients=False),
                    db=harvested_db)
    assert not with_grad.unsaved_custom_gradients
    assert without.unsaved_custom_gradients
    partial = check(_save(PartialCustomGradient(), tmp_path / "partial"), db=harvested_db)
    (finding,) = partial.findings
    assert (finding.output, finding.target) == ("y", "v")
    assert [(b.op, b.reason) for b in finding.stops] == [
        ("IdentityN", "custom_gradient_none")]
    # not saved: a loaded model looks the gradient up by its op type and raises, for
    # every output of the signature (tests/test_check_corpus.py asks TF itself)
    unsaved = check(_save(PartialCustomGradient(), tmp_path / "unsaved",
                          custom_gradients=False), db=harvested_db)
    assert unsaved.unsaved_custom_gradients and not unsaved.ok
    assert {b.reason for f in unsaved.findings for b in f.stops} == {
        "custom_gradient_not_saved"}
    assert {(f.output, f.target) for f in unsaved.findings} == {
        ("y", "u"), ("y", "v"), ("y", "w"), ("y", "x"), ("direct", "v"), ("direct", "x")}


def test_cli_check_exit_codes_and_json(tmp_path, harvested_db, cli):
    path = _save(Mixed(), tmp_path / "m")
    done = cli("check", str(path), "--format", "json", "--db", str(harvested_db))
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["release"] and data["findings"]
    finding = data["findings"][0]
    assert {"signature", "output", "target_kind", "target", "stops"} <= set(finding)
    assert {"node", "op", "function", "reason"} <= set(finding["stops"][0])
    clean = cli("check", str(path), "--output", "clean", "--db", str(harvested_db))
    assert clean.returncode == 0, clean.stderr


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage", b"\x0a\xff\xff\xff\xff\x0f"])
def test_corrupt_model_files_are_one_line_exit_2(tmp_path, harvested_db, cli, content):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(content)
    done = cli("check", str(bad), "--db", str(harvested_db))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_truncated_savedmodel(tmp_path, harvested_db, cli):
    path = _save(Mixed(), tmp_path / "m")
    pb = path / "saved_model.pb"
    pb.write_bytes(pb.read_bytes()[: pb.stat().st_size // 2])
    done = cli("check", str(path), "--db", str(harvested_db))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_frozen_graphdef_binary_and_text(tmp_path, harvested_db, suffix):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.constant([[1.0], [2.0], [3.0]])
        y = tf.matmul(x, w)
        tf.identity(tf.reduce_sum(y), name="smooth")
        tf.identity(tf.cast(tf.argmax(y, axis=0), tf.float32), name="stepped")
    path = tmp_path / f"frozen{suffix}"
    if suffix == ".pb":
        path.write_bytes(graph.as_graph_def().SerializeToString())
    else:
        path.write_text(str(graph.as_graph_def()))
    result = check(path, db=harvested_db)
    by_output = {o.output: o for o in result.outputs}
    assert by_output["smooth:0"].with_gradient == ["x"]
    assert by_output["stepped:0"].blocked == ["x"]
    (finding,) = result.findings
    assert {b.op for b in finding.stops} == {"ArgMax"}


def _keras_two_heads():
    keras = tf.keras
    inputs = keras.Input(shape=(4,), name="features")
    hidden = keras.layers.Dense(8, activation="tanh", name="hidden")(inputs)
    score = keras.layers.Dense(1, name="score")(hidden)
    logits = keras.layers.Dense(3, name="logits")(hidden)
    picked = keras.layers.Lambda(
        lambda t: tf.cast(tf.argmax(t, axis=-1), tf.float32)[:, None], name="picked")(logits)
    scaled = keras.layers.Dense(1, name="scaled")(picked)
    return keras.Model(inputs, {"score": score, "scaled": scaled})


def test_live_keras_model_matches_gradient_tape(harvested_db):
    model = _keras_two_heads()
    x = tf.constant([[0.3, -0.2, 0.8, 0.1]])
    result = check(model, db=harvested_db)
    with tf.GradientTape(persistent=True) as tape:
        out = model(x, training=False)
    for report in result.outputs:
        grads = tape.gradient(out[report.output], model.trainable_variables)
        for var, grad in zip(model.trainable_variables, grads):
            # None, not zero: the argmax index that scales "scaled" may be 0 by chance
            assert (var.path in report.with_gradient) == (grad is not None), (
                report.output, var.path)
    scaled = next(o for o in result.outputs if o.output == "scaled")
    assert "hidden/kernel" in scaled.blocked and "scaled/kernel" in scaled.with_gradient
    assert "score/kernel" in scaled.unrelated


@pytest.mark.parametrize("make", [Mixed, Functions, PartialCustomGradient, LoopCarried])
def test_live_tf_function(make, harvested_db):
    # live custom gradients are traced into the library the way export saves them
    module = make()
    result = check(module.serve, tf.TensorSpec([None, 1], tf.float32), db=harvested_db)
    x = tf.constant([[1.3]])
    assert _static_verdicts(result, module) == _tape_verdicts(module, x)


def test_keras_file_through_the_cli(tmp_path, harvested_db, cli):
    keras = tf.keras
    inputs = keras.Input(shape=(3,), name="pixels")
    out = keras.layers.Dense(2, name="dense")(inputs)
    model = keras.Model(inputs, out)
    path = tmp_path / "model.keras"
    model.save(path)
    done = cli("check", str(path), "--format", "json", "--db", str(harvested_db))
    assert done.returncode == 0, done.stderr
    (report,) = json.loads(done.stdout)["outputs"]
    assert sorted(report["with_gradient"]) == ["dense/bias", "dense/kernel", "pixels"]
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    done = cli("check", str(bad), "--db", str(harvested_db))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_no_false_alarms_on_mobilenet_v2(harvested_db):
    model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3),
                                              classes=10)
    result = check(model, db=harvested_db)
    assert not result.findings, result.findings[:3]
    (report,) = result.outputs
    assert len(report.with_gradient) == len(model.trainable_variables) + 1  # and the input


def _transformer_block():
    keras = tf.keras
    x = keras.Input(shape=(8, 16), name="tokens")
    attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)
    h = keras.layers.LayerNormalization()(x + attended)
    f = keras.layers.Dense(16)(keras.layers.Dense(32, activation="gelu")(h))
    return keras.Model(x, keras.layers.LayerNormalization()(h + f))


APPLICATIONS = {
    "ResNet50": lambda: tf.keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3),
                                                       classes=10),
    "EfficientNetB0": lambda: tf.keras.applications.EfficientNetB0(
        weights=None, input_shape=(64, 64, 3), classes=10),
    "transformer": _transformer_block,
}


# the two applications (half a minute of a worker each): CI runs them, the developer tier
# leaves them out
@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.slow] if name != "transformer" else [])
                                  for name in sorted(APPLICATIONS)])
def test_no_false_alarms_on_keras_applications_live_and_saved(name, tmp_path, harvested_db):
    model = APPLICATIONS[name]()
    live = check(model, db=harvested_db)
    assert not live.findings and not live.unsaved_custom_gradients
    path = tmp_path / name
    spec = tf.TensorSpec([1, *model.inputs[0].shape[1:]], model.inputs[0].dtype)
    serve = tf.function(lambda x: {"out": model(x, training=False)}, input_signature=[spec])
    module = tf.Module()
    module.model = model
    tf.saved_model.save(module, str(path), signatures=serve)
    static = check(path, db=harvested_db)
    assert not static.findings, static.findings[:2]
    (report,) = static.outputs
    assert set(report.with_gradient) >= {v.path for v in model.trainable_variables}
    if name == "EfficientNetB0":  # its swish activations are saved custom gradients
        from opregistry.model.readers import savedmodel

        # 49 swish gradients per traced call (the saved model may hold more than one)
        bindings = savedmodel.read(path).gradient_bindings
        assert len(bindings) >= 49 and len(bindings) % 49 == 0
        assert not static.unsaved_custom_gradients


def test_dot_draws_the_subgraph_with_blocking_ops_highlighted(tmp_path, harvested_db, cli):
    path = _save(Mixed(), tmp_path / "m")
    done = cli("check", str(path), "--format", "dot", "--output", "rounded",
               "--db", str(harvested_db))
    assert done.returncode == 1, done.stderr
    dot = done.stdout
    assert dot.startswith("digraph gradient_findings {") and dot.rstrip().endswith("}")
    assert dot.count("subgraph cluster_") == 3  # x, a, b are blocked by Round
    round_lines = [line for line in dot.splitlines() if "\\nRound" in line]
    assert round_lines and all('fillcolor="salmon"' in line for line in round_lines)
    assert 'fillcolor="palegreen"' in dot and 'fillcolor="lightblue"' in dot
    assert dot.count("{") == dot.count("}")


def test_ops_unknown_to_the_database_are_analysed_and_listed(tmp_path, harvested_db, cli):
    """A custom op (as from tensorflow-text) on the path: still analysed, named, and
    reported as where the gradient stops."""
    from opregistry.model.readers import schema

    graph = schema.message_classes()["GraphDef"]()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = schema.DT_FLOAT
    custom = graph.node.add(name="tokenize", op="MyCustomTokenizer", input=["x"])
    custom.attr["T"].type = schema.DT_FLOAT
    relu = graph.node.add(name="relu", op="Relu", input=["x"])
    relu.attr["T"].type = schema.DT_FLOAT
    out = graph.node.add(name="out", op="AddV2", input=["tokenize", "relu"])
    out.attr["T"].type = schema.DT_FLOAT
    path = tmp_path / "custom.pb"
    path.write_bytes(graph.SerializeToString())
    result = check(path, db=harvested_db)
    assert result.unknown_ops == ["MyCustomTokenizer"]
    (report,) = result.outputs
    assert report.with_gradient == ["x"]  # through Relu, even though not through the op
    done = cli("check", str(path), "--db", str(harvested_db))
    assert done.returncode == 0 and "unknown to the database: MyCustomTokenizer" in done.stderr


def _two_meta_graphs(path):
    """A TF1-style SavedModel with a serving and a training MetaGraph (Builder), and
    what tf.gradients says per (tags, target) in the building graph."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default(), tf1.Session() as sess:
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 2], use_resource=True)
        b = tf1.get_variable("b", [2], use_resource=True)
        logits = tf.matmul(x, w) + b
        served = tf.identity(logits, name="served")
        hard = tf.cast(tf.argmax(logits, axis=1), tf.float32, name="hard")
        truth = {}
        for tags, out in (("serve", served), ("train", hard)):
            for name, grad in zip("xwb", tf.gradients(out, [x, w, b])):
                truth[(tags, name)] = grad is not None
        sess.run(tf1.global_variables_initializer())
        builder = tf1.saved_model.Builder(str(path))
        sig = lambda out: tf1.saved_model.signature_def_utils.predict_signature_def(  # noqa: E731
            {"x": x}, {"y": out})
        builder.add_meta_graph_and_variables(sess, ["serve"],
                                             signature_def_map={"predict": sig(served)})
        builder.add_meta_graph(["train"], signature_def_map={"hard": sig(hard)})
        builder.save()
    return truth


def test_every_meta_graph_is_checked_unless_tags_name_one(tmp_path, harvested_db, cli):
    path = tmp_path / "two"
    truth = _two_meta_graphs(path)
    result = check(path, db=harvested_db)
    assert result.meta_graphs == ["serve", "train"]
    static = {}
    for report in result.outputs:
        for name in report.with_gradient:
            static[(report.meta_graph, name)] = True
        for name in report.blocked:
            static[(report.meta_graph, name)] = False
    assert static == truth  # both graphs, every target: as tf.gradients says
    assert {f.meta_graph for f in result.findings} == {"train"}
    assert all({b.op for b in f.stops} == {"ArgMax"} for f in result.findings)

    served_only = check(path, db=harvested_db, tags="serve")
    assert served_only.ok and served_only.meta_graphs == ["serve"]
    done = cli("check", str(path), "--db", str(harvested_db))
    assert done.returncode == 1 and done.stdout.split()[0] == "meta_graph", done.stdout
    assert "of 2 MetaGraphs" in done.stderr
    assert cli("check", str(path), "--tags", "serve", "--db", str(harvested_db)).returncode == 0
    missing = cli("check", str(path), "--tags", "gpu", "--db", str(harvested_db))
    assert missing.returncode == 2 and "found: serve, train" in missing.stderr


def test_h5_files_are_traced_and_lambda_layers_refused(tmp_path, harvested_db, cli):
    keras = tf.keras
    inputs = keras.Input(shape=(3,), name="pixels")
    hidden = keras.layers.Dense(2, activation="relu", name="dense")(inputs)
    keras.Model(inputs, keras.layers.Dense(1, name="head")(hidden)).save(tmp_path / "m.h5")
    result = check(tmp_path / "m.h5", db=harvested_db)
    (report,) = result.outputs
    assert sorted(report.with_gradient) == ["dense/bias", "dense/kernel", "head/bias",
                                            "head/kernel", "pixels"]
    # a Lambda layer is Python code in the file: safe_mode refuses it, one line, exit 2
    rounded = keras.layers.Lambda(lambda t: tf.round(t), name="rounded")(hidden)
    keras.Model(inputs, rounded).save(tmp_path / "lambda.h5")
    done = cli("check", str(tmp_path / "lambda.h5"), "--db", str(harvested_db))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Lambda" in done.stderr and "safe_mode=False" in done.stderr  # not cut short


def test_a_python_function_no_output_uses_still_fails_the_loaded_signature(tmp_path):
    """A numpy_function whose result no output uses still runs with the loaded signature
    (a stateful op: automatic control dependencies), and its callback is not in the
    file, so TF differentiates no output: check blocks every target with
    ``python_function_not_saved`` (random-program differential, seed 52)."""
    import differential

    class Unused(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable([1.0, 2.0])

        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
        def __call__(self, x):
            tf.numpy_function(lambda t: t * 2.0, [x * self.v], tf.float32)
            return {"y": x * self.v}

    module = Unused()
    path = tmp_path / "unused_numpy_function"
    tf.saved_model.save(module, str(path), signatures=module.__call__.get_concrete_function())
    result = check(path)
    done = differential.compare("unused", path, result,
                                differential.answers_in_fresh_process([path])[str(path)])
    assert done.failing_outputs == 1 and not done.disagreements, done.disagreements
    assert {b.reason for f in result.findings for b in f.stops} == \
        {"python_function_not_saved"}
    assert [(o.output, o.blocked) for o in result.outputs] == [("y", ["Variable", "x"])]
