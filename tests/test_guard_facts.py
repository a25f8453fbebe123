"""The guard reports a target only by fact: the gradient TF returned for that very call
is None, or identically zero (and then the analysis says where it stops). A gradient
with exact zeros in places (ReLU, maximum, masks) beside a blocked path is not a
finding. Every target of every program, eager and traced, Keras 3 included."""
from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import opregistry
from tests.guard_helpers import no_guard_left_behind  # noqa: F401 (fixture)


def _fact(gradient) -> str:
    if gradient is None:
        return "none"
    return "nonzero" if np.any(tf.convert_to_tensor(gradient).numpy() != 0) else "zero"


def _check_against_tf(step, names, compiled, zero_explained=()):
    """Run ``step`` (eagerly or as a tf.function) under a guard; every target's report
    against the gradient TF returned: None reported, all zeros reported when the
    analysis explains it (``zero_explained``), anything else never."""
    run = tf.function(step) if compiled else step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with opregistry.guard(summary=False) as guard:
            grads = run()
    facts = {name: _fact(g) for name, g in zip(names, grads)}
    lost = {x.target.split("'")[1]: x for x in guard.lost}
    expected = {n for n, f in facts.items() if f == "none" or
                (f == "zero" and n in zero_explained)}
    assert set(lost) == expected, (facts, {n: x.kind for n, x in lost.items()})
    for name, x in lost.items():
        assert (x.kind == "zero") == (facts[name] == "zero"), (name, x.kind, facts)
    return facts, lost


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("live", ["maximum", "relu"])
def test_a_partially_zero_gradient_beside_a_blocked_path_is_not_zero(compiled, live):
    v = tf.Variable([[0.3, -0.2, 0.9]], name="v")
    w = tf.Variable([[0.5, 0.1, -0.4]], name="w")
    only_round = tf.Variable([[1.2, 0.4, -0.7]], name="only_round")
    signed = tf.Variable([[1.0, -3.0, 2.0]], name="signed")

    def step():
        with tf.GradientTape() as tape:
            other = tf.maximum(v, w) if live == "maximum" else tf.nn.relu(v)
            loss = tf.reduce_sum(tf.round(v * 3.0) + other) + \
                tf.reduce_sum(tf.round(only_round)) + tf.reduce_sum(tf.sign(signed))
        return tape.gradient(loss, [v, w, only_round, signed])

    facts, lost = _check_against_tf(step, ["v", "w", "only_round", "signed"], compiled,
                                    zero_explained={"signed"})
    # TF: [0, 0, 1] (maximum) or [1, 0, 1] (relu) for v: zeros in places, not all
    assert facts["v"] == "nonzero" and "v" not in lost
    assert facts["only_round"] == "none" and lost["only_round"].kind == "none"
    assert [s.op for s in lost["only_round"].stops] == ["Round"]
    assert facts["signed"] == "zero" and [s.op for s in lost["signed"].stops] == ["Sign"]
    assert facts["w"] == ("nonzero" if live == "maximum" else "none")
    if live == "relu":
        assert lost["w"].kind == "unrelated"  # not used at all: eager and traced alike


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_all_zeros_without_a_blocking_op_is_not_reported(compiled):
    dead = tf.Variable([[-1.0, -2.0]], name="dead_relu")  # ReLU of negatives: zeros

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.relu(dead))
        return tape.gradient(loss, [dead])

    facts, lost = _check_against_tf(step, ["dead_relu"], compiled)
    assert facts == {"dead_relu": "zero"} and lost == {}  # it trains when inputs change


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_keras_model_with_relu_and_a_rounded_head(compiled):
    keras.utils.set_random_seed(3)
    inp = keras.Input((4,))
    dead_units = keras.initializers.Constant([-50.0, 0, 0, -50.0, 0, 0])  # ReLU: 0 there
    hidden = keras.layers.Dense(6, activation="relu", name="hidden",
                                bias_initializer=dead_units)(inp)
    model = keras.Model(inp, keras.layers.Dense(2, name="head")(hidden))
    rounding = keras.Variable(np.ones((2,), "float32"), name="rounding")
    x = tf.constant(np.random.default_rng(3).normal(size=(5, 4)).astype("float32"))
    targets = model.trainable_variables + [rounding]

    def step():
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(tf.round(out * 2.0)) + tf.reduce_mean(out) + \
                tf.reduce_sum(tf.round(rounding.value))
        return tape.gradient(loss, targets)

    names = [v.path for v in targets]
    facts, lost = _check_against_tf(step, names, compiled)
    assert facts["rounding"] == "none" and list(lost) == ["rounding"]
    hidden_kernel = tf.convert_to_tensor(step()[0]).numpy()
    assert (hidden_kernel == 0).any() and (hidden_kernel != 0).any()  # ReLU: in places


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_a_variable_passed_straight_to_an_op_is_on_the_eager_record(compiled):
    """``tf.maximum(v, w)`` reads ``v`` in TF's C fast path, unseen by the op
    callback, while ``tf.sign(v)`` is seen: the record must still have both paths, so
    all zeros here (v < w everywhere) come from a live op, as traced: not a finding."""
    v = tf.Variable([[0.1, -0.2, 0.3]], name="under")
    w = tf.Variable([[0.5, 0.1, 0.4]], name="over")

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.sign(v) + tf.maximum(v, w))
        return tape.gradient(loss, [v, w])

    facts, lost = _check_against_tf(step, ["under", "over"], compiled)
    assert facts == {"under": "zero", "over": "nonzero"} and lost == {}


@tf.custom_gradient
def _zeros_of_upstream(t):
    # zeros_like(dy): traced for an upstream of unknown shape this is a ZerosLike that
    # reads dy, though nothing of dy's values reaches the input
    return tf.identity(t), lambda dy: tf.zeros_like(dy)


@tf.custom_gradient
def _half_of_upstream(t):
    return tf.identity(t), lambda dy: dy * 0.5


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_a_custom_gradient_of_zeros_like_the_upstream_is_identically_zero(compiled):
    """Zeros by fact (the custom gradient ignores dy's values), reported in that very
    call eagerly as traced; a custom gradient that scales dy, and a gradient with exact
    zeros in places beside it (maximum), are not."""
    direct = tf.Variable([[0.3, -0.2, 0.9]], name="direct")
    read = tf.Variable([[1.2, 0.4, -0.7]], name="read")
    halved = tf.Variable([[0.5, 0.1, -0.4]], name="halved")
    w = tf.Variable([[0.6, -0.3, 0.2]], name="w")

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_zeros_of_upstream(direct) * w) + \
                tf.reduce_sum(_zeros_of_upstream(read * 1.0)) + \
                tf.reduce_sum(_half_of_upstream(halved) + tf.maximum(direct, w))
        return tape.gradient(loss, [direct, read, halved, w])

    facts, lost = _check_against_tf(step, ["direct", "read", "halved", "w"], compiled,
                                    zero_explained={"read"})
    assert facts == {"direct": "nonzero", "read": "zero", "halved": "nonzero",
                     "w": "nonzero"}
    assert lost["read"].kind == "zero"
    assert [(s.op, s.reason) for s in lost["read"].stops] == [
        ("IdentityN", "custom_gradient_none")]
