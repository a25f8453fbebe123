"""Second order for whole models, TensorFlow deciding: the gradient penalty of a critic
``D(x) = sum(tanh(resize(conv2d(x, w))))``, ``P = ||dD/dx||²``. ``check --order 2``
(live and SavedModel), the guard on nested tapes (eager and traced, a Keras train_step)
and ``gradcheck --order 2`` say the same as TF: bilinear drops terms silently (the tape
differs from float64 finite differences), nearest and bicubic raise LookupError, a
ReLU/MaxPool critic is exact (tape = finite differences)."""
from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from cli_run import run_cli

import opregistry
from opregistry.guard import SecondOrderWarning
from tests.guard_helpers import line_of, no_guard_left_behind, site  # noqa: F401 (fixture)

SHAPE = (1, 5, 5, 1)


def critic(method: str, dtype: Any = tf.float32) -> tuple[Any, tf.Variable]:
    """D(x) and its filter w: resized by ``method``, or ReLU and max pooling."""
    w = tf.Variable(tf.random.stateless_normal([3, 3, 1, 2], [1, 2], dtype=dtype) * 0.7,
                    name="w")

    def d(x: tf.Tensor) -> tf.Tensor:
        h = tf.nn.conv2d(x, w, 1, "SAME")
        if method == "relu":
            return tf.reduce_sum(tf.nn.max_pool2d(tf.nn.relu(h), 2, 2, "VALID"))
        return tf.reduce_sum(tf.tanh(tf.image.resize(h, [7, 7], method=method)))  # RESIZE

    return d, w


def x_of(dtype: Any = tf.float32) -> tf.Tensor:
    return tf.constant(np.random.default_rng(3).normal(size=SHAPE), dtype=dtype)


def penalty_and_gradient(d: Any, w: tf.Variable, x: tf.Tensor) -> tuple[Any, Any]:
    """P and the tape's dP/dw (nested tapes, as a gradient penalty takes them)."""
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            inner.watch(x)
            out = d(x)
        g = inner.gradient(out, x)
        p = tf.reduce_sum(g * g)
    return p, outer.gradient(p, w)


def finite_differences(d: Any, w: tf.Variable, x: tf.Tensor, eps: float = 1e-6) -> np.ndarray:
    """Central finite differences of P with respect to w, in float64."""
    base = w.numpy()
    out = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        for sign in (1, -1):
            moved = base.copy()
            moved[index] += sign * eps
            w.assign(moved)
            with tf.GradientTape() as tape:
                tape.watch(x)
                value = d(x)
            g = tape.gradient(value, x)
            out[index] += sign * float(tf.reduce_sum(g * g)) / (2 * eps)
    w.assign(base)
    return out


def relative_error(d: Any, w: tf.Variable) -> float:
    x = x_of(tf.float64)
    _, tape = penalty_and_gradient(d, w, x)
    numeric = finite_differences(d, w, x)
    return float(np.abs(tape.numpy() - numeric).max() / np.abs(numeric).max())


def test_tensorflow_drops_the_bilinear_terms_and_keeps_the_relu_ones():
    """The oracle itself: the tape against float64 finite differences."""
    assert relative_error(*critic("bilinear", tf.float64)) > 0.1
    assert relative_error(*critic("relu", tf.float64)) < 1e-6
    for method in ("nearest", "bicubic"):
        with pytest.raises(LookupError, match="Resize\\w*Grad"):
            penalty_and_gradient(*critic(method, tf.float64), x_of(tf.float64))


@pytest.mark.parametrize("method,verdict,op,gradient_op,reason", [
    ("bilinear", "dropped", "ResizeBilinear", "ResizeBilinearGrad", "no_gradient"),
    ("nearest", "raises", "ResizeNearestNeighbor", "ResizeNearestNeighborGrad", "missing"),
    ("bicubic", "raises", "ResizeBicubic", "ResizeBicubicGrad", "missing"),
])
def test_check_order_2_names_the_resize_for_the_penalty_and_w(method, verdict, op,
                                                              gradient_op, reason):
    d, w = critic(method)
    result = opregistry.check(tf.function(d), x_of(), order=2)
    assert not result.findings  # first order is fine
    assert result.outputs[0].second_order == {"w": verdict, "x": verdict}
    found = {f.target: f for f in result.second_order}
    assert set(found) == {"w", "x"}
    for f in found.values():
        assert f.verdict == verdict and f.gradient_of == ("w", "x")
        [b] = f.stops
        assert (b.op, b.gradient_op, b.reason) == (op, gradient_op, reason)
        assert site(b) == line_of(d, "RESIZE")


def test_check_order_2_is_clean_for_relu_and_max_pooling():
    d, _ = critic("relu")
    result = opregistry.check(tf.function(d), x_of(), order=2)
    assert result.ok and result.second_order == []
    assert result.outputs[0].second_order == {"w": "exact", "x": "exact"}


