"""gradcheck on SavedModels that used to crash it or get a wrong verdict, each compared
pair by pair with TensorFlow's gradients of the loaded model: a while loop over a
variable, a TF1 graph with an input of unknown rank and a reference variable, and
outputs unrelated to some variables; saved with tf.saved_model.save and exported from
Keras 3 where a Keras form exists."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from opregistry import GradcheckError, check, gradcheck
from opregistry.formats.gradcheck import message
from opregistry.gradcheck.targets import REFERENCE_VARIABLE, load_target, parse_shapes

tf: Any = pytest.importorskip("tensorflow")  # a module: its classes are bases below


class _Loop(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable([1.0, 2.0, 3.0], name="v")

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def __call__(self, x):
        _, total = tf.while_loop(lambda i, t: i < 4, lambda i, t: (i + 1, t + self.v),
                                 [tf.constant(0), x])
        return {"y": total}


class _Two(tf.Module):
    def __init__(self):
        super().__init__()
        self.a = tf.Variable([0.5, -0.3], name="a")
        self.b = tf.Variable([0.2, 0.7], name="b")

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def __call__(self, x):
        return {"y": tf.tanh(x * self.a), "z": tf.tanh(x * self.b)}


def _keras_loop():
    import keras

    class Loop(keras.layers.Layer):
        def build(self, shape):
            self.v = self.add_weight(shape=(3,), initializer="ones", name="v")

        def call(self, x):
            _, total = tf.while_loop(lambda i, t: i < 4, lambda i, t: (i + 1, t + self.v),
                                     [tf.constant(0), x])
            return total

    x = keras.Input(batch_shape=(1, 3), name="x")
    return keras.Model(x, {"y": Loop(name="loop")(x)})


def _keras_two():
    import keras

    class Scale(keras.layers.Layer):
        def build(self, shape):  # named as the tf.Module's: a, b
            self.w = self.add_weight(shape=(2,), initializer="ones", name=self.name)

        def call(self, x):
            return tf.tanh(x * self.w)

    x = keras.Input(batch_shape=(1, 2), name="x")
    return keras.Model(x, {"y": Scale(name="a")(x), "z": Scale(name="b")(x)})


def _save(tmp_path, name, how):
    path = tmp_path / f"{name}-{how}"
    if how == "saved":
        classes: dict[str, Callable[[], Any]] = {"loop": _Loop, "two": _Two}
        module = classes[name]()
        tf.saved_model.save(module, str(path), signatures=module.__call__)
    else:
        {"loop": _keras_loop, "two": _keras_two}[name]().export(str(path), verbose=False)
    return path


def _tensorflow(path):
    """{(output, target): TF gives a non-zero gradient}, with a tape around the loaded
    signature (targets named by their last path part)."""
    loaded = tf.saved_model.load(str(path))
    fn = loaded.signatures["serving_default"]
    _, specs = fn.structured_input_signature
    x = {k: tf.random.stateless_normal([d or 1 for d in s.shape], (1, 2))
         for k, s in specs.items()}
    variables = list(fn.trainable_variables)
    names = [v.name.split(":")[0].rsplit("/", 1)[-1] for v in variables]
    truth = {}
    for output in ("y", "z"):
        with tf.GradientTape() as tape:
            tape.watch(list(x.values()))
            out = fn(**x)
        if output not in out:
            continue
        grads = tape.gradient(out[output], list(x.values()) + variables)
        for name, g in zip(list(x) + names, grads):
            truth[(output, name)] = g is not None and bool(tf.reduce_any(g != 0))
    return truth


def _verdicts(path, db):
    fn, inputs, name = load_target(str(path))
    result = gradcheck(fn, *inputs, source=name, db=db)
    return result, {(c.output, c.target.rsplit("/", 1)[-1]): c.verdict for c in result.checks}


@pytest.mark.parametrize("how", ["saved", "export"])
def test_a_while_loop_over_a_variable_is_checked_like_tensorflow_differentiates_it(
        how, tmp_path, harvested_db):
    path = _save(tmp_path, "loop", how)
    truth = _tensorflow(path)
    result, verdicts = _verdicts(path, harvested_db)
    assert truth and all(truth.values())  # [1, 1, 1] and [4, 4, 4]
    assert verdicts == {pair: "ok" for pair in truth}
    if how == "saved":  # TF's numbers, not only the verdict
        (v,) = [c for c in result.checks if c.target == "v"]
        assert v.analytic == pytest.approx(4.0)


@pytest.mark.parametrize("how", ["saved", "export"])
def test_outputs_that_do_not_use_a_variable_are_unrelated_as_check_says(how, tmp_path,
                                                                        harvested_db):
    path = _save(tmp_path, "two", how)
    truth = _tensorflow(path)
    _, verdicts = _verdicts(path, harvested_db)
    static = {}
    for report in check(str(path), db=harvested_db).outputs:
        if report.signature == "serving_default":
            static.update({(report.output, n.rsplit("/", 1)[-1]): "unrelated"
                           for n in report.unrelated})
            static.update({(report.output, n.rsplit("/", 1)[-1]): "ok"
                           for n in report.with_gradient})
    assert len(truth) >= 6 and sum(not g for g in truth.values()) >= 2
    for pair, gets in truth.items():
        assert verdicts[pair] == ("ok" if gets else "unrelated") == static[pair], pair


def _tf1(path, resource_too=False):
    """A TF1 SavedModel as tf2onnx's regression test model is: an input placeholder of
    unknown rank, and a reference variable (VariableV2); TF's gradients in the session
    graph."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape=None, name="x")
        w = tf.compat.v1.Variable(2.0, name="w", use_resource=False)
        y = x * w + 1.0
        if resource_too:  # state the rebuilt graph cannot hold: checked as loaded
            y = y * tf.compat.v1.Variable(3.0, name="r", use_resource=True)
        y = tf.identity(y, name="y")
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            value = tf.ones([2, 3])
            grads = tf.compat.v1.gradients(tf.reduce_sum(tf.identity(y)), [x, w])
            truth = session.run(grads, {x: session.run(value)})
            tf.compat.v1.saved_model.simple_save(session, str(path), {"x": x}, {"y": y})
    return truth


