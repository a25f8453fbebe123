"""Speed and agreement of the numerical gradient check.

1. A Keras ResNet50 (weights=None, 224x224, built here): ``opregistry.gradcheck`` in
   directional mode, float64 (the model is cloned in float64), every variable and the
   input, in this process. Target: well under a minute on a 2-core machine. The obvious
   alternative, a full Jacobian of the 25.6M parameters by finite differences, needs
   two forward passes per parameter: its time is estimated from the measured forward
   pass, not run.
2. Kinks: an untrained Keras MobileNetV2 (weights=None, 96x96): zero padding, zero
   batch-norm betas and means put units exactly on ReLU6 kinks, so some betas are
   honestly non-smooth at that point; with small random betas the same check is clean.
3. Agreement: a small model with a correct part and parts with known defects (a
   custom gradient scaled by 2, an argmax head, a gradient through tf.round), checked
   with the full Jacobian and with the directional check: the verdicts per target must
   be the same.

Run:  python bench/gradcheck_speed.py [--skip-resnet]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from opregistry import gradcheck  # noqa: E402


def resnet() -> None:
    model = tf.keras.applications.ResNet50(weights=None)
    x = np.random.default_rng(0).standard_normal((1, 224, 224, 3))
    start = time.perf_counter()
    result = gradcheck(model, x, mode="directional")
    took = time.perf_counter() - start
    verdicts: dict[str, int] = {}
    for c in result.checks:
        verdicts[c.verdict] = verdicts.get(c.verdict, 0) + 1
    forward = tf.function(lambda t: model(t, training=False))
    forward(x.astype(np.float32))
    t0 = time.perf_counter()
    for _ in range(3):
        forward(x.astype(np.float32))
    one = (time.perf_counter() - t0) / 3
    params = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    print(f"ResNet50 (weights=None): {len(result.checks)} targets "
          f"({len(model.trainable_variables)} variables + the input), {params:,} parameters")
    print(f"  directional gradcheck ({result.dtype}), {result.forward_passes} forward "
          f"passes: {took:6.1f} s   verdicts: {verdicts}")
    print(f"  full finite-difference Jacobian (estimate: 2 x {params:,} float32 forward "
          f"passes of {one:.3f} s): {2 * params * one / 86400:,.0f} days")
    print(f"  ratio: {2 * params * one / took:,.0f}x")
    # why the default step is below eps^(1/3): relu kinks crossed inside the step
    classic = gradcheck(model, x, mode="directional", analyse=False,
                        step=np.finfo(np.float64).eps ** (1 / 3))
    for label, r in ((f"step {result.tolerance.step:.0e} (default)", result),
                     (f"step {classic.tolerance.step:.1e} (eps^(1/3))", classic)):
        errors = sorted(c.max_abs_error or 0.0 for c in r.checks)
        print(f"  {label}: abs error max {errors[-1]:.1e}, median "
              f"{errors[len(errors) // 2]:.1e} (tolerance {r.tolerance.atol:.0e} * "
              f"max(1, |output|))")


class Small(tf.Module):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(1)
        self.w1 = tf.Variable(rng.standard_normal((4, 8)), name="w1")
        self.w2 = tf.Variable(rng.standard_normal((8, 3)), name="w2")
        self.b2 = tf.Variable(rng.standard_normal(3), name="b2")
        self.s = tf.Variable(rng.standard_normal((3, 1)), name="s")

    def __call__(self, x):
        @tf.custom_gradient
        def doubled(t):
            return tf.tanh(t), lambda dy: 2.0 * dy * (1 - tf.tanh(t) ** 2)

        h = doubled(tf.matmul(x, self.w1))
        logits = tf.matmul(h, self.w2) + self.b2
        return {"loss": tf.reduce_sum(logits ** 2),
                "picked": tf.cast(tf.argmax(logits, axis=1), tf.float64) * self.b2[0],
                "rounded": tf.reduce_sum(tf.round(tf.matmul(logits, self.s)))}


def agreement() -> None:
    model = Small()
    x = np.random.default_rng(2).standard_normal((5, 4))
    full = gradcheck(model, x, mode="full")
    directional = gradcheck(model, x, mode="directional", directions=2)
    key = lambda c: (c.output, c.target)  # noqa: E731
    a = {key(c): c.verdict for c in full.checks}
    b = {key(c): c.verdict for c in directional.checks}
    print("small model: verdict per (output, target), full Jacobian vs directional")
    for k in sorted(a):
        mark = "" if a[k] == b.get(k) else "   <-- DISAGREE"
        print(f"  {k[0]:8} {k[1]:4} {a[k]:10} {b.get(k, '-'):10}{mark}")
    same = sum(a[k] == b.get(k) for k in a)
    print(f"  agreement: {same}/{len(a)}  (forward passes: full {full.forward_passes}, "
          f"directional {directional.forward_passes})")


def kinks() -> None:
    model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3),
                                              classes=10)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 96, 96, 3))
    for label in ("as initialised (betas 0)", "betas ~ N(0, 0.1)"):
        start = time.perf_counter()
        result = gradcheck(model, x)
        took = time.perf_counter() - start
        verdicts: dict[str, int] = {}
        for c in result.checks:
            verdicts[c.verdict] = verdicts.get(c.verdict, 0) + 1
        ops = sorted({b.op for c in result.problems for b in c.stops})
        print(f"MobileNetV2 {label}: {verdicts} in {took:.1f} s"
              + (f"; ops named: {', '.join(ops)}" if ops else ""))
        for v in model.trainable_variables:
            if v.path.endswith("beta"):
                v.assign(rng.normal(0, 0.1, v.shape))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-resnet", action="store_true")
    args = parser.parse_args()
    agreement()
    if not args.skip_resnet:
        resnet()
    kinks()


if __name__ == "__main__":
    main()
