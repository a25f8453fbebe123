"""Call public TensorFlow names with generated arguments and record the ops TF puts in
the graph (a child process of tests/test_python_name_traces.py: it calls arbitrary
public functions, some of which change TF's global state, so never in a test worker).

Reads a JSON list of names on stdin; prints one JSON object: name -> {"family": the
argument family the call traced with, "ops": the op types of the traced graph and of
every function in its library (cond and loop bodies), without Placeholder and Const} or
{"family": null, "why": the reason it cannot be called}.

Arguments are generated from each function's signature, by parameter name, in
families tried in order (a square float matrix, an image batch, a float vector, a
complex matrix, an int matrix, a float matrix of unknown batch size, a complex
image batch); the first family
whose call builds an op that is not plumbing wins. Sizes and scalars come from a
``random.Random`` seeded per function, so a run is the same on every machine.
"""
from __future__ import annotations

import inspect
import json
import random
import sys
from typing import Any

# ops that say nothing of what a call does: a call building only these did nothing
# with its arguments (a float cast to float, a static shape read as a constant)
PLUMBING = frozenset({"Placeholder", "Const", "Identity", "NoOp", "IdentityN"})

# modules and names never called: they change the process (eager mode, devices,
# seeds, summaries' writers), touch files or the network, or need a running cluster
NEVER_CALLED = ("tf.config.", "tf.compat.v1.config.", "tf.distribute.",
                "tf.compat.v1.distribute.", "tf.tpu.", "tf.compat.v1.tpu.",
                "tf.saved_model.", "tf.compat.v1.saved_model.", "tf.summary.",
                "tf.compat.v1.summary.", "tf.data.", "tf.compat.v1.data.", "tf.io.gfile.",
                "tf.compat.v1.io.gfile.", "tf.compat.v1.gfile.", "tf.keras.",
                "tf.compat.v1.keras.", "tf.train.", "tf.compat.v1.train.", "tf.lite.",
                "tf.compat.v1.lite.", "tf.profiler.", "tf.compat.v1.profiler.",
                "tf.debugging.experimental.", "tf.compat.v1.debugging.experimental.",
                "tf.experimental.dtensor.", "tf.test.", "tf.compat.v1.test.",
                "tf.compat.v1.app.", "tf.compat.v1.flags.", "tf.compat.v1.logging.",
                "tf.autograph.", "tf.compat.v1.autograph.")
NEVER_CALLED_VERBS = ("enable_", "disable_", "set_", "reset_", "clear_", "experimental_")

FLOATS = {"x", "y", "input", "a", "b", "tensor", "data", "inputs", "value", "values",
          "labels", "predictions", "features", "input_tensor", "x1", "x2", "logits",
          "params", "weights", "t", "z", "signal", "y_true", "y_pred", "matrix", "rhs",
          "diagonal", "bias", "scores", "v", "input_", "image", "images", "chol",
          "lower_upper", "lhs", "grad", "dy", "arr", "embeddings", "coeffs", "dividend",
          "divisor", "u", "w", "m", "x_in", "x_or_y", "target", "targets", "condition"}
LISTS = {"tensors", "elems", "xs", "input_list", "inputs_list"}
INTS = {"k": 2, "num": 2, "n": 2, "depth": 3, "num_segments": 3, "num_classes": 3,
        "num_or_size_splits": 2, "max_output_size": 2, "nbins": 4, "num_true": 1,
        "num_sampled": 2, "range_max": 4, "block_size": 2, "axis": -1, "dim": -1}
SCALARS = {"delta", "max_delta", "contrast_factor", "saturation_factor", "alpha", "rate",
           "epsilon", "gamma", "clip_norm", "lower", "upper", "stddev", "mean",
           "threshold", "minval", "maxval", "clip_value_min", "clip_value_max", "beta",
           "fraction", "central_fraction", "scale", "offset", "momentum", "decay",
           "keep_prob", "lam", "temperature", "l2", "l1"}


# functions of complex numbers, called with one first (on a real input TF builds a sign
# test instead of the op: tf.math.angle)
COMPLEX_FIRST = {"angle"}


def families(tf: Any, rng: random.Random, name: str) -> list[tuple[str, Any, list[Any]]]:
    n = rng.randint(3, 5)
    first = [("complex", tf.complex64, [n, n])] if name.rsplit(".", 1)[-1] in COMPLEX_FIRST else []
    return first + [
            ("square", tf.float32, [n, n]), ("image", tf.float32, [2, 2 * n, 2 * n, 3]),
            ("vector", tf.float32, [2 * n]), ("complex", tf.complex64, [n, n]),
            ("int", tf.int32, [n, n]), ("unknown_batch", tf.float32, [None, n]),
            ("complex_image", tf.complex64, [2, 2 * n, 2 * n, 3])]


class NoArgument(Exception):
    """A parameter no generator makes: no family will do."""


