"""A seeded generator of TensorFlow programs for the second-order differential
(tests/second_order_differential.py): each program is Python source over float64
images ``[1, 4, 4, 2]`` (its trainable variables ``v0`` ..., one input ``x0``), built
from the templates below, each of one construct: the resizes (every method), pooling,
batch normalisation, depthwise and transposed convolutions, softmax cross-entropy, CTC,
while loops and conds, tf.custom_gradient functions, gathers and segment ops, and
smooth or piecewise-linear fillers. A program takes its first construct from the
templates in turn (seed modulo their number), so N programs hold each construct
N / len(TEMPLATES) times at least. Its outputs are scalars: a sum, a sum of tanh or
of squares of its values.

The body is wrapped two ways with the same variables: a ``tf.Module`` whose
``__call__`` is a ``tf.function`` with an input signature (``tf.saved_model.save``),
and a Keras 3 layer in a functional model (``model.export``)."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

SHAPE = (1, 4, 4, 2)
# a [3, 3, 2, 2] filter made of a value (variables are images too)
FILTER = "tf.reshape(tf.concat([{b}[0, :3, :3, :], {b}[0, 1:, 1:, :]], -1), [3, 3, 2, 2])"
SEGMENTS = "tf.constant([k // 2 for k in range(16)])"
# every cond's predicate (of the input): ``cond_holds`` tells which branch TF runs
COND = "tf.reduce_sum({x}) > 0.0"


@dataclass(frozen=True)
class Template:
    construct: str
    code: str  # {a} {b}: earlier values; {x}: the input (for predicates)
    helpers: tuple[str, ...] = ()


HELPERS = {
    "smooth_square": ("@tf.custom_gradient\ndef smooth_square(t):\n"
                      "    return t * t, lambda dy: dy * 2.0 * t\n"),
    "scaled_tanh": ("@tf.custom_gradient\ndef scaled_tanh(t):\n"
                    "    y = tf.tanh(t)\n"
                    "    return y, lambda dy: dy * (1.0 - y * y)\n"),
    # a backward right at first order whose StopGradient drops y's term at second
    "stopped_tanh": ("@tf.custom_gradient\ndef stopped_tanh(t):\n"
                     "    y = tf.tanh(t)\n"
                     "    return y, lambda dy: dy * tf.stop_gradient(1.0 - y * y)\n"),
}


def _resize(method: str) -> str:
    # TF resizes in float32 (nearest excepted): back to float64 for the rest
    return f"tf.cast(tf.image.resize({{a}}, [6, 6], method={method!r}), tf.float64)" \
        "[:, 1:5, 1:5, :]"


T = Template
TEMPLATES = [
    T("resize_bilinear", _resize("bilinear")),
    T("resize_nearest", _resize("nearest")),
    T("resize_bicubic", _resize("bicubic")),
    T("resize_area", _resize("area")),
    T("resize_lanczos3", _resize("lanczos3")),
    T("resize_mitchellcubic", _resize("mitchellcubic")),
    T("resize_gaussian", _resize("gaussian")),
    T("max_pool", "tf.nn.max_pool2d({a}, 2, 1, 'SAME')"),
    T("avg_pool", "tf.nn.avg_pool2d({a}, 2, 1, 'SAME') * {b}"),
    T("batch_norm", "tf.nn.batch_normalization({a}, *tf.nn.moments({a}, [0, 1, 2]), "
                    "offset={b}[0, 0, 0], scale=None, variance_epsilon=1e-3)"),
    T("conv2d", "tf.nn.conv2d({a}, " + FILTER + ", 1, 'SAME')"),
    T("depthwise_conv2d", "tf.nn.depthwise_conv2d({a}, tf.reshape({b}[0, :3, :3, :], "
                          "[3, 3, 2, 1]), [1, 1, 1, 1], 'SAME')"),
    T("conv2d_transpose", "tf.nn.conv2d_transpose({a}, " + FILTER + ", [1, 4, 4, 2], 1, "
                          "'SAME')"),
    T("softmax_cross_entropy", "{b} * tf.nn.softmax_cross_entropy_with_logits("
                               "labels=tf.nn.softmax({b}), logits={a})[..., None]"),
    T("sparse_softmax_cross_entropy", "{b} * tf.nn.sparse_softmax_cross_entropy_with_logits("
                                      "labels=tf.constant([[[0, 1, 1, 0]] * 4]), "
                                      "logits={a})[..., None]"),
    T("ctc", "{b} * tf.reduce_sum(tf.compat.v1.nn.ctc_loss(tf.SparseTensor("
             "[[0, 0], [1, 0]], [1, 2], [2, 1]), tf.reshape({a}, [4, 2, 4]), [4, 4]))"),
    # (a Keras export traces with the batch size unknown: the loop keeps its shape)
    T("while", "tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.reshape("
               "tf.tanh(h * {b}), [1, 4, 4, 2])), [tf.constant(0), {a}])[1]"),
    T("while_resize", "tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.reshape("
                      "tf.cast(tf.image.resize(h, [6, 6]), tf.float64)[:, 1:5, 1:5, :] * {b}, "
                      "[1, 4, 4, 2])), [tf.constant(0), {a}])[1]"),
    T("cond", "tf.cond(" + COND + ", lambda: tf.tanh({a}) * {b}, lambda: {a} - {b})"),
    T("custom_gradient", "smooth_square({a}) * {b}", ("smooth_square",)),
    T("custom_gradient_tanh", "scaled_tanh({a} + {b})", ("scaled_tanh",)),
    T("custom_gradient_stopped", "stopped_tanh({a}) * {b}", ("stopped_tanh",)),
    T("gather", "tf.gather({a}, [3, 0, 2, 1], axis=2) * {b}"),
    T("unsorted_segment_sum", "tf.reshape(tf.math.unsorted_segment_sum(tf.reshape({a} * {b}, "
                              "[16, 2]), tf.constant([k % 16 for k in range(16)]), 16), "
                              "[1, 4, 4, 2])"),
    T("segment_max", "tf.reshape(tf.tile(tf.math.segment_max(tf.reshape({a}, [16, 2]), "
                     + SEGMENTS + "), [2, 1]), [1, 4, 4, 2])"),
    T("sparse_segment_mean", "tf.reshape(tf.tile(tf.sparse.segment_mean(tf.reshape({a}, "
                             "[16, 2]), tf.range(16), " + SEGMENTS + "), [2, 1]), "
                             "[1, 4, 4, 2]) * {b}"),
    T("softplus", "tf.nn.softplus({a}) - {b}"),
    T("product", "{a} * {b}"),
    T("tanh", "tf.tanh({a} + 0.5 * {b})"),
    T("relu", "tf.nn.relu({a}) + {b}"),
    T("maximum", "tf.maximum({a}, {b})"),
]
FILLERS = [t for t in TEMPLATES if t.construct in
           ("softplus", "product", "tanh", "relu", "maximum", "conv2d", "max_pool")]
READOUTS = ("tf.reduce_sum({t})", "tf.reduce_sum(tf.tanh({t}))", "tf.reduce_sum({t} * {t})")


@dataclass
class Program:
    seed: int
    construct: str  # the construct it was built around
    variables: dict[str, list[float]]  # name -> its values, flattened
    statements: list[tuple[str, Template]]  # (name, template with its code filled in)
    outputs: dict[str, str]
    helpers: list[str] = field(default_factory=list)

    @property
    def single_precision(self) -> bool:
        """Whether part of it computes in float32 (a resize): finite differences then
        take a larger step and a looser tolerance."""
        return any("resize" in t.construct for _, t in self.statements)

    @property
    def constructs(self) -> list[str]:
        return [t.construct for _, t in self.statements]

    def body_lines(self) -> list[str]:
        lines = [f"{v} = tf.convert_to_tensor(self.{v})" for v in self.variables]
        lines += [f"{n} = {t.code}" for n, t in self.statements]
        returned = ", ".join(f"{k!r}: {e}" for k, e in self.outputs.items())
        return lines + [f"return {{{returned}}}"]

    def source(self) -> str:
        """Python source defining ``build_module()`` and ``build_keras()``."""
        module_body = "\n".join("        " + line for line in self.body_lines())
        keras_body = "\n".join("            " + line for line in self.body_lines())
        module_vars = "\n".join(
            f"        self.{k} = tf.Variable(tf.reshape(tf.constant({v!r}, tf.float64), "
            f"{list(SHAPE)}), name={k!r})" for k, v in self.variables.items())
        keras_vars = "\n".join(
            f"            self.{k} = self.add_weight(shape={SHAPE}, name={k!r}, "
            f"dtype='float64', initializer=keras.initializers.Constant("
            f"np.reshape({v!r}, {SHAPE})))" for k, v in self.variables.items())
        helpers = "\n\n".join(HELPERS[h] for h in self.helpers)
        return f'''# second-order program {self.seed} ({self.construct})
import numpy as np
import tensorflow as tf

{helpers}

class Program(tf.Module):
    def __init__(self):
        super().__init__()
{module_vars}

    def body(self, x0):
{module_body}

    @tf.function(input_signature=[tf.TensorSpec({list(SHAPE)}, tf.float64, name="x0")],
                 autograph=False)
    def __call__(self, x0):
        return self.body(x0)


def build_module():
    return Program()


def build_keras():
    import keras

    class ProgramLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__(dtype="float64")
{keras_vars}

        def call(self, x0):
{keras_body}

    x0 = keras.Input(shape={SHAPE[1:]}, batch_size=1, dtype="float64", name="x0")
    return keras.Model(x0, ProgramLayer()(x0))
'''


def _generic(value: float) -> float:
    """A variable's value, rounded for the program's text, never 0: an exact zero meets
    a branch or a difference that is exactly zero at a maximum's or ReLU's kink (seed
    80: ``max(x0 - x0, v1)``), where no second derivative exists and finite
    differences decide nothing. The draws stay the same, so no other seed changes."""
    rounded = round(value, 3)
    return rounded if rounded != 0 else math.copysign(0.001, value)


def generate(seed: int) -> Program:
    """The program of ``seed``: 1-2 variables, 2-4 statements (the first of construct
    ``TEMPLATES[seed % len(TEMPLATES)]``, the others fillers or any construct), 1-2
    scalar outputs."""
    rng = random.Random(seed)
    first = TEMPLATES[seed % len(TEMPLATES)]
    size = SHAPE[1] * SHAPE[2] * SHAPE[3]
    variables = {f"v{i}": [_generic(rng.uniform(-1.2, 1.2)) for _ in range(size)]
                 for i in range(rng.randint(1, 2))}
    pool = ["x0", *variables]
    statements: list[tuple[str, Template]] = []
    for k in range(rng.randint(2, 4)):
        template = first if k == 0 else (rng.choice(TEMPLATES) if rng.random() < 0.3
                                          else rng.choice(FILLERS))
        a = pool[-1] if k > 0 and rng.random() < 0.7 else rng.choice(pool)
        b = rng.choice(pool)
        code = template.code.format(a=a, b=b, x="x0")
        statements.append((f"t{k}", Template(template.construct, code, template.helpers)))
        pool.append(f"t{k}")
    temps = [n for n, _ in statements]
    outputs = {"out0": rng.choice(READOUTS).format(t=temps[-1])}
    if rng.random() < 0.4:
        outputs["out1"] = rng.choice(READOUTS).format(t=rng.choice(temps))
    helpers = sorted({h for _, t in statements for h in t.helpers})
    return Program(seed, first.construct, variables, statements, outputs, helpers)


def point(seed: int) -> Any:
    """The input the differential evaluates program ``seed`` at (its first draw)."""
    import numpy as np

    return np.random.default_rng(seed).normal(size=SHAPE)


def cond_holds(x: Any) -> bool:
    """COND at the input ``x`` (the branch every cond of the program runs)."""
    return bool(x.sum() > 0.0)
