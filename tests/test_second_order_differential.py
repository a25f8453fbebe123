"""The second-order differential (tests/second_order_differential.py): generated
programs, batched as one SavedModel per save path (``tf.saved_model.save`` and Keras
``model.export``), ``check --order 2``'s verdict for every (output, target) against
TensorFlow on the loaded file: nested tapes eager and traced, float64 central finite
differences deciding (raises, dropped, zero, exact). 0 disagreements, every construct of
the grammar present, its count printed.

Where TF's traced tapes give another number than its eager ones, finite differences
have sided with the eager tapes, and every such pair crosses a max pooling whose output
has its input's size (stride 1, ``SAME``): TF's CPU MaxPoolGradGrad kernel takes the
incoming gradient's buffer for its output when nothing else holds it (only in a graph:
eager, Python holds it) and zeroes it before reading it (docs/second-order.md). Check
must name each such pair (a ``traced_wrong`` finding), else it is a disagreement.

The developer tier runs the first ``len(TEMPLATES)`` programs (each construct first
once); CI runs the rest to ``COUNT`` (marked ``fuzz``). Cost: see ``render``'s CPU
seconds (docs/second-order.md has the figures)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tensorflow")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import second_order_differential as differential  # noqa: E402
import second_order_programs as programs  # noqa: E402

QUICK, COUNT = len(programs.TEMPLATES), 300
# (seed, output, target, TF's, check's) on both save paths where check --order 2
# disagrees today (open, issue 36): exactly these, no other; a fixed one must leave the
# list. None: the last one (80) was the point, not check: an entry of v1 exactly 0 put
# ``max(x0 - x0, v1)`` on its kink (programs._generic keeps variables off zero).
_KNOWN: list[tuple[int, str, str, str, str]] = []
KNOWN = {(seed, part, *rest) for seed, *rest in _KNOWN for part in differential.PARTS}


def _keys(report: differential.Report) -> set[tuple[object, ...]]:
    """(seed, part, output, target, TF's, check's) of each disagreement."""
    out: set[tuple[object, ...]] = set()
    for line in report.disagreements:
        words = line.replace(",", "").replace(":", "").split()
        # seed N [part] construct output <- target TF theirs check mine (...)
        out.add((int(words[1]), words[2].strip("[]"), words[4], words[6], words[8],
                 words[10]))
    return out


def _known_tf_defect(line: str) -> bool:
    """Whether a traced-wrong pair's program has a same-size max pooling."""
    seed = int(line.split()[1])
    return any(t.construct == "max_pool" and "1, 'SAME'" in t.code
               for _, t in programs.generate(seed).statements)


def _judge(report: differential.Report, count: int, known: Any = frozenset()
           ) -> None:
    print(differential.render(report))
    assert report.programs == count
    assert len(_keys(report)) == len(report.disagreements), differential.render(report)
    assert _keys(report) == known, differential.render(report)
    assert all(report.pairs[part] for part in differential.PARTS)
    assert all(map(_known_tf_defect, report.traced_wrong)), report.traced_wrong
    assert all(report.constructs[t.construct] >= count // QUICK
               for t in programs.TEMPLATES), report.constructs


def _second(f: Any, x: Any, d: Any) -> tuple[float, float, float]:
    """d/dx <df/dx, d> along d: nested tapes eager, the same traced, and float64
    central finite differences of the eager first gradient."""
    import tensorflow as tf

    def q(xv: Any) -> Any:
        with tf.GradientTape() as inner:
            inner.watch(xv)
            y = f(xv)
        return tf.reduce_sum(inner.gradient(y, xv) * d)

    def second(xv: Any) -> Any:
        with tf.GradientTape() as outer:
            outer.watch(xv)
            value = q(xv)
        g = outer.gradient(value, xv)  # None: TF dropped every term
        return tf.constant(0.0, tf.float64) if g is None else tf.reduce_sum(g * d)

    step = 1e-5
    numeric = float(q(x + step * d) - q(x - step * d)) / (2 * step)
    return float(second(x)), float(tf.function(second)(x)), numeric


def _named(result: Any, target: str, verdict: str) -> set[tuple[str, str, str]]:
    return {(b.op, b.gradient_op, b.reason) for f in result.second_order or ()
            if f.target == target and f.verdict == verdict for b in f.stops}


@pytest.mark.parametrize("stride, same_size", [(1, True), (2, False)])
def test_tensorflow_traced_max_pool_second_order_and_check_names_it(stride, same_size):
    """TF's MaxPoolGradGrad (CPU) zeroes the incoming gradient's buffer when it may take
    it (a graph, a pool whose output has its input's size): traced, the term through
    the pool is silently zero; eager and finite differences agree. check --order 2
    names the pool (traced_wrong, via MaxPoolGradGrad: traced_kernel_defect) exactly
    then, the pair's verdict the true one (exact)."""
    import numpy as np
    import tensorflow as tf

    import opregistry

    rng = np.random.default_rng(56)
    v = tf.Variable(rng.normal(size=programs.SHAPE), name="v")
    x, d = (tf.constant(rng.normal(size=programs.SHAPE)) for _ in range(2))

    def f(xv: Any) -> Any:
        return tf.reduce_sum(tf.tanh(tf.nn.max_pool2d(v * xv, 2, stride, "SAME")))

    eager, traced, numeric = _second(f, x, d)
    assert eager == pytest.approx(numeric, rel=1e-6)
    assert (traced == 0.0) if same_size else traced == pytest.approx(eager, rel=1e-9)
    result = opregistry.check(tf.function(f), x, order=2)
    named = {("MaxPool", "MaxPoolGradGrad", "traced_kernel_defect")}
    assert _named(result, "xv", "traced_wrong") == (named if same_size else set())
    assert result.outputs[0].second_order == {"v": "exact", "xv": "exact"}