def test_an_input_of_unknown_rank_needs_a_shape_and_says_how(tmp_path, cli, harvested_db):
    path = str(tmp_path / "tf1")
    dx, dw = _tf1(path)
    assert dw == 6.0 and (dx == 2.0).all()  # TF: both get a gradient
    done = cli("gradcheck", path, "--db", str(harvested_db))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == \
        "Error: input 'x' has unknown rank: give its shape, e.g. --shape x=2,3"
    done = cli("gradcheck", path, "--shape", "x=2,3", "--format", "json", "--db",
               str(harvested_db))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    # the reference variable check lists is checked too, as TF differentiates it
    assert [t.name for t in check(path, db=harvested_db).targets if t.kind == "variable"] \
        == ["w"]
    assert [(c["target"], c["verdict"]) for c in data["checks"]] == [("x", "ok"), ("w", "ok")]
    assert data["not_checked"] == {}
    done = cli("gradcheck", path, "--shape", "x=2,a", "--db", str(harvested_db))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == \
        "Error: --shape 'x=2,a': expected INPUT=DIMS, e.g. x=2,3 (x= for a scalar)"
    with pytest.raises(GradcheckError, match=r"^no input q to give a shape \(inputs: x\)$"):
        load_target(path, shapes={"q": (2,)})
    with pytest.raises(GradcheckError, match="10,000,000,000 elements, more than"):
        parse_shapes(["x=100000,100000"])  # refused before anything is allocated
    with pytest.raises(GradcheckError, match="returns its own inputs"):
        load_target("build.py:build", shapes={"x": (1,)})


def test_a_reference_variable_that_cannot_be_checked_is_reported_with_why(tmp_path,
                                                                          harvested_db):
    path = str(tmp_path / "tf1")
    _tf1(path, resource_too=True)
    fn, inputs, name = load_target(path, shapes={"x": (2,)})
    result = gradcheck(fn, *inputs, source=name, db=harvested_db)
    assert {c.target for c in result.checks} >= {"x"} and "w" not in {
        c.target for c in result.checks}
    (why,) = result.not_checked.values()
    assert list(result.not_checked) == ["w"] and why.startswith(REFERENCE_VARIABLE)
    assert "could not be rebuilt with them: its graph holds other state (VarHandleOp" in why
    assert "not checked: variable 'w'" in message(result)
