"""A Python name resolves to what the user's call builds: each name of
``registry.names.DEFAULT_CALLS`` is called as users call it, traced by TF, and the op
``lookup`` and ``explain`` give first is the one on the traced call's gradient path
(``explain tf.where`` was Where, a missing-gradient int64 op, where ``tf.where(c, x, y)``
builds SelectV2; ``tf.image.resize`` was ResizeArea where it builds ResizeBilinear;
``tf.searchsorted`` was ExpandDims; ``tf.sort`` was unknown)."""
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
CALLS: dict[str, tuple[Callable[..., Any], list[Any]]] = {
    "tf.where": (lambda c, x: tf.where(c > 0, x, -x), [V, V]),
    "tf.compat.v1.where": (lambda c, x: tf.compat.v1.where(c > 0, x, -x), [V, V]),
    "tf.image.resize": (lambda x: tf.image.resize(x, [4, 4]), [IMAGES]),
    "tf.compat.v1.image.resize": (lambda x: tf.compat.v1.image.resize(x, [4, 4]), [IMAGES]),
    "tf.image.resize_images": (lambda x: tf.compat.v1.image.resize_images(x, [4, 4]), [IMAGES]),
    "tf.sort": (lambda x: tf.sort(x), [V]),
    "tf.argsort": (lambda x: tf.argsort(x), [V]),
    "tf.searchsorted": (lambda x, v: tf.searchsorted(tf.sort(x), v), [V, V]),
}


def test_every_default_call_is_traced_here() -> None:
    assert set(CALLS) == set(DEFAULT_CALLS)


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
