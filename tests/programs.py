"""A seeded generator of TensorFlow programs for the random-program differential
(tests/random_differential.py): each program is Python source, so a disagreement is
reproduced from its seed alone.

A program is a body over float ``[2, 3]`` values: its trainable variables (``v0`` ...,
shared between outputs), its float inputs (``x0`` ...) and the statements before it.
Every statement is one template of the grammar below; each template belongs to an op
family, and the families cover every way a gradient stops that a model can contain
(ops of effective ``none``, ``no_gradient``, ``missing`` and ``partial``, integer
edges, custom gradients with and without the upstream gradient, Python functions,
control flow, index and mask paths, samplers) next to differentiable ones. Programs
take their first concern from the families in turn (seed modulo their number), so a
batch of N programs covers each family N / len(FAMILIES) times at least.

The body is wrapped two ways with the same variables: a ``tf.Module`` whose
``__call__`` is a ``tf.function`` with an input signature (``tf.saved_model.save``),
and a Keras 3 layer in a functional model (``model.export``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

SHAPE = (2, 3)


@dataclass(frozen=True)
class Template:
    family: str
    code: str  # {a} {b} {c}: earlier values; {x}: a float input (for predicates)
    ops: tuple[str, ...] = ()  # op types of concern the template puts in the graph
    helpers: tuple[str, ...] = ()  # module-level definitions it needs (HELPERS)
    concern: bool = True  # False: differentiable filler
    shape_only: tuple[str, ...] = ()  # operands whose values the result does not use
    # operands that only choose a branch (a cond's predicate): no data path, as check
    # has it (a predicate is not followed; the output is locally constant in it)
    predicate: tuple[str, ...] = ()
    # TF's gradient through it is not the derivative (a stopped path the value does
    # depend on smoothly, a custom gradient that scales): finite differences disagree
    wrong_gradient: bool = False


HELPERS = {
    "py_double": "def py_double(t):\n    return t * 2.0\n",
    "np_double": "def np_double(t):\n    return (t * 2.0).astype(np.float32)\n",
    "half_grad": ("@tf.custom_gradient\ndef half_grad(t):\n"
                  "    return tf.identity(t), lambda dy: dy * 0.5\n"),
    "zero_grad": ("@tf.custom_gradient\ndef zero_grad(t):\n"
                  "    return tf.identity(t), lambda dy: tf.zeros_like(dy)\n"),
}

T = Template
SMOOTH = [
    T("smooth", "{a} * {b}", concern=False),
    T("smooth", "tf.tanh({a} + 0.5 * {b})", concern=False),
    T("smooth", "tf.sin({a}) * {b}", concern=False),
    T("smooth", "tf.matmul(tf.matmul({a}, {b}, transpose_b=True), {c})", concern=False),
    T("smooth", "tf.nn.softplus({a}) - {b}", concern=False),
    T("relu", "tf.nn.relu({a}) + {b}", concern=False),  # a gradient with exact zeros
    T("maximum", "tf.maximum({a}, {b})", concern=False),
    T("igamma", "tf.math.igamma(tf.nn.softplus({a}) + 0.5, tf.nn.softplus({b}) + 0.1)",
      ("Igamma",), concern=False),
    T("floormod", "tf.math.floormod({a}, 0.7) * {b}", ("FloorMod",), concern=False),
]
CONCERNS = [
    T("argmax", "{a} * tf.cast(tf.argmax({b}, axis=1), tf.float32)[:, None]", ("ArgMax",)),
    T("argmin", "{a} + tf.cast(tf.argmin({b}, axis=1), tf.float32)[:, None]", ("ArgMin",)),
    T("round", "tf.round({a} * 3.0) * {b}", ("Round",)),
    T("floor", "tf.floor({a} * 2.0) + {b}", ("Floor",)),
    T("ceil", "tf.math.ceil({a}) * {b}", ("Ceil",)),
    T("rint", "tf.math.rint({a} * 4.0) - {b}", ("Rint",)),
    T("sign", "tf.sign({a}) * 0.5 + {b}", ("Sign",)),  # TF: zeros, not None
    T("floordiv", "tf.math.floordiv({a}, 0.3) * {b}", ("FloorDiv",)),
    T("int_cast", "tf.cast(tf.cast({a} * 10.0, tf.int32), tf.float32) * {b}", ("Cast",)),
    T("int_index", "tf.gather({a}, tf.cast(tf.abs({b}) * 2.0, tf.int32) % 3, axis=1, "
                   "batch_dims=1)", ("Cast",)),
    T("greater", "tf.cast({a} > {b}, tf.float32) * {c}", ("Greater",)),
    T("not_equal", "tf.cast(tf.not_equal({a}, 0.25), tf.float32) * {b}", ("NotEqual",)),
    T("where_mask", "tf.where({a} > 0.0, {b}, {c} * 2.0)", ("Greater",)),
    T("boolean_mask", "tf.ones([2, 3]) * tf.reduce_sum(tf.boolean_mask({a}, {b} > 0.0))",
      ("Where", "Greater")),
    T("top_k_values", "tf.concat([tf.math.top_k({a}, k=2).values, {b}[:, :1]], axis=1)"),
    T("top_k_indices", "tf.cast(tf.math.top_k({a}, k=3).indices, tf.float32) * {b}",
      ("TopKV2",)),
    T("unique", "tf.ones([2, 3]) * tf.reduce_sum(tf.unique(tf.reshape({a}, [-1])).y)",
      ("Unique",)),
    T("stop_gradient", "tf.stop_gradient({a}) * {b}", ("StopGradient",), wrong_gradient=True),
    T("histogram", "tf.reshape(tf.cast(tf.histogram_fixed_width({a}, [-1.0, 1.0], nbins=6), "
                   "tf.float32), [2, 3]) * {b}", ("HistogramFixedWidth",)),
    T("bucketize", "tf.cast(tf.raw_ops.Bucketize(input={a}, boundaries=[-0.5, 0.0, 0.5]), "
                   "tf.float32) + {b}", ("Bucketize",)),
    T("multinomial", "tf.cast(tf.random.stateless_categorical({a}, 3, seed=[3, 4]), "
                     "tf.float32) * {b}", ("StatelessMultinomial",)),
    T("poisson", "tf.random.stateless_poisson([2, 3], seed=[7, 8], lam=tf.nn.softplus({a}) "
                 "+ 0.5, dtype=tf.float32) * {b}", ("StatelessRandomPoisson",)),
    T("normal_sampler", "{a} + tf.random.stateless_normal([2, 3], seed=[1, 2]) * {b}",
      ("StatelessRandomNormalV2",)),
    # TF's gradient for alpha is the implicit reparameterisation one (-dF/dalpha / p(z)),
    # not the derivative of the sampler's own transform at the fixed seed that finite
    # differences measure (seed 105: -0.085 against -0.066)
    T("gamma_sampler", "tf.random.stateless_gamma([2, 3], seed=[5, 6], "
                       "alpha=tf.nn.softplus({a}) + 0.5) * {b}", ("StatelessRandomGammaV3",),
      wrong_gradient=True),
    T("truncated_normal_sampler", "tf.random.stateless_parameterized_truncated_normal("
      "[2, 3], seed=[1, 3], means={a}, stddevs=tf.nn.softplus({b}) + 0.1)",
      ("StatelessParameterizedTruncatedNormal",)),
    # the value follows {a} to six digits, TF's gradient stops at AsString (as at
    # stop_gradient): finite differences see the path TF does not
    T("string", "tf.strings.to_number(tf.strings.as_string({a})) + {b}",
      ("AsString", "StringToNumber"), wrong_gradient=True),
    T("py_function", "tf.reshape(tf.py_function(py_double, [{a}], tf.float32), [2, 3]) + {b}",
      ("EagerPyFunc",), ("py_double",)),
    T("numpy_function", "tf.reshape(tf.numpy_function(np_double, [{a}], tf.float32), [2, 3])"
                        " * {b}", ("PyFunc",), ("np_double",), wrong_gradient=True),
    T("custom_gradient_upstream", "half_grad({a}) * {b}", ("IdentityN",), ("half_grad",),
      wrong_gradient=True),
    T("custom_gradient_zero", "zero_grad({a}) + {b}", ("IdentityN",), ("zero_grad",),
      wrong_gradient=True),
    T("cond", "tf.cond(tf.reduce_sum({x}) > 0.0, lambda: {a} * {b}, "
              "lambda: tf.round({a}) + {c})", ("Round",), predicate=("x",)),
    T("case", "tf.switch_case(tf.cast(tf.reduce_sum({x}) > 0.0, tf.int32), "
              "[lambda: tf.tanh({a}), lambda: tf.floor({b}) * {c}])", ("Floor",),
      predicate=("x",)),
    T("while", "tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h * {b})), "
               "[tf.constant(0), {a}])[1]", ()),
    T("while_blocked", "tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, "
                       "tf.round(h) + {b}), [tf.constant(0), {a}])[1]", ("Round",)),
    T("gather_argmax", "tf.gather({a}, tf.argmax({b}, axis=1), axis=1, batch_dims=1)[:, None]"
                       " * {c}", ("ArgMax",)),
    T("scatter", "tf.tensor_scatter_nd_update({a}, [[0, 1], [1, 2]], {b}[:, 0])", ()),
    T("betainc", "tf.math.betainc(tf.nn.softplus({a}) + 0.5, tf.nn.softplus({b}) + 0.5, "
                 "tf.sigmoid({c}))", ("Betainc",), wrong_gradient=True),
    T("zeta", "tf.math.zeta(tf.nn.softplus({a}) + 1.5, tf.nn.softplus({b}) + 0.5)",
      ("Zeta",), wrong_gradient=True),
    T("polygamma", "tf.math.polygamma(tf.ones_like({a}), tf.nn.softplus({b}) + 0.5)",
      ("Polygamma",), shape_only=("a",)),  # ones_like of a static shape: a Const
    T("pad_constant", "tf.pad({a}[:, :2], [[0, 0], [0, 1]], "
                      "constant_values=tf.reduce_mean({b}))", ("PadV2",), wrong_gradient=True),
    T("prevent_gradient", "tf.raw_ops.PreventGradient(input={a}, message='no') + {b}",
      ("PreventGradient",)),
    # batch normalisation, fused: training (the normalised value, and the batch mean:
    # an output whose upstream TF's gradient ignores, so not the derivative where the
    # mean reaches an output: the op's per-output facts say so) and inference (mean
    # and variance inputs: None)
    T("fused_batch_norm_training", "tf.reshape(tf.compat.v1.nn.fused_batch_norm("
      "tf.reshape({a}, [1, 2, 3, 1]), [1.5], [0.1], is_training=True)[0], [2, 3]) * {b}",
      ("FusedBatchNormV3",)),
    T("fused_batch_norm_mean", "tf.ones([2, 3]) * tf.compat.v1.nn.fused_batch_norm("
      "tf.reshape({a}, [1, 3, 2, 1]), [1.0], [0.0], is_training=True)[1] + {b}",
      ("FusedBatchNormV3",), wrong_gradient=True),
    T("fused_batch_norm_inference", "tf.reshape(tf.compat.v1.nn.fused_batch_norm("
      "tf.reshape({a}, [1, 2, 3, 1]), [1.5], [0.1], mean={b}[0, :1], "
      "variance=tf.nn.softplus({c})[0, :1] + 0.1, is_training=False)[0], [2, 3])",
      ("FusedBatchNormV3",)),
    T("case_predicates", "tf.case([(tf.reduce_sum({x}) > 0.5, lambda: tf.tanh({a})), "
                         "(tf.reduce_sum({x}) < -0.5, lambda: tf.sign({b}) * {c})], "
                         "default=lambda: tf.floor({b}) + {a})", ("Floor", "Sign"),
      predicate=("x",)),
    T("one_hot", "tf.one_hot(tf.argmax({a}, axis=1), 3) * {b}", ("OneHot", "ArgMax")),
    T("is_finite", "tf.cast(tf.math.is_finite(tf.math.log({a})), tf.float32) * {b}",
      ("IsFinite",)),
    T("logical_and", "tf.cast(tf.logical_and({a} > 0.0, {b} < 0.5), tf.float32) * {c}",
      ("LogicalAnd", "Less")),
    T("searchsorted", "tf.cast(tf.searchsorted(tf.constant([[-0.5, 0.0, 0.5]] * 2), {a}), "
                      "tf.float32) * {b}", ("LowerBound",)),
    T("bincount", "tf.reshape(tf.cast(tf.math.bincount(tf.cast(tf.abs({a}) * 2.0, tf.int32),"
                  " minlength=6, maxlength=6), tf.float32), [2, 3]) * {b}",
      ("DenseBincount",)),
    T("in_top_k", "tf.cast(tf.math.in_top_k(tf.constant([0, 1]), {a}, k=2), tf.float32)"
                  "[:, None] * {b}", ("InTopKV2",)),
    T("uniform_sampler", "{a} + tf.random.stateless_uniform([2, 3], seed=[2, 3]) * {b}",
      ("StatelessRandomUniformV2",)),
    T("binomial_sampler", "tf.random.stateless_binomial([2, 3], seed=[1, 5], counts=5.0, "
                          "probs=tf.sigmoid({a}), output_dtype=tf.float32) * {b}",
      ("StatelessRandomBinomial",)),
    T("truncate_mod", "tf.truncatemod({a}, 0.7) * {b}", ("TruncateMod",)),
]
FAMILIES = [t.family for t in CONCERNS]


@dataclass
class Program:
    seed: int
    family: str  # the concern the program was built around
    variables: dict[str, list[list[float]]]
    inputs: list[str]
    statements: list[tuple[str, Template]]  # (name, template) with the code filled in
    outputs: dict[str, str]
    helpers: list[str] = field(default_factory=list)
    save_custom_gradients: bool = True  # False: saved without the gradient functions
    depends: dict[str, set[str]] = field(default_factory=dict)  # value -> targets it uses

    def dependencies(self) -> dict[str, set[str]]:
        """output -> the variables and inputs with a data path to it (values, not shapes)."""
        return {name: set().union(*(self.depends[t] for t in _names_in(expr)))
                for name, expr in self.outputs.items()}

    @property
    def families(self) -> list[str]:
        return sorted({t.family for _, t in self.statements})

    def body_lines(self) -> list[str]:
        """The body: every variable read once, the statements, the outputs."""
        lines = [f"{v} = tf.convert_to_tensor(self.{v})" for v in self.variables]
        lines += [f"{n} = {t.code}" for n, t in self.statements]
        returned = ", ".join(f"{k!r}: {e}" for k, e in self.outputs.items())
        return lines + [f"return {{{returned}}}"]

    def source(self) -> str:
        """Python source defining ``build_module()`` and ``build_keras()``."""
        args = ", ".join(self.inputs)
        spec = ", ".join(f"tf.TensorSpec([2, 3], tf.float32, name={x!r})" for x in self.inputs)
        module_body = "\n".join("        " + line for line in self.body_lines())
        keras_body = "\n".join("            " + line for line in self.body_lines())
        module_vars = "\n".join(f"        self.{k} = tf.Variable({v!r}, name={k!r})"
                                for k, v in self.variables.items())
        keras_vars = "\n".join(
            f"            self.{k} = self.add_weight(shape=(2, 3), name={k!r}, "
            f"initializer=keras.initializers.Constant({v!r}))"
            for k, v in self.variables.items())
        helpers = "\n\n".join(HELPERS[h] for h in self.helpers)
        keras_inputs = ", ".join(f"keras.Input(shape=(3,), batch_size=2, name={x!r})"
                                 for x in self.inputs)
        return f'''# program {self.seed} ({self.family})
import numpy as np
import tensorflow as tf

{helpers}

class Program(tf.Module):
    def __init__(self):
        super().__init__()
{module_vars}

    def body(self, {args}):
{module_body}

    @tf.function(input_signature=[{spec}], autograph=False)
    def __call__(self, {args}):
        return self.body({args})


def build_module():
    return Program()


def build_keras():
    import keras

    class ProgramLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
{keras_vars}

        def call(self, {args}):
{keras_body}

    inputs = [{keras_inputs}]
    return keras.Model(inputs, ProgramLayer()(*inputs))
'''


def generate(seed: int) -> Program:
    """The program of ``seed``: 1-3 variables, 1-2 inputs, 2-5 statements (the first of
    family ``FAMILIES[seed % len(FAMILIES)]``), 1-3 outputs."""
    rng = random.Random(seed)
    family = CONCERNS[seed % len(CONCERNS)]
    variables = {f"v{i}": [[round(rng.uniform(-1.5, 1.5), 2) for _ in range(SHAPE[1])]
                           for _ in range(SHAPE[0])] for i in range(rng.randint(1, 3))}
    inputs = [f"x{i}" for i in range(rng.randint(1, 2))]
    pool = list(variables) + inputs
    depends = {name: {name} for name in pool}
    statements: list[tuple[str, Template]] = []
    for k in range(rng.randint(2, 5)):
        template = family if k == 0 else (rng.choice(CONCERNS) if rng.random() < 0.4
                                          else rng.choice(SMOOTH))
        picked = rng.sample(pool, min(len(pool), 3))
        while len(picked) < 3:
            picked.append(rng.choice(pool))
        if k > 0 and len(pool) > 3 and rng.random() < 0.7:  # chain: use the last value
            picked[0] = pool[-1]
        operands = {"a": picked[0], "b": picked[1], "c": picked[2], "x": rng.choice(inputs)}
        code = template.code.format(**operands)
        name = f"t{k}"
        depends[name] = set().union(*(depends[v] for k_, v in operands.items()
                                      if f"{{{k_}}}" in template.code and
                                      k_ not in template.shape_only + template.predicate))
        statements.append((name, replace(template, code=code)))
        pool.append(name)
    temps = [n for n, _ in statements]
    outputs = {}
    for j in range(rng.randint(1, 3)):
        chosen = rng.sample(temps, min(len(temps), rng.randint(1, 2)))
        if j == 0 and temps[0] not in chosen:
            chosen[0] = temps[0]  # the family's statement reaches an output
        expr = " + ".join(chosen)
        outputs[f"out{j}"] = f"tf.reduce_sum({expr})" if rng.random() < 0.3 else expr
    helpers = sorted({h for _, t in statements for h in t.helpers})
    custom = any(h in ("half_grad", "zero_grad") for h in helpers)
    return Program(seed, family.family, variables, inputs, statements, outputs, helpers,
                   save_custom_gradients=not (custom and rng.random() < 0.3), depends=depends)


def _names_in(expr: str) -> list[str]:
    return [w for w in expr.replace("(", " ").replace(")", " ").replace("+", " ").split()
            if w.startswith("t") and w[1:].isdigit()]

