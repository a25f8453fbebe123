"""Steps per second with and without opregistry.guard, side by side in one run.

Keras ``fit`` of a small CNN (the guard analyses the traced train step once, at the
first step; target: at most 2% slower after it) and an eager custom loop over the
same CNN (every op recorded while the tape records; report the ratio, target <= 25%).
Then the cost at trace time of a train step with many gradient calls (a WGAN-GP step:
three critic updates, each with a gradient penalty, and a generator update; traced
twice, as its first call creates the optimizers' variables: 14 gradient calls), in
CPU seconds of the process; ``--baseline DIR`` measures the same with the opregistry
of another checkout (say, an older commit) in a second process, side by side.

    python bench/guard_overhead.py [--steps 60] [--repeats 3] [--case traced]
        [--baseline /path/to/older/checkout]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from typing import Any

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
    callbacks: list[Any] = [GradientGuard(), clock] if guarded else [clock]  # Keras's
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


def wgan_gp_models() -> tuple[keras.Model, keras.Model]:
    keras.utils.set_random_seed(0)
    z = keras.Input((16,))
    h = keras.layers.Reshape((7, 7, 16))(keras.layers.Dense(7 * 7 * 16)(z))
    h = keras.layers.Conv2D(16, 3, padding="same")(keras.layers.UpSampling2D()(h))
    h = keras.layers.LeakyReLU(0.2)(keras.layers.BatchNormalization()(h))
    h = keras.layers.UpSampling2D()(h)
    generator = keras.Model(z, keras.layers.Conv2D(1, 3, padding="same",
                                                   activation="tanh")(h))
    image = keras.Input((28, 28, 1))
    h = keras.layers.LeakyReLU(0.2)(keras.layers.Conv2D(16, 5, strides=2,
                                                        padding="same")(image))
    h = keras.layers.LeakyReLU(0.2)(keras.layers.Conv2D(32, 5, strides=2,
                                                        padding="same")(h))
    h = keras.layers.Flatten()(keras.layers.Dropout(0.3)(h))
    return generator, keras.Model(image, keras.layers.Dense(1)(h))


def wgan_gp_step(generator: keras.Model, critic: keras.Model) -> tf.types.experimental.\
        PolymorphicFunction:
    """keras-io's WGAN-GP train step, shortened: 7 gradient calls per trace."""
    g_opt, c_opt = keras.optimizers.Adam(1e-4), keras.optimizers.Adam(1e-4)

    def penalty(real: tf.Tensor, fake: tf.Tensor) -> tf.Tensor:
        mixed = real + tf.random.uniform([8, 1, 1, 1]) * (fake - real)
        with tf.GradientTape() as tape:
            tape.watch(mixed)
            score = critic(mixed, training=True)
        grad = tape.gradient(score, [mixed])[0]
        norm = tf.sqrt(tf.reduce_sum(tf.square(grad), axis=[1, 2, 3]))
        return tf.reduce_mean((norm - 1.0) ** 2)

    @tf.function
    def step(real: tf.Tensor) -> tf.Tensor:
        for _ in range(3):
            with tf.GradientTape() as tape:
                fake = generator(tf.random.normal((8, 16)), training=True)
                loss = tf.reduce_mean(critic(fake, training=True)) - \
                    tf.reduce_mean(critic(real, training=True)) + \
                    10.0 * penalty(real, fake)
            grads = tape.gradient(loss, critic.trainable_variables)
            c_opt.apply_gradients(zip(grads, critic.trainable_variables))
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(critic(generator(tf.random.normal((8, 16)),
                                                      training=True), training=True))
        grads = tape.gradient(g_loss, generator.trainable_variables)
        g_opt.apply_gradients(zip(grads, generator.trainable_variables))
        return g_loss

    return step


ANALYSIS = [0.0]  # CPU seconds inside the guard's analysis of gradient calls


