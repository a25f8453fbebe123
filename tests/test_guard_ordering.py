"""A tape opened after part of the forward pass (keras-io's GauGAN computes the
encoder's ``mean, variance`` before the generator's tape): TF gives the encoder's
variables None. Traced, the guard names the tensors the loss read that the tape never
recorded, with the lines that computed them; eagerly, it says what it cannot see."""
from __future__ import annotations

import warnings

import keras
import pytest
import tensorflow as tf

import opregistry
from tests.guard_helpers import line_of, no_guard_left_behind, site  # noqa: F401


def _models():
    keras.utils.set_random_seed(7)
    encoder = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="enc")],
                               name="encoder")
    generator = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="gen")],
                                 name="generator")
    return encoder, generator


def _step(encoder, generator, x):
    mean = encoder(x)  # before the tape
    noise = tf.random.stateless_normal(tf.shape(mean), seed=[1, 2])
    with tf.GradientTape() as tape:
        with tape.stop_recording():
            scale = tf.exp(generator.trainable_variables[1] * 0.0)  # paused
        latent = mean + noise * tf.reduce_mean(scale)
        loss = tf.reduce_mean(generator(latent)) + \
            tf.reduce_mean(encoder(x) * 0.0)  # a path the tape records: not this one
    targets = encoder.trainable_variables + generator.trainable_variables
    return tape.gradient(loss, targets)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_a_tape_opened_after_part_of_the_forward_pass(compiled):
    encoder, generator = _models()
    x = tf.ones((2, 3))
    targets = encoder.trainable_variables + generator.trainable_variables
    names = [v.path for v in targets]
    run = tf.function(_step) if compiled else _step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with opregistry.guard(summary=False) as guard:
            grads = run(encoder, generator, x)
    facts = {n: "none" if g is None else "nonzero" if tf.reduce_any(g != 0) else "zero"
             for n, g in zip(names, grads)}
    # TF: the encoder's path through `mean` was never recorded; the recorded path
    # times zero gives zeros, not None
    assert facts == {"encoder/enc/kernel": "zero", "encoder/enc/bias": "zero",
                     "generator/gen/kernel": "nonzero", "generator/gen/bias": "nonzero"}
    assert guard.lost == []  # zeros by a live Mul: not a finding
    # without the recorded path, TF gives None: the guard says why
    encoder, generator = _models()

    def only_outside(encoder, generator, x):
        mean = encoder(x)  # outside
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(generator(mean * 2.0))
        return tape.gradient(loss, encoder.trainable_variables +
                             generator.trainable_variables)

    run = tf.function(only_outside) if compiled else only_outside
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(summary=False) as guard:
            grads = run(encoder, generator, x)
    none = [n for n, g in zip(names, grads) if g is None]
    assert none == ["encoder/enc/kernel", "encoder/enc/bias"]
    lost = {x.target.split("'")[1]: x for x in guard.lost}
    assert sorted(lost) == sorted(none)  # exactly TF's None, nothing else
    for x_ in lost.values():
        if compiled:
            assert x_.kind == "none"
            (stop,) = x_.stops
            assert stop.reason == "outside_tape" and stop.op == "BiasAdd"
            assert site(stop) == line_of(only_outside, "outside")
            assert "no op of the recorded graph explains it" not in x_.message()
            assert "computed while the tape was not recording" in x_.message()
        else:
            assert x_.kind == "unrelated" and x_.stops == ()
            assert "the loss does not depend on it" not in x_.message()
            assert "computed before the tape was entered" in x_.message()
    assert len([w for w in caught if issubclass(w.category,
                                                opregistry.NonDifferentiableWarning)]) == 2


def test_stop_recording_in_a_traced_step_is_outside_the_tape():
    v = tf.Variable([0.5, 1.5], name="paused_var")

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            with tape.stop_recording():
                frozen = v * 3.0  # paused
            loss = tf.reduce_sum(frozen * frozen)
        return tape.gradient(loss, [v])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with opregistry.guard(summary=False) as guard:
            (grad,) = step()
    assert grad is None
    (lost,) = guard.lost
    (stop,) = lost.stops
    assert (lost.kind, stop.reason, stop.op) == ("none", "outside_tape", "Mul")
    assert site(stop) == line_of(step.python_function, "paused")
