"""The gradient penalty of a bilinear critic, D(x) = sum(tanh(resize_bilinear(conv2d(x, w)))),
P = ||dD/dx||²: TensorFlow's dP/dw against central finite differences in float64, before
and after the remedy (a bilinear resize written as two matrix products, differentiable
to any order). Run: python examples/gradient_penalty.py (figures: docs/second-order.md)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf


def interpolation(size_in: int, size_out: int) -> np.ndarray:
    """The [size_out, size_in] matrix of tf.image.resize's bilinear interpolation
    (half-pixel centres, no antialiasing) along one axis."""
    m = np.zeros((size_out, size_in))
    for i in range(size_out):
        src = min(max((i + 0.5) * size_in / size_out - 0.5, 0.0), size_in - 1.0)
        lo = int(np.floor(src))
        hi = min(lo + 1, size_in - 1)
        m[i, lo] += 1.0 - (src - lo)
        m[i, hi] += src - lo
    return m


def resize_bilinear(images: tf.Tensor, size: tuple[int, int]) -> tf.Tensor:
    """tf.image.resize(images, size) (bilinear) as two matrix products: its gradient is
    a matrix product too, so a second derivative goes through it."""
    rows = tf.constant(interpolation(images.shape[1], size[0]), images.dtype)
    cols = tf.constant(interpolation(images.shape[2], size[1]), images.dtype)
    return tf.einsum("ih,bhwc,jw->bijc", rows, images, cols)


def critic(w: tf.Variable, resize):
    return lambda x: tf.reduce_sum(tf.tanh(resize(tf.nn.conv2d(x, w, 1, "SAME"), (7, 7))))


def penalty(d, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = d(x)
    g = tape.gradient(value, x)
    return tf.reduce_sum(g * g)


def relative_error(resize, eps: float = 1e-4) -> float:
    """max |tape - finite differences| / max |finite differences| of dP/dw."""
    w = tf.Variable(tf.random.stateless_normal([3, 3, 1, 2], [1, 2], dtype=tf.float64) * 0.7)
    x = tf.constant(np.random.default_rng(3).normal(size=(1, 5, 5, 1)))
    d = critic(w, resize)
    with tf.GradientTape() as outer:
        p = penalty(d, x)
    tape = outer.gradient(p, w).numpy()
    base, numeric = w.numpy(), np.zeros(w.shape)
    for index in np.ndindex(base.shape):
        for sign in (1, -1):
            moved = base.copy()
            moved[index] += sign * eps
            w.assign(moved)
            numeric[index] += sign * float(penalty(d, x)) / (2 * eps)
    w.assign(base)
    return float(np.abs(tape - numeric).max() / np.abs(numeric).max())


def main() -> None:
    x = tf.constant(np.random.default_rng(0).normal(size=(2, 5, 6, 3)))
    # (TF resizes in float32)
    same = float(tf.reduce_max(tf.abs(resize_bilinear(x, (7, 9)) -
                                      tf.cast(tf.image.resize(x, (7, 9)), x.dtype))))
    print(f"forward: the two resizes differ by at most {same:.1e}")
    print(f"dP/dw, tf.image.resize (ResizeBilinearGrad: no_gradient): "
          f"relative error {relative_error(lambda h, s: tf.image.resize(h, s)):.2f}")
    print(f"dP/dw, resize_bilinear as matrix products: "
          f"relative error {relative_error(resize_bilinear):.1e}")


if __name__ == "__main__":
    main()
