"""A seeded grammar of programs for the XLA differential (tests/xla_differential.py):
programs in the layout of tests/programs.py (``Program``: variables ``v0``... and float
inputs ``x0``... of shape [2, 3], statements, several outputs), whose statements are the
constructs that decide whether a loaded training step compiles under XLA: ops XLA has
no kernel for (forward) or whose gradient it refuses, ``tf.map_fn`` / ``tf.scan`` /
``tf.foldl``, ``tf.cond`` / ``tf.switch_case`` (branches whose gradient needs a value
computed inside them, and branches whose gradient does not), while loops with and
without ``maximum_iterations`` reached by the variables or only by an input,
TensorArrays of fixed and dynamic size, next to differentiable filler. A program takes
its first construct from the families in turn (seed modulo their number), so N programs
cover each family N / len(FAMILIES) times at least; its 1-3 outputs use random
statements, so some outputs' paths hold the construct and others not.
"""
from __future__ import annotations

import random

from programs import SHAPE, Program, Template

T = Template
FILLER = [
    T("smooth", "{a} * {b}", concern=False),
    T("smooth", "tf.tanh({a} + 0.5 * {b})", concern=False),
    T("smooth", "tf.sin({a}) * {b}", concern=False),
    T("smooth", "tf.matmul(tf.matmul({a}, {b}, transpose_b=True), {c})", concern=False),
    T("smooth", "tf.nn.softplus({a}) - {b}", concern=False),
    T("smooth", "{a} + {b}", concern=False),
]
_PRED = "tf.reduce_sum({x}) > 0.0"
CONSTRUCTS = [
    # an op XLA has no kernel for, on the forward pass
    T("no_kernel_forward", "tf.reshape(tf.nn.max_pool_with_argmax(tf.reshape({a}, "
      "[1, 2, 3, 1]), [1, 2, 1, 1], [1, 2, 1, 1], 'VALID')[0], [1, 3]) * {b}",
      ("MaxPoolWithArgmax",)),
    # forward compiles, its gradient (ResizeNearestNeighborGrad) does not
    T("gradient_refused", "tf.reshape(tf.image.resize(tf.reshape({a}, [1, 2, 3, 1]), "
      "[4, 6], method='nearest')[:, ::2, ::2, :], [2, 3]) * {b}",
      ("ResizeNearestNeighbor",)),
    T("map_fn", "tf.map_fn(lambda r: tf.sin(r * {b}[0]), {a})", ("TensorListGetItem",)),
    T("map_fn_input", "tf.map_fn(lambda r: tf.sin(r), {x}) * {b}", ("TensorListGetItem",)),
    T("scan", "tf.scan(lambda s, r: s * 0.5 + r * {b}[0], {a})", ("TensorListGetItem",)),
    T("foldl", "tf.ones([2, 3]) * tf.foldl(lambda s, r: s + tf.sin(r) * {b}[0], {a})",
      ("TensorListGetItem",)),
    T("cond_intermediate", f"tf.cond({_PRED}, lambda: tf.sin({{a}}) * {{b}}, "
      "lambda: {a} + {b})", ("If",), predicate=("x",)),
    T("cond_arguments", f"tf.cond({_PRED}, lambda: {{a}} * {{b}}, "
      "lambda: tf.round({a}) + {b})", ("If",), predicate=("x",)),
    T("switch_case_intermediate", f"tf.switch_case(tf.cast({_PRED}, tf.int32), "
      "[lambda: tf.tanh({a}) * {b}, lambda: {a} - {b}])", ("Case",), predicate=("x",)),
    T("switch_case_arguments", f"tf.switch_case(tf.cast({_PRED}, tf.int32), "
      "[lambda: {a} * 2.0 + {b}, lambda: {a} - {b}])", ("Case",), predicate=("x",)),
    T("while_bounded", "tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, "
      "tf.tanh(h * {b})), [tf.constant(0), {a}], maximum_iterations=3)[1]", ("While",)),
    T("while_unbounded", "tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, "
      "tf.tanh(h * {b})), [tf.constant(0), {a}])[1]", ("While",)),
    T("while_input_bounded", "tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, "
      "tf.tanh(h * 1.5)), [tf.constant(0), {x}], maximum_iterations=3)[1] * {b}",
      ("While",)),
    T("while_input_unbounded", "tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, "
      "tf.tanh(h * 1.5)), [tf.constant(0), {x}])[1] * {b}", ("While",)),
    T("tensor_array_sized", "tf.TensorArray(tf.float32, size=2).write(0, {a} * {b})"
      ".write(1, {b}).stack()[0]", ("TensorListSetItem",)),
    T("tensor_array_dynamic", "tf.TensorArray(tf.float32, size=0, dynamic_size=True)"
      ".write(0, {a} * {b}).write(1, {b}).stack()[1]", ("TensorListSetItem",)),
]
FAMILIES = [t.family for t in CONSTRUCTS]


def generate(seed: int) -> Program:
    """The program of ``seed``: 1-2 variables, 1-2 inputs, 2-4 statements (the first of
    family ``FAMILIES[seed % len(FAMILIES)]``, later ones filler or other constructs),
    1-3 outputs, the first using the first statement."""
    rng = random.Random(seed)
    first = CONSTRUCTS[seed % len(CONSTRUCTS)]
    variables = {f"v{i}": [[round(rng.uniform(-1.5, 1.5), 2) for _ in range(SHAPE[1])]
                           for _ in range(SHAPE[0])] for i in range(rng.randint(1, 2))}
    inputs = [f"x{i}" for i in range(rng.randint(1, 2))]
    pool = list(variables) + inputs
    statements: list[tuple[str, Template]] = []
    for k in range(rng.randint(2, 4)):
        template = first if k == 0 else (rng.choice(CONSTRUCTS) if rng.random() < 0.25
                                         else rng.choice(FILLER))
        picked = [rng.choice(pool) for _ in range(3)]
        operands = {"a": picked[0], "b": picked[1], "c": picked[2], "x": rng.choice(inputs)}
        statements.append((f"t{k}", Template(template.family, template.code.format(
            **operands), template.ops, concern=template.concern)))
        pool.append(f"t{k}")
    temps = [n for n, _ in statements]
    outputs = {}
    for j in range(rng.randint(1, 3)):
        chosen = [temps[0]] if j == 0 else rng.sample(temps, rng.randint(1, 2))
        outputs[f"out{j}"] = " + ".join(chosen)
    return Program(seed, first.family, variables, inputs, statements, outputs)


def constructs(program: Program) -> list[str]:
    """The grammar's constructs in ``program`` (filler not counted)."""
    return sorted({t.family for _, t in program.statements if t.concern})
