"""Five outputs, five ways a gradient stops, and the fix for each (the ``fix:`` lines):

    opregistry gradcheck examples/remedies.py:build
"""
import numpy as np
import tensorflow as tf

w = tf.Variable([[0.5, -1.0], [2.0, 0.3]], dtype=tf.float64, name="w")
scale = tf.Variable(3.0, dtype=tf.float64, name="scale")


@tf.custom_gradient
def scaled(x, s):
    def grad(dy):
        return dy * s, None  # forgets s: it gets no gradient

    return s * x, grad


@tf.function
def model(x):
    h = x @ w
    return {
        "argmax": tf.cast(tf.argmax(h, axis=-1), h.dtype),
        "round": tf.round(h),
        "cast_to_int": tf.cast(tf.cast(h, tf.int32), h.dtype),
        "py_function": tf.numpy_function(np.tanh, [h], h.dtype),
        "custom_gradient": scaled(h, scale),
    }


def build():
    return model, [tf.constant([[0.2, 0.7], [1.1, -0.4]], tf.float64)]