def test_a_linear_head_makes_the_bilinear_term_zero_and_the_check_says_exact():
    """sum(resize(conv(x, w))): the gradient arriving at the resize is constant, so the
    dropped term is zero (TF right); bicubic still raises (its gradient op reads the
    image, so the outer tape records it), nearest does not."""
    w = tf.Variable(tf.random.stateless_normal([3, 3, 1, 2], [4, 5], dtype=tf.float64),
                    name="w")

    def linear(method: str) -> Any:
        return lambda x: tf.reduce_sum(tf.image.resize(tf.nn.conv2d(x, w, 1, "SAME"),
                                                       [7, 7], method=method))

    x = x_of(tf.float64)
    for method, expected in (("bilinear", "exact"), ("nearest", "exact"),
                             ("bicubic", "raises")):
        result = opregistry.check(tf.function(linear(method)), x, order=2)
        assert result.outputs[0].second_order["w"] == expected, method
        if expected == "raises":
            with pytest.raises(LookupError):
                penalty_and_gradient(linear(method), w, x)
        else:
            _, tape = penalty_and_gradient(linear(method), w, x)
            numeric = finite_differences(linear(method), w, x)
            assert np.abs(tape.numpy() - numeric).max() <= 1e-6 * max(1, np.abs(numeric).max())


class _Critic(tf.Module):
    def __init__(self, method: str):
        self.d, self.w = critic(method)

    @tf.function(input_signature=[tf.TensorSpec(SHAPE)])
    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return self.d(x)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("second_order")
    out = {}
    for method in ("bilinear", "nearest", "relu"):
        path = root / method
        tf.saved_model.save(_Critic(method), str(path))
        out[method] = str(path)
    return out


def test_the_command_line_on_saved_models_every_format(saved, tmp_path):
    dropped = run_cli("check", saved["bilinear"], "--order", "2")
    assert dropped.returncode == 1, dropped.stderr
    assert "second_order_dropped" in dropped.stdout, dropped.stderr
    assert "ResizeBilinearGrad" in dropped.stdout
    assert "second order: 2 pairs dropped" in dropped.stderr
    data = json.loads(run_cli("check", saved["bilinear"], "--order", "2", "-f", "json").stdout)
    pair = next(f for f in data["second_order"] if f["target"] == "w")
    assert pair["verdict"] == "dropped"
    assert pair["stops"][0]["gradient_op"] == "ResizeBilinearGrad"
    sarif = json.loads(run_cli("check", saved["nearest"], "--order", "2", "-f", "sarif").stdout)
    rules = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert rules == {"second_order/raises"}
    assert "ResizeNearestNeighborGrad" in json.dumps(sarif["runs"][0]["results"][0]["fixes"])
    for fmt in ("csv", "markdown", "dot", "table"):
        done = run_cli("check", saved["nearest"], "--order", "2", "-f", fmt,
                       "-o", str(tmp_path / f"out.{fmt}"))
        assert done.returncode == 1, done.stderr
        assert "ResizeNearestNeighborGrad" in (tmp_path / f"out.{fmt}").read_text()
    clean = run_cli("check", saved["relu"], "--order", "2")
    assert clean.returncode == 0 and "2 pairs exact" in clean.stderr, clean.stderr
    first = run_cli("check", saved["bilinear"])  # order 1 says nothing of it
    assert first.returncode == 0 and "second" not in first.stderr


def _guarded_penalty(method: str, traced: bool) -> tuple[list[Any], Any, Any]:
    d, w = critic(method)
    x = x_of()

    def step() -> Any:
        return penalty_and_gradient(d, w, x)[1]

    run = tf.function(step) if traced else step
    raised: Exception | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(summary=False):
            try:
                for _ in range(2):
                    run()
            except Exception as exc:  # noqa: BLE001 - LookupError; traced, a StagingError
                raised = exc
    return [c for c in caught if issubclass(c.category, SecondOrderWarning)], raised, d


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("method", ["bilinear", "nearest", "bicubic", "relu"])
def test_the_guard_on_nested_tapes(method, traced):
    found, raised, d = _guarded_penalty(method, traced)
    if method == "relu":
        assert not found and raised is None
        return
    assert len(found) == 1, [str(w.message) for w in found]
    text = str(found[0].message)
    resize = line_of(d, "RESIZE").rsplit("/", 1)[1]
    assert resize in text  # the line of the resize
    if method == "bilinear":
        assert raised is None
        assert "ResizeBilinearGrad is registered with no gradient" in text
        assert "variable 'w'" in text
    else:  # warned before TF raised
        assert raised is not None and "Grad" in str(raised)
        assert "has no gradient function (missing)" in text


