"""Second-order terms zero by construction (opregistry/model/zero_terms.py), masked by a
maximum (masked_terms.py) and dropped in one branch of a cond only (branches.py), TensorFlow
deciding: nested tapes against float64 central finite differences at the point, and
``check --order 2`` on the SavedModel (whose functions carry the shapes the batch
normalisation rule reads).

A sum of batch-normalised values over the normalised axes is constant: its gradient is
zero, so tf.nn.moments' StopGradient drops nothing (TF and finite differences: zero);
the same with a nonlinearity before the sum, a sum over other axes or a mean over a
subset of them is not constant, and the stop drops a term (the rule must not apply).
Cost: about 12 s of CPU (fourteen small SavedModels)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import opregistry

SHAPE = (1, 4, 4, 2)
WEIGHTS = tf.constant(np.arange(16.0).reshape(1, 4, 4), tf.float64)  # not uniform


def _tensorflow(f: Any, x: Any, step: float, rtol: float) -> str:
    """TF's verdict for d/dx <df/dx, d> along d: dropped (the tape differs from
    central finite differences of the first gradient), zero (both zero) or exact."""
    d = tf.constant(np.random.default_rng(7).normal(size=SHAPE))

    def q(xv: Any) -> Any:
        with tf.GradientTape() as inner:
            inner.watch(xv)
            y = f(xv)
        return tf.reduce_sum(inner.gradient(y, xv) * d)

    with tf.GradientTape() as outer:
        outer.watch(x)
        value = q(x)
    g = outer.gradient(value, x)
    tape = 0.0 if g is None else float(tf.reduce_sum(g * d))
    numeric = float(q(x + step * d) - q(x - step * d)) / (2 * step)
    if abs(tape - numeric) > rtol * max(1.0, abs(numeric)):
        return "dropped"
    return "zero" if max(abs(tape), abs(numeric)) < 1e-6 else "exact"


def _check(f: Any, tmp_path: Path) -> Any:
    module = tf.Module()
    module.f = tf.function(f, input_signature=[tf.TensorSpec(SHAPE, tf.float64)])
    tf.saved_model.save(module, str(tmp_path / "m"), signatures=module.f.get_concrete_function())
    return opregistry.check(tmp_path / "m", order=2)


def _normalised(xv: Any, axes: list[int]) -> Any:
    return tf.nn.batch_normalization(xv, *tf.nn.moments(xv, axes), offset=None, scale=None,
                                     variance_epsilon=1e-3)


READOUTS = {
    # the sum over (a superset of) the normalised axes: constant
    "sum": lambda t, xv: tf.reduce_sum(t),
    "mean": lambda t, xv: tf.reduce_mean(t * 3.0),
    "sum_and_cube": lambda t, xv: tf.reduce_sum(-t) + tf.reduce_sum(xv * xv * xv),
    # not constant: the rule must not apply
    "tanh_first": lambda t, xv: tf.reduce_sum(tf.tanh(t)),
    "other_axes": lambda t, xv: tf.reduce_sum(tf.reduce_sum(t, axis=-1) * WEIGHTS),
    "mean_over_a_subset": lambda t, xv: tf.reduce_sum(
        tf.reduce_mean(t, axis=1) * WEIGHTS[:, 0, :, None]),
    "weighted": lambda t, xv: tf.reduce_sum(t * WEIGHTS[..., None]),
}


@pytest.mark.parametrize("readout", list(READOUTS))
def test_a_constant_sum_of_batch_normalised_values_drops_nothing(readout, tmp_path):
    """tf.nn.moments over [0, 1, 2], batch normalisation, then each readout: check's
    verdict for the input is TF's (zero, exact or dropped)."""
    x = tf.constant(np.random.default_rng(3).normal(size=SHAPE))

    def f(xv: Any) -> Any:
        return READOUTS[readout](_normalised(xv, [0, 1, 2]), xv)

    theirs = _tensorflow(f, x, 1e-5, 1e-6)
    assert theirs == {"sum": "zero", "mean": "zero", "sum_and_cube": "exact"}.get(
        readout, "dropped")
    [verdict] = _check(f, tmp_path).outputs[0].second_order.values()
    assert verdict == theirs


def test_a_difference_of_a_value_with_itself_makes_no_term(tmp_path):
    """``t - t`` with t a bilinear resize: the resize's gradient op (registered with no
    gradient) gets exactly zero, so nothing is dropped; x's cube keeps the pair exact."""
    x = tf.constant(np.random.default_rng(4).normal(size=SHAPE))

    def f(xv: Any) -> Any:
        t = tf.cast(tf.image.resize(xv, [6, 6]), tf.float64)
        return tf.reduce_sum(tf.tanh(t - t)) + tf.reduce_sum(xv * xv * xv)

    assert _tensorflow(f, x, 1e-5, 1e-6) == "exact"
    result = _check(f, tmp_path)
    assert result.outputs[0].second_order == {"xv": "exact"} and not result.second_order


