"""Steps per second with and without opregistry.guard, side by side in one run.

Keras ``fit`` of a small CNN (the guard analyses the traced train step once, at the
first step; target: at most 2% slower after it) and an eager custom loop over the
same CNN (every op recorded while the tape records; report the ratio, target <= 25%).

    python bench/guard_overhead.py [--steps 60] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import opregistry  # noqa: E402
from opregistry.keras import GradientGuard  # noqa: E402


def cnn() -> keras.Model:
    keras.utils.set_random_seed(0)
    inp = keras.Input((32, 32, 3))
    h = keras.layers.Conv2D(16, 3, activation="relu")(inp)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Conv2D(32, 3, activation="relu")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    model = keras.Model(inp, keras.layers.Dense(10)(h))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class Clock(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.ends: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())


CALLS: list[int] = []  # gradient calls the guard saw, per guarded run


def fit_rate(guarded: bool, steps: int, x: np.ndarray, y: np.ndarray) -> float:
    """Steps per second of one fit after its first step: from the median step time,
    which the other processes of a shared machine disturb least."""
    model, clock = cnn(), Clock()
    callbacks = [GradientGuard(), clock] if guarded else [clock]
    model.fit(x, y, batch_size=32, epochs=1, steps_per_epoch=steps, verbose=0,
              callbacks=callbacks)
    if guarded:
        CALLS.append(callbacks[0].guard.session.calls)
    return 1.0 / statistics.median(np.diff(clock.ends[1:]))


def eager_rate(guarded: bool, steps: int, x: np.ndarray, y: np.ndarray) -> float:
    model = cnn()
    optimizer = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    xb, yb = tf.constant(x[:32]), tf.constant(y[:32])

    def step() -> None:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)

    guard = opregistry.guard(summary=False) if guarded else None
    if guard is not None:
        guard.start()
    try:
        step()  # the first step: tracing, and the guard's analysis
        times = []
        for _ in range(steps - 1):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return 1.0 / statistics.median(times)
    finally:
        if guard is not None:
            guard.stop()
            CALLS.append(guard.session.calls)


def _spread(rates: list[float]) -> str:
    return f"{min(rates):.1f} .. {max(rates):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32 * args.steps, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, size=32 * args.steps)
    warnings.simplefilter("ignore")
    fit_rate(False, 5, x, y)  # the process's own first-time costs, measured by neither
    for label, measure in (("Keras fit, small CNN", fit_rate),
                           ("eager custom loop, same CNN", eager_rate)):
        plain, guarded = [], []
        CALLS.clear()
        for k in range(args.repeats):  # interleaved, order alternating: drift hits both
            for guard in ((False, True) if k % 2 == 0 else (True, False)):
                (guarded if guard else plain).append(measure(guard, args.steps, x, y))
        p, g = statistics.median(plain), statistics.median(guarded)
        # each run is paired with the one next to it: the load of a shared machine
        # drifts between runs, less within a pair
        ratios = [b / a for a, b in zip(plain, guarded)]
        print(f"{label} ({args.steps} steps of 32, median step time; "
              f"{args.repeats} pairs of runs, order alternating)")
        print(f"  without the guard  {p:8.1f} steps/s   (runs: {_spread(plain)})")
        print(f"  with the guard     {g:8.1f} steps/s   (runs: {_spread(guarded)})")
        print(f"  gradient calls the guard saw per run: {sorted(set(CALLS))}")
        r = statistics.median(ratios)
        print(f"  guarded / plain, median of the pairs: {r:.3f}  ({(1 - r) * 100:+.1f}% "
              f"slower; pairs {min(ratios):.3f} .. {max(ratios):.3f})")

if __name__ == "__main__":
    main()