@pytest.mark.parametrize("stride", [1, 2])
def test_the_guard_warns_of_the_traced_max_pool_defect_only_traced(stride):
    """A penalty through a max pooling whose output has its input's size (stride 1,
    SAME): TF's CPU MaxPoolGradGrad makes the traced number wrong, eager is right
    (float64 finite differences decide). The guard warns once, traced only, naming the
    pool's line; a stride-2 pool (traced as right as eager) gets no warning."""
    rng = np.random.default_rng(56)
    v = tf.Variable(rng.normal(size=(1, 4, 4, 2)), name="v")
    x, move = (tf.constant(rng.normal(size=(1, 4, 4, 2))) for _ in range(2))

    def d(xv: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.tanh(tf.nn.max_pool2d(v * xv, 2, stride, "SAME")))  # POOL

    def penalty() -> tf.Tensor:
        with tf.GradientTape() as inner:
            inner.watch(x)
            out = d(x)
        g = inner.gradient(out, x)
        return tf.reduce_sum(g * g)

    def step() -> tf.Tensor:
        with tf.GradientTape() as outer:
            p = penalty()
        return tf.reduce_sum(outer.gradient(p, v) * move)

    base, eps = v.numpy(), 1e-6
    numbers = []
    for sign in (1, -1):
        v.assign(base + sign * eps * move.numpy())
        numbers.append(float(penalty()))
    v.assign(base)
    numeric = (numbers[0] - numbers[1]) / (2 * eps)
    said = {}
    for traced in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with opregistry.guard(summary=False):
                value = float((tf.function(step) if traced else step)())
        said[traced] = [str(c.message) for c in caught
                        if issubclass(c.category, SecondOrderWarning)]
        right = value == pytest.approx(numeric, rel=1e-5)
        assert right == (not traced or stride == 2), (traced, value, numeric)
    assert said[False] == []
    if stride == 2:
        assert said[True] == []
        return
    [text] = said[True]
    assert "MaxPoolGradGrad" in text and "traced_kernel_defect" in text, text
    assert line_of(d, "POOL").rsplit("/", 1)[1] in text and "variable 'v'" in text


def test_the_guard_in_a_keras_train_step_with_a_gradient_penalty():
    import keras

    class Critic(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.conv = keras.layers.Conv2D(2, 3, padding="same")
            self.resize = keras.layers.Resizing(7, 7, interpolation="bilinear")

        def call(self, x: Any) -> Any:
            return keras.ops.sum(keras.ops.tanh(self.resize(self.conv(x))), axis=(1, 2, 3))

        def train_step(self, data: Any) -> Any:
            x = data
            with tf.GradientTape() as outer:
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    score = tf.reduce_sum(self(x, training=True))
                g = inner.gradient(score, x)
                loss = tf.reduce_mean(tf.reduce_sum(g * g, axis=[1, 2, 3]))
            grads = outer.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            return {"loss": loss}

    model = Critic()
    model.compile(optimizer="sgd")
    data = np.random.default_rng(0).normal(size=(4, 5, 5, 1)).astype("float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opregistry.guard(summary=False):
            model.fit(data, epochs=1, batch_size=4, verbose=0)
    found = [c for c in caught if issubclass(c.category, SecondOrderWarning)]
    assert len(found) == 1 and "ResizeBilinearGrad" in str(found[0].message)


def test_gradcheck_order_2_agrees_with_check():
    d, w = critic("bilinear", tf.float64)
    checked = opregistry.check(tf.function(d), x_of(tf.float64), order=2)
    dropped = {f.target for f in checked.second_order if f.verdict == "dropped"}
    result = opregistry.gradcheck(d, x_of(tf.float64), variables=[w], order=2)
    second = {c.target: c for c in result.checks if c.order == 2}
    assert dropped == {"w", "x"}
    for target in dropped:
        c = second[target]
        assert c.verdict in ("mismatch", "none"), c
        [b] = c.stops
        assert isinstance(b, opregistry.SecondOrderOp), b
        assert (b.op, b.gradient_op, b.reason) == ("ResizeBilinear", "ResizeBilinearGrad",
                                                   "no_gradient")
    assert second["w"].verdict == "mismatch"  # TF's number, silently wrong
    d, w = critic("relu", tf.float64)
    clean = opregistry.gradcheck(d, x_of(tf.float64), variables=[w], order=2)
    assert clean.ok


def test_the_remedy_a_bilinear_resize_as_matrix_products():
    """examples/gradient_penalty.py: the same forward value, TF's second derivative
    through it exact, and check --order 2 says so."""
    import importlib.util

    from cli_run import ROOT

    spec = importlib.util.spec_from_file_location("gradient_penalty",
                                                  ROOT / "examples" / "gradient_penalty.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    x = tf.constant(np.random.default_rng(0).normal(size=(2, 5, 6, 3)))
    np.testing.assert_allclose(example.resize_bilinear(x, (7, 9)),
                               tf.image.resize(x, (7, 9)), atol=1e-5)
    assert example.relative_error(example.resize_bilinear) < 1e-6
    assert example.relative_error(lambda h, s: tf.image.resize(h, s)) > 0.1
    w = tf.Variable(tf.random.stateless_normal([3, 3, 1, 2], [1, 2], dtype=tf.float64),
                    name="w")
    fixed = opregistry.check(tf.function(example.critic(w, example.resize_bilinear)),
                             x_of(tf.float64), order=2)
    assert fixed.ok and fixed.outputs[0].second_order == {"w": "exact", "x": "exact"}
