"""Call public TensorFlow names with generated arguments and record the ops TF puts in
the graph: what each name's call really builds, per release (``__main__.py
--name-traces``, run by ``runner.trace_names`` in its own process: it calls arbitrary
public functions, some of which change TF's global state).

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+. TF 2 traces each call in a ``FuncGraph`` (what ``tf.function``
builds); TF 1, whose users build graphs, in a ``tf.Graph`` (control flow v1, reference
variables).

Reads a JSON list of names on stdin; prints one JSON object: name -> {"family": the
argument family the call traced with, "ops": the op types of the traced graph and of
every function in its library (cond and loop bodies), without Placeholder and Const,
and without those only the generated callables built (a body's, a map's fn's, an RNN
cell's: the user's ops)} or {"family": null, "why": the reason it cannot be called}.

Arguments are generated from each function's signature, by parameter name
(``name_arguments``), in families of shapes and dtypes tried in order; the first
family whose call builds an op that is not plumbing wins. A function that refuses
every family with its required parameters is tried again with its optional ones that
default to None (of TF 1's twin parameters, the new name only). Sizes and scalars come
from a ``random.Random`` seeded per function, so a run is the same on every machine.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import random
import sys
from collections import Counter
from typing import Any

from .name_arguments import Call, Family, NoArgument, argument, described, families

# ops that say nothing of what a call does: a call building only these did nothing
# with its arguments (a float cast to float, a static shape read as a constant)
PLUMBING = frozenset({"Placeholder", "Const", "Identity", "NoOp", "IdentityN"})
# and for a check TF decides from the static shape (tf.debugging.assert_rank), the
# shape it reads: the check itself (Assert) is not built
CHECK_PLUMBING = PLUMBING | {"Shape"}

# modules and names never called: they change the process (eager mode, devices,
# seeds, summaries' writers, TF 1's tf.app.run exits), touch files or the network, or
# need a running cluster
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
                "tf.autograph.", "tf.compat.v1.autograph.", "tf.app.", "tf.flags.",
                "tf.logging.", "tf.gfile.", "tf.estimator.", "tf.compat.v1.estimator.")
NEVER_CALLED_VERBS = ("enable_", "disable_", "set_", "reset_", "clear_", "experimental_")


# TF 1's deprecated names of a parameter, with the name that replaced them: a TF 1
# function takes one of the two (tf.compat.v1.nn.conv2d(filter=None, filters=None))
TWINS = {"filter": "filters", "dim": "axis", "input": "input_tensor", "keep_prob": "rate",
         "reduction_indices": "axis", "keep_dims": "keepdims", "ksizes": "sizes",
         "value": "input", "bytes": "input_bytes",
         "block_size": "block_shape", "targets": "labels", "string_tensor": "input",
         "source": "input", "rates": "dilations", "t": "x", "msg": "message"}


def called(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return not (name.startswith(NEVER_CALLED) or last.startswith(NEVER_CALLED_VERBS))


def trace(tf: Any, name: str, fn: Any, seed: int) -> dict[str, Any]:
    """The ops of the first family whose call builds more than plumbing: with the
    required parameters, then (for a function none of them did) with the optional
    ones that default to None and have a generator too (tf.nn.sigmoid_cross_entropy_
    with_logits(labels=None, logits=None); einsum's ``*inputs``)."""
    rng = random.Random(seed)
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {"family": None, "why": "no signature"}
    required = [p for p in parameters if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    optional = [p for p in parameters if p.default is None or (
        p.kind == p.VAR_POSITIONAL and p.name in ("inputs", "args", "tensors", "values"))]
    given = {p.name for p in required + optional}
    # one of two twins: the new one, unless the old one has a value already (required,
    # or a default such as softmax_cross_entropy_with_logits' dim=-1)
    valued = {TWINS[p.name] for p in parameters if p.name in TWINS and p.default is not None}
    optional = [p for p in optional if TWINS.get(p.name) not in given and p.name not in valued]
    refused, plumbing = "", False
    for extra in ([], optional):
        if extra is optional and (not optional or not refused):
            break
        for family in families(tf, rng, name):
            found = call(tf, (name, fn), family, rng, (required, extra))
            if isinstance(found, NoArgument):
                return {"family": None, "why": str(found)}
            if isinstance(found, Exception):
                refused = type(found).__name__
            elif found - (CHECK_PLUMBING if name.rsplit(".", 1)[-1].startswith("assert_")
                          else PLUMBING):
                return {"family": family.name + ("+optional" if extra else ""),
                        "ops": sorted(found - {"Placeholder", "Const"})}
            else:
                plumbing = True
    # a function some family called is callable: it builds only plumbing
    return {"family": None, "why": "builds only plumbing" if plumbing or not refused
            else f"refuses the generated arguments ({refused})"}


def call(tf: Any, function: tuple[str, Any], family: Family, rng: random.Random,
         parameters: tuple[list[Any], list[Any]]) -> set[str] | Exception:
    """The op types one call builds (its graph's and its functions'), or why not."""
    name, fn = function
    required, optional = parameters
    context = Call(name, frozenset(p.name for p in required + optional),
                   *described(inspect.getdoc(fn) or ""))
    graph = new_graph(tf)
    try:
        with graph.as_default():
            args = {p.name: argument(tf, p.name, family, rng, context)
                    for p in required}
            for p in optional:
                try:
                    args[p.name] = argument(tf, p.name, family, rng, context)
                except NoArgument:
                    continue
            positional = [args[p.name] for p in required if p.kind != p.KEYWORD_ONLY]
            keywords = {p.name: args[p.name] for p in required + optional
                        if p.name in args and (p.kind == p.KEYWORD_ONLY or p in optional)
                        and p.kind != p.VAR_POSITIONAL}
            rest = [t for p in optional if p.kind == p.VAR_POSITIONAL and p.name in args
                    for t in (args[p.name] if isinstance(args[p.name], list)
                              else [args[p.name]])]
            fn(*positional, *rest, **keywords)
    except NoArgument as error:
        return error
    except Exception as error:  # noqa: BLE001 - arguments the function refuses
        return error
    definition = graph.as_graph_def()
    built = Counter(node.op for node in definition.node)
    for library_function in definition.library.function:
        built.update(node.op for node in library_function.node_def)
    # the function's own ops: not those only the generated callables built (a loop's
    # body, a map's fn: the user's ops, which the function only runs)
    return {op for op, count in built.items() if count > context.inside[op]}


def new_graph(tf: Any) -> Any:
    """The graph one call is traced in: TF 2's ``tf.function`` graph, TF 1's graph."""
    if tf.__version__.startswith("1."):
        return tf.Graph()
    from tensorflow.python.framework import func_graph

    return func_graph.FuncGraph("call")


def main() -> None:
    import warnings

    import tensorflow as tf

    warnings.simplefilter("ignore")
    if hasattr(tf, "get_logger"):  # TF 1.14+
        tf.get_logger().setLevel("ERROR")
    names = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # what a call prints: not the result
        results = traced(tf, names)
    json.dump(results, sys.stdout)
    sys.stdout.flush()


def public(tf: Any, name: str) -> Any:
    """The object ``name`` (``tf.math.add``) is in this TensorFlow, or None."""
    found: Any = tf
    for part in name.split(".")[1:]:
        try:  # TF 1's lazily loaded modules (tf.contrib) raise on import
            found = getattr(found, part, None)
        except Exception:  # noqa: BLE001 - whatever the module's import raises
            return None
    return found


def traced(tf: Any, names: list[str]) -> dict[str, Any]:
    """Each name's trace, or why it has none."""
    functions: dict[int, Any] = {}
    results: dict[str, Any] = {}
    for index, name in enumerate(names):
        fn = public(tf, name)
        if fn is None or inspect.isclass(fn) or not callable(fn):
            results[name] = {"family": None, "why": "not a function of this TensorFlow"}
        elif not called(name):
            results[name] = {"family": None, "why": "never called (changes the process)"}
        elif id(fn) not in functions:  # aliases (tf.add, tf.math.add) traced once
            functions[id(fn)] = trace(tf, name, fn, seed=index)
            results[name] = functions[id(fn)]
        else:
            results[name] = functions[id(fn)]
    return results
