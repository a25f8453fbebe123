"""Coverage of the remedies on the public-API constructs users meet: each construct is
traced by TF and checked; for every op ``check`` names where its gradient stops, the
catalogue has a specific remedy (one naming the op, or its reason's own: not the generic
advice, not a bare registration template) or a "no remedy" saying why. The ops still
without either are listed in GAPS, which must match exactly (a remedy added, or a new
gap, fails until the list says so). The counts are in docs/remedies.md:

    python -m pytest -q -s tests/test_remedy_constructs.py -k counts
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from opregistry.remedies import catalogue

tf = pytest.importorskip("tensorflow")

V = tf.TensorSpec([4, 6], tf.float32)
IMG = tf.TensorSpec([1, 4, 4, 3], tf.float32)
F = Callable[[Any], Any]


def _f(x: Any) -> Any:
    return tf.cast(x, tf.float32)


CONSTRUCTS: dict[str, tuple[F, Any]] = {
    "tf.round": (lambda x: tf.round(x), V),
    "tf.floor": (lambda x: tf.floor(x), V),
    "tf.math.ceil": (lambda x: tf.math.ceil(x), V),
    "tf.math.rint": (lambda x: tf.math.rint(x), V),
    "tf.sign": (lambda x: tf.sign(x), V),
    "tf.math.floordiv": (lambda x: tf.math.floordiv(x, 2.0), V),
    "tf.truncatediv": (lambda x: tf.truncatediv(x, 2.0 + x * 0), V),
    "tf.argmax": (lambda x: _f(tf.argmax(x, -1)), V),
    "tf.argmin": (lambda x: _f(tf.argmin(x, -1)), V),
    "tf.one_hot(tf.argmax)": (lambda x: tf.one_hot(tf.argmax(x, -1), 6), V),
    "tf.math.top_k indices": (lambda x: _f(tf.math.top_k(x, 2).indices), V),
    "tf.argsort": (lambda x: _f(tf.argsort(x)), V),
    "tf.cast to int": (lambda x: _f(tf.cast(x, tf.int32)), V),
    "x > 0": (lambda x: _f(x > 0.0), V),
    "tf.equal": (lambda x: _f(tf.equal(x, 1.0)), V),
    "tf.random.categorical": (lambda x: _f(tf.random.categorical(x, 1)), V),
    "tf.numpy_function": (lambda x: tf.reshape(tf.numpy_function(
        lambda a: a * 2, [x], tf.float32), [4, 6]), V),
    "tf.stop_gradient": (lambda x: tf.stop_gradient(x) * x, V),
    "tf.image.resize area": (lambda x: tf.image.resize(x, [2, 2], method="area"), IMG),
    "tf.image.adjust_contrast": (lambda x: tf.image.adjust_contrast(x, 1.5), IMG),
    "tf.unique": (lambda x: tf.unique(tf.reshape(x, [-1])).y, V),
    "tf.math.bincount weights": (lambda x: tf.math.bincount(
        tf.constant([0, 1, 1, 2]), weights=x[0, :4], minlength=3), V),
    "tf.image.adjust_saturation": (lambda x: tf.image.adjust_saturation(x, 1.5), IMG),
    "tf.image.adjust_hue": (lambda x: tf.image.adjust_hue(x, 0.1), IMG),
    "tf.image.hsv_to_rgb": (lambda x: tf.image.hsv_to_rgb(tf.sigmoid(x)), IMG),
    "tf.histogram_fixed_width": (lambda x: _f(tf.histogram_fixed_width(x, [-1.0, 1.0], 5)), V),
    "tf.searchsorted": (lambda x: _f(tf.searchsorted(tf.sort(x), x)), V),
    "tf.linalg.lu": (lambda x: tf.linalg.lu(x[:, :4] + tf.eye(4) * 5.0).lu, V),
    "tf.image.extract_glimpse": (lambda x: tf.image.extract_glimpse(
        x, [2, 2], tf.zeros([1, 2])), IMG),
    "tf.image.non_max_suppression": (lambda x: tf.gather(x[:, 0], tf.image.non_max_suppression(
        x[:, :4], x[:, 4], 2)), V),
    "tf.sparse.reduce_max": (lambda x: tf.sparse.reduce_max(tf.sparse.from_dense(x), 1), V),
    "tf.image.resize area by 4/3": (lambda x: tf.image.resize(x, [3, 3], method="area"), IMG),
    "tf.unique_with_counts": (lambda x: tf.unique_with_counts(tf.reshape(x, [-1])).y, V),
    "tf.sparse.concat": (lambda x: tf.sparse.to_dense(tf.sparse.concat(
        1, [tf.sparse.from_dense(x), tf.sparse.from_dense(x * 2.0)])), V),
    "tf.linalg.lu_solve": (lambda x: tf.linalg.lu_solve(*tf.linalg.lu(
        x[:, :4] + tf.eye(4) * 5.0), x[:, 4:]), V),
    "tf.linalg.logm": (lambda x: tf.math.real(tf.linalg.logm(tf.cast(
        tf.matmul(x, x, transpose_b=True) + tf.eye(4) * 3.0, tf.complex64))), V),
    "tf.random.poisson": (lambda x: tf.random.poisson([], tf.nn.softplus(x)), V),
    "tf.quantization.dequantize": (lambda x: tf.quantization.dequantize(
        tf.quantization.quantize(x, -3.0, 4.0, tf.qint8).output, -3.0, 4.0), V),
    "tf.image.non_max_suppression_with_scores": (
        lambda x: tf.image.non_max_suppression_with_scores(
            x[:, :4], tf.sigmoid(x[:, 4]), 3, soft_nms_sigma=0.5)[1], V),
    # public constructs TF differentiates (check must not flag them) and more it blocks
    "tf.where(c)": (lambda x: _f(tf.where(x > 0.0)), V),
    "tf.image.adjust_jpeg_quality": (lambda x: tf.image.adjust_jpeg_quality(
        tf.sigmoid(x[0]), 50), IMG),
    "tf.image.stateless_random_jpeg_quality": (
        lambda x: tf.image.stateless_random_jpeg_quality(tf.sigmoid(x[0]), 40, 60, [1, 2]),
        IMG),
    "tf.nn.max_pool_with_argmax indices": (lambda x: _f(tf.nn.max_pool_with_argmax(
        x, 2, 2, "VALID").argmax), IMG),
    "tf.nn.max_pool_with_argmax output": (lambda x: tf.nn.max_pool_with_argmax(
        x, 2, 2, "VALID").output, IMG),
    "tf.raw_ops.Bucketize": (lambda x: _f(tf.raw_ops.Bucketize(
        input=x, boundaries=[-1.0, 0.0, 1.0])), V),
    "tf.math.betainc to a": (lambda x: tf.math.betainc(
        tf.nn.softplus(x) + 0.5, 2.0 + 0 * x, 0.5 + 0 * x), V),
    "tf.math.zeta to x": (lambda x: tf.math.zeta(tf.nn.softplus(x) + 1.5, 2.0 + 0 * x), V),
    "tf.math.polygamma to the order": (lambda x: tf.math.polygamma(
        tf.round(tf.nn.softplus(x)) + x * 0, 1.5 + 0 * x), V),
    "tf.math.igamma to a": (lambda x: tf.math.igamma(tf.nn.softplus(x) + 0.5, 1.0 + 0 * x), V),
    "tf.random.stateless_poisson": (lambda x: tf.random.stateless_poisson(
        [4, 6], [1, 2], tf.nn.softplus(x), dtype=tf.float32), V),
    "tf.random.stateless_binomial": (lambda x: tf.random.stateless_binomial(
        [4, 6], [1, 2], 5.0, tf.sigmoid(x), output_dtype=tf.float32), V),
    "tf.random.stateless_categorical": (lambda x: _f(tf.random.stateless_categorical(
        x, 1, [1, 2])), V),
    "tf.random.gamma": (lambda x: tf.random.gamma([], tf.nn.softplus(x) + 0.5), V),
    "tf.random.stateless_parameterized_truncated_normal": (
        lambda x: tf.random.stateless_parameterized_truncated_normal(
            [4, 6], [1, 2], means=x, stddevs=1.0), V),
    "tf.random.shuffle": (lambda x: tf.random.shuffle(x), V),
    "tf.bitcast": (lambda x: tf.bitcast(tf.bitcast(x, tf.int32), tf.float32), V),
    "tf.math.count_nonzero": (lambda x: _f(tf.math.count_nonzero(x > 0.1)), V),
    "tf.math.in_top_k": (lambda x: _f(tf.math.in_top_k(tf.constant([0, 1, 2, 3]), x, 2)), V),
    "tf.histogram_fixed_width_bins": (lambda x: _f(tf.histogram_fixed_width_bins(
        x, [-1.0, 1.0], 5)), V),
    "tf.sparse.maximum": (lambda x: tf.sparse.to_dense(tf.sparse.maximum(
        tf.sparse.from_dense(x), tf.sparse.from_dense(x * 2.0))), V),
    "tf.sparse.split": (lambda x: tf.sparse.to_dense(tf.sparse.split(
        sp_input=tf.sparse.from_dense(x), num_split=2, axis=1)[0]), V),
    "tf.sparse.slice": (lambda x: tf.sparse.to_dense(tf.sparse.slice(
        tf.sparse.from_dense(x), [0, 0], [2, 3])), V),
    "tf.image.combined_non_max_suppression": (
        lambda x: tf.image.combined_non_max_suppression(
            tf.reshape(x[:, :4], [1, 4, 1, 4]), tf.reshape(tf.sigmoid(x[:, 4:]), [1, 4, 2]),
            2, 2).nmsed_scores, V),
    "tf.image.draw_bounding_boxes": (lambda x: tf.image.draw_bounding_boxes(
        x, tf.constant([[[0.1, 0.1, 0.6, 0.6]]]), tf.constant([[1.0, 0.0, 0.0, 1.0]])), IMG),
    "tf.image.convert_image_dtype to uint8": (lambda x: _f(tf.image.convert_image_dtype(
        tf.sigmoid(x), tf.uint8)), IMG),
    "tf.image.resize bicubic": (lambda x: tf.image.resize(x, [3, 3], method="bicubic"), IMG),
    "tf.image.resize lanczos3": (lambda x: tf.image.resize(x, [3, 3], method="lanczos3"), IMG),
    "tf.image.rgb_to_hsv": (lambda x: tf.image.rgb_to_hsv(tf.sigmoid(x)), IMG),
    "tf.linalg.lu_reconstruct": (lambda x: tf.linalg.lu_reconstruct(*tf.linalg.lu(
        x[:, :4] + tf.eye(4) * 5.0)), V),
    "tf.linalg.sqrtm": (lambda x: tf.linalg.sqrtm(tf.matmul(x, x, transpose_b=True)
                                                  + tf.eye(4)), V),
    "tf.nn.isotonic_regression": (lambda x: tf.nn.isotonic_regression(x)[0], V),
    "tf.quantization.fake_quant_with_min_max_args": (
        lambda x: tf.quantization.fake_quant_with_min_max_args(x), V),
}
# blocking ops with neither a specific remedy nor a reason yet (none since issue 39)
GAPS: set[str] = set()


def _specific(op: str, reason: str) -> bool:
    cat = catalogue()
    found = [r for r in cat.for_op(op, reason) if r.kind not in ("advice", "register")]
    return bool(found) or cat.why_none(op) is not None


@pytest.fixture(scope="module")
def flagged(harvested_db: Any, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, set[tuple[str, str]]]:
    """construct -> the (op, reason) pairs check names for it (none: not flagged). One
    SavedModel, a signature per construct (each its own call, as TF differentiates it),
    checked once: one trace and one read of the op facts, not one per construct."""
    from opregistry import check

    module = tf.Module()
    keys = {f"c{number}": name for number, name in enumerate(CONSTRUCTS)}
    signatures = {}
    for key, name in keys.items():
        fn, spec = CONSTRUCTS[name]
        signatures[key] = tf.function(lambda x, fn=fn: {"out": fn(x)}, autograph=False
                                      ).get_concrete_function(tf.TensorSpec(
                                          spec.shape, spec.dtype, name="x"))
    path = tmp_path_factory.mktemp("constructs") / "model"
    tf.saved_model.save(module, str(path), signatures=signatures)
    result = check(str(path), db=harvested_db)
    out: dict[str, set[tuple[str, str]]] = {name: set() for name in CONSTRUCTS}
    for finding in result.findings:
        out[keys[finding.signature]] |= {(b.op, b.reason) for b in finding.stops}
    for partial in result.partial_paths:
        out[keys[partial.signature]] |= {(b.op, b.reason) for b in partial.stops}
    return out


def test_every_construct_is_flagged_where_tensorflow_gives_no_gradient(
        flagged: dict[str, set[tuple[str, str]]]) -> None:
    for name, (fn, spec) in CONSTRUCTS.items():
        x = tf.Variable(tf.random.normal(spec.shape))
        try:
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(tf.cast(fn(x), tf.float32) * 1.5)
            grad = tape.gradient(y, x)
            blocked = grad is None or not bool(tf.reduce_any(grad != 0))
        except (LookupError, TypeError):
            blocked = True
        if name == "tf.stop_gradient":  # a gradient arrives by the other path: partial
            blocked = True
        assert bool(flagged[name]) == blocked, (name, flagged[name])


def test_every_flagged_op_has_a_specific_remedy_or_a_reason(
        flagged: dict[str, set[tuple[str, str]]]) -> None:
    uncovered = {op for pairs in flagged.values() for op, reason in pairs
                 if not _specific(op, reason)}
    assert uncovered == GAPS


def test_counts(flagged: dict[str, set[tuple[str, str]]]) -> None:
    hit = [name for name, pairs in flagged.items() if pairs]
    covered = [name for name in hit if all(_specific(op, r) for op, r in flagged[name])]
    print(f"\n{len(CONSTRUCTS)} constructs, {len(hit)} flagged by check, {len(covered)} with "
          "a specific remedy or a reason for every op where the gradient stops")
    assert len(covered) == len(hit) - len([n for n in hit if flagged[n] and any(
        op in GAPS for op, _ in flagged[n])])
