"""StopGradients that are idioms are not partial paths (``opregistry.model.idioms``), and
TensorFlow decides which are: each construct is built with the stop and with the stop
replaced by an identity, and TF's gradients of the two are compared.

* neutral: the gradient is the same with and without the stop (tf.nn.moments);
* straight-through: without the stop TF gives no gradient (or zero), with it a finite,
  non-zero one (``b + stop_gradient(a - b)``);
* a stop: without it TF gives a different, non-zero gradient: a real partial path.

One SavedModel holds every construct as a signature, checked with ``check --strict``
(the CLI, as users run it) and with the library."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

X = np.array([[0.3, 1.7, -2.4, 3.6], [2.2, -0.6, 0.9, -1.3]], np.float32)
W = np.array([0.8, -1.1, 0.5, 1.4], np.float32)
Stop = Callable[[Any], Any]


def _moments(h: Any, stop: Stop) -> Any:  # tf.nn.moments' own graph, stop replaceable
    mean = tf.reduce_mean(h, [-1], keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(h, stop(mean)), [-1], keepdims=True)
    return tf.reduce_sum((h - mean) * tf.math.rsqrt(variance + 1e-3) * W)


def _moments_other_axes(h: Any, stop: Stop) -> Any:  # the mean over other axes: not neutral
    mean = tf.reduce_mean(h, [0], keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(h, stop(mean)), [-1], keepdims=True)
    return tf.reduce_sum(variance * [[1.0], [3.0]])  # rows weighted unequally


def _ste_round(h: Any, stop: Stop) -> Any:
    return tf.reduce_sum((h + stop(tf.round(h) - h)) * W)


def _ste_one_hot(h: Any, stop: Stop) -> Any:
    soft = tf.nn.softmax(h, axis=-1)
    hard = tf.one_hot(tf.argmax(h, axis=-1), 4, dtype=h.dtype)
    return tf.reduce_sum((stop(hard - soft) + soft) * W)  # the add-back in either order


def _ste_not_added_back(h: Any, stop: Stop) -> Any:  # the stopped difference is scaled
    return tf.reduce_sum((h + 2.0 * stop(tf.round(h) - h)) * W)


def _plain_stop(h: Any, stop: Stop) -> Any:
    return tf.reduce_sum((h + stop(h) * h) * W)


def _target_stop(h: Any, stop: Stop) -> Any:  # a loss target: an intentional stop
    return tf.reduce_sum(tf.square(h - stop(tf.reduce_mean(h, 0, keepdims=True) * 2.0)))


CASES: dict[str, tuple[Callable[[Any, Stop], Any], str]] = {
    "moments": (_moments, "neutral"),
    "keras_moments": (lambda h, stop: tf.reduce_sum(
        tf.nn.moments(h, [-1], keepdims=True)[1] * W), "neutral"),
    "ste_round": (_ste_round, "straight-through"),
    "ste_one_hot": (_ste_one_hot, "straight-through"),
    "moments_other_axes": (_moments_other_axes, "stop"),
    "ste_not_added_back": (_ste_not_added_back, "stop"),
    "plain_stop": (_plain_stop, "stop"),
    "target_stop": (_target_stop, "stop"),
}


def _gradient(case: str, stop: Stop) -> np.ndarray | None:
    fn, _ = CASES[case]
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = fn(x, stop)
    grad = tape.gradient(loss, x)
    return None if grad is None else grad.numpy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_tensorflow_decides_what_each_stop_is(case: str) -> None:
    """The label of each construct is what TF's gradients say, not what we expect."""
    with_stop = _gradient(case, tf.stop_gradient)
    without = _gradient(case, tf.identity)
    _, kind = CASES[case]
    assert with_stop is not None and np.isfinite(with_stop).all() and np.any(with_stop)
    if case == "keras_moments":  # tf.nn.moments' stop cannot be removed: same as moments
        return
    same = without is not None and np.allclose(with_stop, without, rtol=1e-5, atol=1e-5)
    if kind == "neutral":
        assert same, (with_stop, without)
    elif kind == "straight-through":
        assert without is None or not np.any(without), without
    else:
        assert not same and without is not None and np.any(without), (with_stop, without)


class _Module(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(np.ones(4, np.float32))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module = _Module()
    signatures = {}
    for case, (fn, _) in CASES.items():
        def serve(x: Any, fn: Any = fn) -> Any:
            return {"loss": fn(x * module.w, tf.stop_gradient)}
        signatures[case] = tf.function(serve).get_concrete_function(
            tf.TensorSpec(X.shape, tf.float32))
    path = tmp_path_factory.mktemp("idioms") / "model"
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path


def test_check_reports_only_the_real_stops(saved: Path, harvested_db: Path) -> None:
    from opregistry import check

    result = check(str(saved), db=harvested_db)
    assert not result.findings
    reported = {p.signature for p in result.partial_paths
                if {b.op for b in p.ops} == {"StopGradient"}}
    assert reported == {case for case, (_, kind) in CASES.items() if kind == "stop"}


def test_check_strict_is_clean_on_the_idioms_and_never_says_remove_them(
        saved: Path, harvested_db: Path, tmp_path: Path) -> None:
    """The remedies' own straight-through form gets no ``fix:`` line telling the user to
    remove its stop (which would give TF's gradient of round again: none)."""
    module = _Module()
    idioms = {case: fn for case, (fn, kind) in CASES.items() if kind != "stop"}
    signatures = {case: tf.function(lambda x, fn=fn: {"loss": fn(x * module.w, tf.stop_gradient)}
                                    ).get_concrete_function(tf.TensorSpec(X.shape, tf.float32))
                  for case, fn in idioms.items()}
    path = tmp_path / "idioms"
    tf.saved_model.save(module, str(path), signatures=signatures)
    done = subprocess.run([sys.executable, "-m", "opregistry", "check", str(path), "--strict",
                           "--db", str(harvested_db)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fix:" not in done.stdout and "stop_gradient" not in done.stdout
    done = subprocess.run([sys.executable, "-m", "opregistry", "check", str(saved), "--strict",
                           "-f", "json", "--db", str(harvested_db)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert {p["signature"] for p in data["partial_paths"]} == {
        case for case, (_, kind) in CASES.items() if kind == "stop"}


def test_keras_layer_normalization_has_no_partial_path(tmp_path: Path,
                                                        harvested_db: Path) -> None:
    """Keras 3's LayerNormalization (every ConvNeXt block has one) computes its variance
    with tf.nn.moments: exported both ways, ``check`` reports no partial path."""
    import keras

    from opregistry import check

    inputs = keras.Input((6, 4))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.LayerNormalization()(
        keras.layers.Dense(4)(inputs))))
    model.export(str(tmp_path / "export"), verbose=False)
    tf.saved_model.save(model, str(tmp_path / "saved"), signatures=tf.function(
        lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([1, 6, 4], tf.float32)))
    for name in ("export", "saved"):
        result = check(str(tmp_path / name), db=harvested_db)
        assert not result.findings and not result.partial_paths, name
        assert any(o.with_gradient for o in result.outputs)