def _time_analysis() -> None:
    from opregistry.guard.session import Session

    inspect = Session.inspect

    def timed(self: Session, *args: Any) -> None:
        start = time.process_time()
        try:
            inspect(self, *args)
        finally:
            ANALYSIS[0] += time.process_time() - start

    Session.inspect = timed  # type: ignore[method-assign,assignment]  # timed for this run


def traced_trials(repeats: int) -> dict[str, list[float]]:
    """CPU seconds of the first call (both traces) of a fresh WGAN-GP step, without
    and with a guard, alternating; and the guard's own share."""
    _time_analysis()
    real = tf.random.normal((8, 28, 28, 1))
    wgan_gp_step(*wgan_gp_models())(real)  # TF's own first-time costs
    with opregistry.guard(summary=False):  # and the guard's (its database, its facts)
        wgan_gp_step(*wgan_gp_models())(real)
    out: dict[str, list[float]] = {"plain": [], "guarded": [], "analysis": [],
                                   "calls": []}
    for k in range(repeats):
        for guarded in ((False, True) if k % 2 == 0 else (True, False)):
            step = wgan_gp_step(*wgan_gp_models())
            guard = opregistry.guard(summary=False).start() if guarded else None
            ANALYSIS[0] = 0.0
            start = time.process_time()
            try:
                step(real)
            finally:
                spent = time.process_time() - start
                if guard is not None:
                    guard.stop()
            if guard is None:
                out["plain"].append(spent)
            else:
                out["guarded"].append(spent)
                out["analysis"].append(ANALYSIS[0])
                out["calls"].append(guard.session.calls)
    return out


def traced_report(repeats: int, baseline: str | None) -> None:
    runs = [("this checkout", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
    if baseline:
        runs.append((f"baseline {baseline}", os.path.abspath(baseline)))
    print(f"traced WGAN-GP step, first call (2 traces), CPU seconds; {repeats} pairs of "
          "runs, order alternating")
    for label, root in runs:
        env = dict(os.environ, PYTHONPATH=root)
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--case",
                               "traced-json", "--repeats", str(repeats)], env=env,
                              capture_output=True, text=True, cwd=root, check=False)
        if done.returncode != 0:
            print(f"  {label}: failed\n{done.stderr[-2000:]}")
            continue
        found = json.loads(done.stdout.strip().splitlines()[-1])
        p, g = statistics.median(found["plain"]), statistics.median(found["guarded"])
        a = statistics.median(found["analysis"])
        print(f"  {label} ({os.path.relpath(found['module'], root)}): gradient calls "
              f"{sorted(set(found['calls']))}")
        print(f"    without the guard {p:6.2f} s, with it {g:6.2f} s "
              f"(guarded / plain {g / p:.2f}); the guard's analysis {a:5.2f} s")


def _spread(rates: list[float]) -> str:
    return f"{min(rates):.1f} .. {max(rates):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--case", choices=["all", "fit", "eager", "traced", "traced-json"],
                        default="all")
    parser.add_argument("--baseline", help="another checkout's root, for the traced case")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.case == "traced-json":  # one side of the traced case, in its own process
        print(json.dumps({**traced_trials(args.repeats), "module": opregistry.__file__}))
        return
    if args.case == "traced":
        traced_report(args.repeats, args.baseline)
        return
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32 * args.steps, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, size=32 * args.steps)
    warnings.simplefilter("ignore")
    fit_rate(False, 5, x, y)  # the process's own first-time costs, measured by neither
    for label, measure in (("Keras fit, small CNN", fit_rate),
                           ("eager custom loop, same CNN", eager_rate)):
        if args.case != "all" and not label.startswith(
                {"fit": "Keras", "eager": "eager"}[args.case]):
            continue
        plain: list[float] = []
        guarded: list[float] = []
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
    if args.case == "all":
        traced_report(args.repeats, args.baseline)

if __name__ == "__main__":
    main()
