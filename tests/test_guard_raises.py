"""When TensorFlow raises for a gradient call (an op on the path has no gradient: its
LookupError, a StagingError in a tf.function), the guard first says which op, the line
that created it, the release's facts and the remedy, in one NonDifferentiableWarning
(or the raise action's error), then TF's own error goes on. TF decides that it raises:
each case is run without the guard too."""
from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import opregistry
from tests.guard_helpers import line_of, no_guard_left_behind, site  # noqa: F401 (fixture)


def _area_eagerly():
    image = tf.Variable(tf.ones([1, 4, 4, 1]), name="image")
    scale = tf.Variable(2.0, name="scale")
    with tf.GradientTape() as tape:
        small = tf.image.resize(image * scale, [2, 2], method="area")  # resize
        loss = tf.reduce_sum(small) + scale
    return tape.gradient(loss, [image, scale])


_values = tf.Variable([1.0, 2.0, 2.0, 3.0], name="values")


@tf.function
def _unique_traced():
    with tf.GradientTape() as tape:
        kept = tf.unique(_values * 2.0)[0]  # unique
        loss = tf.reduce_sum(kept) + tf.reduce_sum(_values)
    return tape.gradient(loss, [_values])


class _UniqueSum(keras.layers.Layer):
    def call(self, x):
        return x + tf.reduce_sum(tf.unique(tf.reshape(x, [-1]))[0])  # layer unique


def _keras_fit():
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), _UniqueSum()])
    model.compile("sgd", "mse")
    data = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    model.fit(*data, epochs=1, verbose=0)


def _tf_error(fn):
    """What TF raises without the guard: its type and its last line."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - TF decides which
        fn()
    return type(caught.value), str(caught.value).strip().splitlines()[-1]


def _guarded(fn, **options):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with opregistry.guard(summary=False, **options) as guard:
            with pytest.raises(Exception) as caught:  # noqa: PT011 - compared below
                fn()
    ours = [w for w in seen if issubclass(w.category, opregistry.NonDifferentiableWarning)]
    return caught.value, ours, guard


@pytest.mark.parametrize(("fn", "op", "marker", "error"), [
    (_area_eagerly, "ResizeArea", "resize", LookupError),
    (_unique_traced, "Unique", "unique", Exception),  # autograph's StagingError
    (_keras_fit, "Unique", "layer unique", Exception),
], ids=["eager-resize-area", "tf-function-unique", "keras-fit-unique"])
def test_the_guard_names_the_op_before_tensorflow_raises(fn, op, marker, error):
    kind, last = _tf_error(fn)  # TF raises, without the guard
    assert issubclass(kind, error) and op in last, (kind, last)
    raised, ours, guard = _guarded(fn)
    # TF's own error, unchanged, after the warning (caught while it was in flight)
    assert type(raised) is kind and str(raised).strip().splitlines()[-1] == last
    assert len(ours) == 1, [str(w.message) for w in ours]
    text = str(ours[0].message)
    (lost,) = guard.lost
    assert lost.kind == "raises" and [s.op for s in lost.stops] == [op]
    (stop,) = lost.stops
    source = _UniqueSum.call if fn is _keras_fit else fn.python_function \
        if hasattr(fn, "python_function") else fn
    assert site(stop) == line_of(source, marker)
    assert f"{op} '" in text and stop.site in text
    assert "facts of TensorFlow" in text and "fix: " in text and f"explain {op}" in text
    assert text.rstrip().endswith(last.split(": ", 1)[-1])  # TF's message, said


def test_the_raise_action_raises_its_error_with_tensorflows_as_the_cause():
    raised, ours, guard = _guarded(_area_eagerly, action="raise")
    assert isinstance(raised, opregistry.NonDifferentiableError) and not ours
    assert isinstance(raised.__context__, LookupError)
    assert "ResizeArea" in str(raised) and "ResizeArea" in str(raised.__context__)
    (lost,) = raised.lost
    assert lost.kind == "raises"


def test_a_call_tensorflow_does_not_fail_gets_no_such_warning():
    image = tf.Variable(tf.ones([1, 4, 4, 1]))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with opregistry.guard(summary=False) as guard:
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.image.resize(image, [2, 2], method="bilinear"))
            assert tape.gradient(loss, image) is not None
    assert not guard.lost and not [w for w in seen if issubclass(
        w.category, opregistry.NonDifferentiableWarning)]
