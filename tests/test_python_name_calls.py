"""A Python name resolves to what the user's call builds: each name of
``registry.names.DEFAULT_CALLS`` is called as users call it, traced by TF, and the op
``lookup`` and ``explain`` give first is the one on the traced call's gradient path
(``explain tf.where`` was Where, a missing-gradient int64 op, where ``tf.where(c, x, y)``
builds SelectV2; ``tf.image.resize`` was ResizeArea where it builds ResizeBilinear;
``tf.searchsorted`` was ExpandDims; ``tf.sort`` was unknown; ``tf.linalg.lu_solve`` was
MatrixBandPart, ``tf.add`` the TF1 Add)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from opregistry.registry.lookup import lookup
from opregistry.registry.names import DEFAULT_CALLS
from opregistry.remedies.explain import explain

tf = pytest.importorskip("tensorflow")

V = tf.TensorSpec([2, 5], tf.float32)
IMAGES = tf.TensorSpec([2, 8, 8, 3], tf.float32)
SQUARE4 = tf.TensorSpec([4, 4], tf.float32)
CALLS: dict[str, tuple[Callable[..., Any], list[Any]]] = {
    "tf.where": (lambda c, x: tf.where(c > 0, x, -x), [V, V]),
    "tf.compat.v1.where": (lambda c, x: tf.compat.v1.where(c > 0, x, -x), [V, V]),
    "tf.image.resize": (lambda x: tf.image.resize(x, [4, 4]), [IMAGES]),
    "tf.compat.v1.image.resize": (lambda x: tf.compat.v1.image.resize(x, [4, 4]), [IMAGES]),
    "tf.image.resize_images": (lambda x: tf.compat.v1.image.resize_images(x, [4, 4]), [IMAGES]),
    "tf.sort": (lambda x: tf.sort(x), [V]),
    "tf.argsort": (lambda x: tf.argsort(x), [V]),
    "tf.searchsorted": (lambda x, v: tf.searchsorted(tf.sort(x), v), [V, V]),
    "tf.math.bincount": (lambda w: tf.math.bincount(
        tf.constant([0, 1, 1, 2]), weights=w, minlength=3), [tf.TensorSpec([4])]),
    "tf.compat.v1.bincount": (lambda w: tf.compat.v1.bincount(
        tf.constant([0, 1, 1, 2]), weights=w, minlength=3), [tf.TensorSpec([4])]),
    "tf.image.extract_glimpse": (lambda x: tf.image.extract_glimpse(
        x, [2, 2], tf.zeros([2, 2])), [IMAGES]),
    "tf.compat.v1.image.extract_glimpse": (lambda x: tf.compat.v1.image.extract_glimpse(
        x, [2, 2], tf.zeros([2, 2])), [IMAGES]),
    "tf.linalg.lu_solve": (lambda a, b: tf.linalg.lu_solve(*tf.linalg.lu(a), b),
                           [SQUARE4, SQUARE4]),
    "tf.linalg.lu_reconstruct": (lambda a: tf.linalg.lu_reconstruct(*tf.linalg.lu(a)),
                                 [SQUARE4]),
    "tf.linalg.lstsq": (lambda a, b: tf.linalg.lstsq(a, b), [SQUARE4, SQUARE4]),
    "tf.add": (lambda x, y: tf.add(x, y), [V, V]),
    "tf.math.add": (lambda x, y: tf.math.add(x, y), [V, V]),
    "tf.truediv": (lambda x, y: tf.truediv(x, y), [V, V]),
    "tf.math.truediv": (lambda x, y: tf.math.truediv(x, y), [V, V]),
}


def test_every_call_here_is_a_default_call() -> None:
    """The rest of ``DEFAULT_CALLS`` is checked by tests/test_python_name_traces.py."""
    assert set(CALLS) <= set(DEFAULT_CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_first_op_is_the_one_the_call_builds(name: str) -> None:
    fn, specs = CALLS[name]
    graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
    traced = {op.type for op in graph.get_operations()}
    first = lookup(name).ops[0]
    assert first == DEFAULT_CALLS[name][0]
    assert first in traced, (name, first, sorted(traced))
    assert explain(name).name == first
    # the other ops named are ones the call does not build with default arguments
    assert not (set(lookup(name).ops[1:]) & traced - {first})


# names of the harvest's ``_multi`` kind named after none of their ops: the op their
# code is about comes before its casts and checks (names.helpers_last); before it,
# the first alphabetically (Cast, Equal) was one the call did not even build
HELPERS_LAST: dict[str, tuple[Callable[..., Any], list[Any]]] = {
    "tf.image.flip_left_right": (lambda x: tf.image.flip_left_right(x), [IMAGES]),
    "tf.clip_by_norm": (lambda x: tf.clip_by_norm(x, 1.0), [V]),
    "tf.math.divide_no_nan": (lambda x, y: tf.math.divide_no_nan(x, y), [V, V]),
    "tf.sparse.from_dense": (lambda x: tf.sparse.from_dense(x).values, [V]),
    "tf.nn.l2_normalize": (lambda x: tf.nn.l2_normalize(x), [V]),
    "tf.image.sobel_edges": (lambda x: tf.image.sobel_edges(x), [IMAGES]),
}


@pytest.mark.parametrize("name", sorted(HELPERS_LAST))
def test_the_first_op_of_a_composite_is_one_the_call_builds(name: str) -> None:
    fn, specs = HELPERS_LAST[name]
    graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
    traced = {op.type for op in graph.get_operations()}
    assert lookup(name).ops[0] in traced, (name, lookup(name).ops, sorted(traced))
    assert explain(name).name == lookup(name).ops[0]


IMAGE = tf.TensorSpec([1, 4, 4, 3], tf.float32)
ROW = tf.TensorSpec([6], tf.float32)
SQUARE = tf.TensorSpec([3, 3], tf.float32)
# the Python names users write for ops with no gradient, called as users call them, and
# the remedy explain must put first for the name (the one check's finding names: the op
# the call builds is the op the remedy is for)
REMEDY_CALLS: dict[str, tuple[Callable[..., Any], list[Any], str]] = {
    "tf.image.adjust_hue": (lambda x: tf.image.adjust_hue(x, 0.1), [IMAGE],
                            "adjust-hue-in-tf-ops"),
    "tf.image.adjust_saturation": (lambda x: tf.image.adjust_saturation(x, 1.5), [IMAGE],
                                   "adjust-saturation-arithmetic"),
    "tf.image.adjust_contrast": (lambda x: tf.image.adjust_contrast(x, 1.5), [IMAGE],
                                 "adjust-contrast-arithmetic"),
    "tf.image.hsv_to_rgb": (lambda x: tf.image.hsv_to_rgb(x), [IMAGE], "hsv-to-rgb-in-tf-ops"),
    "tf.image.extract_glimpse": (lambda x: tf.image.extract_glimpse(
        x, [2, 2], tf.zeros([1, 2])), [IMAGE], "extract-glimpse-crop-and-resize"),
    "tf.compat.v1.image.resize_area": (lambda x: tf.compat.v1.image.resize_area(
        x, [2, 2]), [IMAGE], "area-resize-avg-pool"),
    "tf.unique": (lambda x: tf.unique(x).y, [ROW], "unique-segment-max"),
    "tf.unique_with_counts": (lambda x: tf.unique_with_counts(x).y, [ROW],
                              "unique-with-counts-segment-max"),
    "tf.math.bincount": (lambda w: tf.math.bincount(
        tf.constant([0, 1, 1, 2, 0, 1]), weights=w, minlength=3), [ROW],
        "bincount-segment-sum"),
    "tf.histogram_fixed_width": (lambda x: tf.histogram_fixed_width(x, [-1.0, 1.0], 5),
                                 [ROW], "soft-histogram"),
    "tf.searchsorted": (lambda x: tf.searchsorted(tf.sort(x), x), [ROW], "soft-count-below"),
    "tf.sparse.reduce_max": (lambda x: tf.sparse.reduce_max(tf.sparse.from_dense(x), 1),
                             [SQUARE], "sparse-reduce-max-segment-max"),
    "tf.sparse.concat": (lambda x: tf.sparse.concat(
        1, [tf.sparse.from_dense(x), tf.sparse.from_dense(x)]).values, [SQUARE],
        "sparse-concat-values"),
    "tf.linalg.lu": (lambda x: tf.linalg.lu(x).lu, [SQUARE], "lu-solve-direct"),
    "tf.linalg.logm": (lambda x: tf.linalg.logm(tf.cast(x, tf.complex64)), [SQUARE],
                       "logm-eigh"),
    "tf.quantization.dequantize": (lambda x: tf.quantization.dequantize(
        tf.quantization.quantize(x, -3.0, 4.0, tf.qint8).output, -3.0, 4.0), [ROW],
        "dequantize-straight-through"),
    "tf.random.poisson": (lambda x: tf.random.poisson([], x), [ROW], "poisson-score-function"),
    "tf.image.non_max_suppression_with_scores": (
        lambda x: tf.image.non_max_suppression_with_scores(
            x[:, :4], x[:, 4], 3, soft_nms_sigma=0.5)[1], [tf.TensorSpec([4, 6])],
        "matrix-nms-decay"),
}


@pytest.mark.parametrize("name", sorted(REMEDY_CALLS))
def test_the_remedy_is_found_from_the_python_name(name: str) -> None:
    """``explain NAME`` names the op the call builds, and its first remedy is the one
    the catalogue gives that op where its gradient stops (what check prints for the
    graph): the user who writes the Python name and the one who reads the finding get
    the same fix."""
    from opregistry.remedies import catalogue

    fn, specs, remedy_id = REMEDY_CALLS[name]
    graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
    traced = {op.type for op in graph.get_operations()}
    shown = explain(name)
    assert shown.name in traced, (name, shown.name, sorted(traced))
    assert shown.suggestions and shown.suggestions[0].remedy.id == remedy_id, \
        (name, [s.remedy.id for s in shown.suggestions])
    assert remedy_id in [r.id for r in catalogue().for_op(shown.name, shown.reason)]
    assert shown.name in catalogue().remedy(remedy_id).ops