def test_tensorflow_drops_the_moments_mean_at_second_order_and_check_names_it():
    """tf.nn.moments' variance is mean(squared_difference(x, stop_gradient(mean))): exact
    at first order, but the second pass cannot go back through the StopGradient
    (eager and traced alike differ from finite differences); check names it."""
    import numpy as np
    import tensorflow as tf

    import opregistry

    x, d = (tf.constant(np.random.default_rng(39).normal(size=programs.SHAPE))
            for _ in range(2))

    def f(xv: Any) -> Any:
        t = tf.nn.batch_normalization(xv, *tf.nn.moments(xv, [0, 1, 2]), offset=None,
                                      scale=None, variance_epsilon=1e-3)
        return tf.reduce_sum(tf.tanh(t) * xv)

    eager, traced, numeric = _second(f, x, d)
    assert traced == pytest.approx(eager, rel=1e-9)
    assert abs(eager - numeric) > 1e-3 * abs(numeric)
    result = opregistry.check(tf.function(f), x, order=2)
    assert _named(result, "xv", "dropped") == {("StopGradient", "StopGradient", "no_gradient")}


def test_a_resize_without_gradient_before_a_missing_one_drops_and_does_not_raise():
    """Bilinear then bicubic (seed 240): ResizeBicubicGrad has no gradient function, but
    the second pass never reaches it (ResizeBilinearGrad, registered with none, stops
    it first): TF does not raise and its number is silently zero. check says
    ``dropped`` naming the bilinear resize, not ``raises``."""
    import numpy as np
    import tensorflow as tf

    import opregistry

    x, d = (tf.constant(np.random.default_rng(240).normal(size=programs.SHAPE))
            for _ in range(2))

    def resize(t: Any, method: str) -> Any:
        return tf.cast(tf.image.resize(t, [6, 6], method=method), tf.float64)

    def f(xv: Any) -> Any:
        return tf.reduce_sum(tf.square(resize(resize(xv, "bilinear"), "bicubic")))

    eager, traced, numeric = _second(f, x, d)
    assert eager == traced == 0.0 and abs(numeric) > 0.1
    result = opregistry.check(tf.function(f), x, order=2)
    assert result.outputs[0].second_order == {"xv": "dropped"}
    assert _named(result, "xv", "dropped") == {
        ("ResizeBilinear", "ResizeBilinearGrad", "no_gradient")}


@pytest.mark.parametrize("stopped", [True, False])
def test_a_custom_gradient_whose_backward_stops_the_second_pass(stopped, tmp_path):
    """``tf.custom_gradient`` with the backward ``dy * stop_gradient(1 - y * y)``: right
    at first order, but the second pass differentiates the backward's ops and the
    StopGradient drops y's term (eager and traced alike differ from finite
    differences). check --order 2 says ``dropped``, naming the custom gradient's
    IdentityN via StopGradient, live and saved; the same backward without the stop is
    exact."""
    import numpy as np
    import tensorflow as tf

    import opregistry

    x, d = (tf.constant(np.random.default_rng(5).normal(size=programs.SHAPE))
            for _ in range(2))

    @tf.custom_gradient
    def custom_tanh(t: Any) -> Any:
        y = tf.tanh(t)
        factor = (lambda v: tf.stop_gradient(v)) if stopped else (lambda v: v)
        return y, lambda dy: dy * factor(1.0 - y * y)

    def f(xv: Any) -> Any:
        return tf.reduce_sum(custom_tanh(xv) * xv)

    eager, traced, numeric = _second(f, x, d)
    assert traced == pytest.approx(eager, rel=1e-9)
    assert (abs(eager - numeric) > 1e-3 * abs(numeric)) == stopped, (eager, numeric)
    module = tf.Module()
    module.f = tf.function(f, input_signature=[tf.TensorSpec(programs.SHAPE, tf.float64)])
    tf.saved_model.save(module, str(tmp_path / "m"), signatures=module.f.get_concrete_function())
    for result in (opregistry.check(tf.function(f), x, order=2),
                   opregistry.check(tmp_path / "m", order=2)):
        [verdict] = result.outputs[0].second_order.values()
        assert verdict == ("dropped" if stopped else "exact")
        named = {(b.op, b.gradient_op, b.reason) for f in result.second_order or ()
                 for b in f.stops}
        assert named == ({("IdentityN", "StopGradient", "no_gradient")} if stopped else set())


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> differential.Report:
    return differential.run(QUICK, 0, tmp_path_factory.mktemp("second_order_quick"))


def test_check_order_2_agrees_with_tensorflow(quick: differential.Report) -> None:
    _judge(quick, QUICK)
    assert {v for _, v in quick.verdicts} >= {"exact", "zero", "dropped", "raises"}


def test_a_wrong_verdict_is_a_disagreement(quick: differential.Report) -> None:
    """The comparison can fail: each verdict turned around is one disagreement."""
    flipped = {"dropped": "exact", "exact": "dropped", "zero": "dropped", "raises": "exact"}
    assert quick.judged and all(not differential.agrees(flipped[mine], theirs)
                                for mine, theirs in quick.judged)


@pytest.mark.fuzz
def test_check_order_2_agrees_with_tensorflow_ci_sized(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The rest to COUNT programs (the quick slice above makes the first)."""
    report = differential.run(COUNT - QUICK, QUICK,
                              tmp_path_factory.mktemp("second_order_fuzz"))
    _judge(report, COUNT - QUICK, KNOWN)