def test_a_term_dropped_in_one_branch_of_a_cond_names_the_branch(tmp_path):
    """tf.cond on the input: its ``then`` branch (a bilinear resize under a tanh) drops a
    term, its ``else`` branch (a square) drops none. TF drops it where the input runs
    ``then`` and is exact where it runs ``else``; check says ``dropped`` naming the
    branch."""
    rng = np.random.default_rng(5)

    def f(xv: Any) -> Any:
        return tf.reduce_sum(tf.cond(
            tf.reduce_sum(xv) > 0.0,
            lambda: tf.tanh(tf.cast(tf.image.resize(xv, [6, 6]), tf.float64)[:, 1:5, 1:5, :]),
            lambda: xv * xv))

    point = rng.normal(size=SHAPE)
    for sign, theirs in ((1.0, "dropped"), (-1.0, "exact")):
        x = tf.constant(sign * np.sign(point.sum()) * point)
        assert _tensorflow(f, x, 1e-3, 1e-3) == theirs
    result = _check(f, tmp_path)
    assert result.outputs[0].second_order == {"xv": "dropped"}
    [finding] = result.second_order
    assert finding.branch.endswith(":then")
    assert {b.gradient_op for b in finding.stops} == {"ResizeBilinearGrad"}


def test_an_op_off_the_outputs_path_keeps_nothing_for_it(tmp_path):
    """Two outputs of one input: ``cube`` (exact) and a batch normalisation's (which
    drops through tf.nn.moments' StopGradient). The moments read the input, but the
    cube's gradient never reaches them: its pair is exact, not dropped (seed 40)."""
    x = tf.constant(np.random.default_rng(6).normal(size=SHAPE))

    def cube(xv: Any) -> Any:
        return tf.reduce_sum(xv * xv * xv)

    assert _tensorflow(cube, x, 1e-5, 1e-6) == "exact"

    def f(xv: Any) -> Any:
        return {"cube": cube(xv), "normalised": tf.reduce_sum(tf.tanh(_normalised(xv, [0, 1, 2])))}

    verdicts = {o.output: o.second_order for o in _check(f, tmp_path).outputs}
    assert verdicts == {"cube": {"xv": "exact"}, "normalised": {"xv": "dropped"}}


MASKED = {
    # position by position after the maximum: v changes nothing reaching the resize
    "square": (lambda m, r: tf.reduce_sum(m * m), "exact"),
    "tanh_times_input": (lambda m, r: tf.reduce_sum(tf.tanh(m) * m), "exact"),
    # the rule must not apply: positions mixed after it, or the resize reaching the
    # output beside the maximum (its product with the maximum's value)
    "pooled": (lambda m, r: tf.reduce_sum(tf.square(tf.nn.avg_pool2d(m, 2, 1, "SAME"))),
               "dropped"),
    "beside": (lambda m, r: tf.reduce_sum(m * r), "dropped"),
}


@pytest.mark.parametrize("readout", list(MASKED))
def test_a_maximum_masks_its_other_inputs_term(readout, tmp_path):
    """``max(resize(x), v)`` then each readout: the second pass's term in v through the
    resize (ResizeBilinearGrad, registered with no gradient) is dropped only where the
    maximum's value reaches the resize's gradient at other positions or beside it
    (seeds 186, 248). d/dv of <df/dx, d> along u: the tape against central finite
    differences moving v; check's verdict for v is TF's."""
    rng = np.random.default_rng(8)
    x, d, u = (tf.constant(rng.normal(size=SHAPE)) for _ in range(3))
    v = tf.Variable(rng.normal(size=SHAPE), name="v")
    read, theirs = MASKED[readout]

    def f(xv: Any) -> Any:
        r = tf.cast(tf.image.resize(xv, [6, 6]), tf.float64)[:, 1:5, 1:5, :]
        return read(tf.maximum(r, v), r)

    def q() -> Any:
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        return tf.reduce_sum(inner.gradient(y, x) * d)

    with tf.GradientTape() as outer:
        value = q()
    g = outer.gradient(value, v)
    tape = 0.0 if g is None else float(tf.reduce_sum(g * u))
    base, step = v.numpy(), 1e-4
    v.assign(base + step * u.numpy())
    up = float(q())
    v.assign(base - step * u.numpy())
    numeric = (up - float(q())) / (2 * step)
    v.assign(base)
    assert ("dropped" if abs(tape - numeric) > 1e-3 * max(1.0, abs(numeric)) else "exact") \
        == theirs, (tape, numeric)
    module = tf.Module()
    module.v = v
    module.f = tf.function(f, input_signature=[tf.TensorSpec(SHAPE, tf.float64)])
    tf.saved_model.save(module, str(tmp_path / "m"), signatures=module.f.get_concrete_function())
    [output] = opregistry.check(tmp_path / "m", order=2).outputs
    assert output.second_order["v"] == theirs