def argument(tf: Any, name: str, dtype: Any, shape: list[Any], rng: random.Random) -> Any:
    """The argument for a parameter called ``name`` in one family (placeholders for
    tensors: what a model's traced function holds)."""
    def placeholder(s: list[Any] = shape) -> Any:
        return tf.compat.v1.placeholder(dtype, s)
    rows = shape[0] if shape and shape[0] is not None else 3
    if name in FLOATS:
        return placeholder()
    if name in LISTS:
        return [placeholder(), placeholder()]
    if name in INTS:
        return INTS[name]
    if name in SCALARS:
        return round(rng.uniform(0.1, 0.9), 2)
    if name == "axes":
        return [len(shape) - 1]
    if name in ("indices", "ids", "segment_ids"):  # sorted, in range of any axis
        return tf.constant(sorted(rng.randint(0, 1) for _ in range(rows)))
    if name in ("shape", "size", "output_shape", "dims"):
        return [d or 2 for d in shape]
    if name == "multiples":
        return [2] * len(shape)
    if name == "perm":
        return list(reversed(range(len(shape))))
    if name in ("dtype", "out_type"):  # another dtype than the input's: a real cast
        return tf.int32 if dtype.is_floating or dtype.is_complex else tf.float32
    if name == "seed":
        return (rng.randint(0, 99), rng.randint(0, 99))
    if name in ("fn", "func"):
        return lambda *args: args[0] * 2
    if name == "boxes":
        return tf.compat.v1.placeholder(tf.float32, [rows, 4])
    rank = len(shape)
    if name in ("ksize", "strides", "dilations"):  # a 2x2 window over an image batch
        return [1, 2, 2, 1] if rank == 4 and name == "ksize" else [1] * rank
    if name == "padding":
        return "SAME"
    if name in ("filters", "filter"):  # 3x3, the input's channels to two
        return tf.compat.v1.placeholder(dtype, [3, 3, shape[-1], 2])
    if name in ("bias", "biases", "real", "imag", "img1", "img2", "sorted_sequence"):
        return placeholder([shape[-1]] if name.startswith("bias") else shape)
    if name == "mask":
        return tf.compat.v1.placeholder(tf.bool, shape)
    if name in ("t_list", "tup", "arrays"):
        return [placeholder(), placeholder()]
    if name in ("fft_length", "reps"):
        return [shape[-1]] if name == "fft_length" else [2] * rank
    if name in ("frame_length", "window_length", "num_rows", "num_samples", "num_buckets",
                "repeats", "shift", "frame_step"):
        return 2
    if name in ("begin", "paddings"):
        return [0] * rank if name == "begin" else [[1, 1]] * rank
    if name in ("max_val", "a_min", "a_max", "p", "low", "min", "max", "min_range",
                "max_range"):
        return round(rng.uniform(0.1, 0.9), 2) + (0.0 if name.startswith(("min", "a_min"))
                                                   else 1.0)
    raise NoArgument(f"no generated argument for parameter {name!r}")


def called(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return not (name.startswith(NEVER_CALLED) or last.startswith(NEVER_CALLED_VERBS))


def trace(tf: Any, name: str, fn: Any, seed: int) -> dict[str, Any]:
    from tensorflow.python.framework import func_graph

    rng = random.Random(seed)
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {"family": None, "why": "no signature"}
    required = [p for p in parameters if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    why = "builds only plumbing"
    for family, dtype, shape in families(tf, rng, name):
        graph = func_graph.FuncGraph("call")
        try:
            with graph.as_default():
                args = {p.name: argument(tf, p.name, dtype, shape, rng) for p in required}
                fn(*[args[p.name] for p in required if p.kind != p.KEYWORD_ONLY],
                   **{p.name: args[p.name] for p in required if p.kind == p.KEYWORD_ONLY})
        except NoArgument as error:
            return {"family": None, "why": str(error)}
        except Exception as error:  # noqa: BLE001 - arguments the function refuses
            why = f"refuses the generated arguments ({type(error).__name__})"
            continue
        definition = graph.as_graph_def()
        ops = {node.op for node in definition.node}
        for function in definition.library.function:
            ops.update(node.op for node in function.node_def)
        if ops - PLUMBING:
            return {"family": family, "ops": sorted(ops - {"Placeholder", "Const"})}
    return {"family": None, "why": why}


def main() -> None:
    import warnings

    import tensorflow as tf

    warnings.simplefilter("ignore")
    tf.get_logger().setLevel("ERROR")
    names = json.load(sys.stdin)
    functions: dict[int, Any] = {}
    results: dict[str, Any] = {}
    for index, name in enumerate(names):
        fn: Any = tf
        for part in name.split(".")[1:]:
            fn = getattr(fn, part, None)
        if fn is None or inspect.isclass(fn) or not callable(fn):
            results[name] = {"family": None, "why": "not a function of this TensorFlow"}
        elif not called(name):
            results[name] = {"family": None, "why": "never called (changes the process)"}
        elif id(fn) not in functions:  # aliases (tf.add, tf.math.add) traced once
            functions[id(fn)] = trace(tf, name, fn, seed=index)
            results[name] = functions[id(fn)]
        else:
            results[name] = functions[id(fn)]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
