"""Differential harness: ``opregistry check``'s static verdicts against TensorFlow's own
gradients of the loaded SavedModel, for every (MetaGraph, signature, output, target).

TensorFlow is asked twice: ``tf.GradientTape`` around the loaded signature, and
``tf.gradients`` on the signature's graph (inside a ``tf.function``; for a TF1
SavedModel, in the session graph the loader builds). A loaded function's gradient is
computed for the whole call, so TF returns zeros, not None, for a target that only
another output of the same signature reaches: a gradient counts as given when it is
not None and not all zero at one of two random points. A call or gradient that raises
counts as none, and the output must then be one that ``check`` flags as impossible
to differentiate.

Run:  python tests/differential.py [--out DIR] [--only ResNet50 functions ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GRADIENT, NONE, FAILS = "gradient", "none", "fails"
ZERO = "zero"  # only while answering: settled by the frozen graph (see _connected)


@dataclass
class TFOutput:
    """TensorFlow's answer for one output: per target key, gradient / none / fails."""

    meta_graph: str
    signature: str
    output: str
    variables: dict[tuple[str, ...], str] = field(default_factory=dict)  # paths -> verdict
    inputs: dict[str, str] = field(default_factory=dict)
    how: str = ""  # tape | graph | tf1-graph


@dataclass
class Comparison:
    model: str
    pairs: int = 0  # distinct (MetaGraph, signature, output, target) pairs
    answers: int = 0  # TF answers compared (each pair is asked by tape and by graph)
    outputs: int = 0
    failing_outputs: int = 0
    with_gradient: int = 0  # answers that give a gradient
    without: int = 0  # answers that give none (or raise)
    disagreements: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- TF's answers

def _classify(tf: Any, grad: Any) -> str:
    """gradient, zero (a tensor of zeros) or none (None)."""
    import numpy as np

    if grad is None:
        return NONE
    if isinstance(grad, tf.IndexedSlices):
        grad = grad.values
    return GRADIENT if bool(np.any(np.asarray(grad) != 0)) else ZERO


def _random_inputs(tf: Any, specs: dict[str, Any], seed: int,
                   feeds: dict[str, Any] | None = None) -> dict[str, Any]:
    """A value per input: random by its type, or the one ``feeds`` gives (the indices
    and shape of a SparseTensor a signature takes flat, say)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for key, spec in sorted(specs.items()):
        if feeds and key in feeds:
            out[key] = tf.constant(feeds[key], spec.dtype)
            continue
        shape = [d if d is not None else 2 for d in spec.shape.as_list()] \
            if spec.shape.rank is not None else [2]
        if spec.dtype.is_floating:
            out[key] = tf.constant(rng.uniform(-1.0, 1.0, shape), spec.dtype)
        elif spec.dtype.is_bool:
            out[key] = tf.ones(shape, tf.bool)
        elif spec.dtype.is_integer:
            out[key] = tf.constant(rng.integers(0, 2, shape), spec.dtype)
        elif spec.dtype == tf.string:  # text models: words a tokenizer splits
            out[key] = tf.fill(shape, "The quick brown fox jumped")
        else:
            out[key] = tf.zeros(shape, spec.dtype)
    return out


def _variable_paths(tf: Any, root: Any) -> list[tuple[Any, tuple[str, ...]]]:
    """Every trainable floating variable reachable from the loaded object, with all
    the attribute paths that lead to it (TensorFlow's own object view)."""
    view = tf.train.TrackableView(root)
    paths: dict[int, list[str]] = {id(root): [""]}
    objects = {id(root): root}
    queue = [root]
    for obj in queue:
        try:
            children = view.children(obj)
        except Exception:  # noqa: BLE001 - objects that do not list children
            continue
        for local, child in children.items():
            if id(child) not in objects:
                objects[id(child)] = child
                queue.append(child)
            here = [f"{p}/{local}" if p else local for p in paths[id(obj)]]
            paths.setdefault(id(child), []).extend(here[:8])
    out = []
    for key, obj in objects.items():
        if isinstance(obj, tf.Variable) and obj.trainable and \
                (obj.dtype.is_floating or obj.dtype.is_complex):
            out.append((obj, tuple(sorted(set(paths[key])))))
    return out


def tf2_answers(path: Path, feeds: dict[str, Any] | None = None) -> list[TFOutput]:
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    variables = _variable_paths(tf, loaded)
    answers = []
    by_function: dict[str, list[TFOutput]] = {}  # signatures that call the same function
    for key in sorted(loaded.signatures):
        fn = loaded.signatures[key]
        if fn.name in by_function:  # Keras's serve and serving_default: the same answers
            answers += [replace(a, signature=key) for a in by_function[fn.name]]
            continue
        specs = fn.structured_input_signature[1]
        float_inputs = sorted(k for k, s in specs.items() if s.dtype.is_floating)
        per_point = [_tape_point(tf, fn, specs, variables, float_inputs, seed, feeds)
                     for seed in (1, 2)]
        per_graph = _graph_points(tf, fn, specs, variables, float_inputs, (1, 2), feeds)
        zeros = sorted({o for p in per_point + per_graph for o, found in p.items()
                        if ZERO in found})
        # asked only for outputs with zeros: inlining a big graph costs seconds
        connected = _connected(tf, fn, variables, float_inputs, zeros) if zeros else {}
        start = len(answers)
        for how, points in (("tape", per_point), ("graph", per_graph)):
            outputs = sorted({o for p in points for o in p})
            for output in outputs:
                answer = TFOutput("serve", key, output, how=how)
                links = connected.get(output) or {}
                for index, (_, paths) in enumerate(variables):
                    answer.variables[paths] = _merge([p[output][index] for p in points],
                                                     links.get(index))
                for index, name in enumerate(float_inputs):
                    number = len(variables) + index
                    answer.inputs[name] = _merge([p[output][number] for p in points],
                                                 links.get(number))
                answers.append(answer)
        by_function[fn.name] = answers[start:]
    return answers


def _merge(verdicts: list[str], connected: bool | None) -> str:
    """One answer from two points. Zeros are what a loaded function's call returns
    for a target only another output reaches, and what a gradient that is zero by
    mathematics is (softmax's shift invariance): the frozen graph tells them apart."""
    if FAILS in verdicts:
        return FAILS
    if GRADIENT in verdicts:
        return GRADIENT
    return GRADIENT if ZERO in verdicts and connected else NONE


def freeze(fn: Any, lower_control_flow: bool = True) -> tuple[Any, list[Any], list[Any]]:
    """``convert_variables_to_constants_v2_as_graph`` without the function it builds
    back from the frozen graph (three quarters of its time, and never run here): the
    frozen GraphDef, and the tensors of ``fn`` that are its inputs (the captures not
    frozen: the arguments) and its outputs, by the same names in the GraphDef."""
    from tensorflow.python.framework import convert_to_constants as convert

    data = convert._FunctionConverterDataInEager(
        func=fn, lower_control_flow=lower_control_flow, aggressive_inlining=False)
    graph_def, converted = convert._replace_variables_by_constants(converter_data=data)
    frozen = {id(fn.graph.internal_captures[index]) for index in converted}
    return graph_def, [t for t in fn.inputs if id(t) not in frozen], list(fn.outputs)


def _connected(tf: Any, fn: Any, variables: list[Any], float_inputs: list[str],
               outputs: list[str]) -> dict[str, dict[int, bool]]:
    """output -> source number -> whether the gradient TF builds for it carries the
    upstream gradient, read in the gradient graph with every function call (saved
    gradient functions too) inlined and the variables frozen to constants. A custom
    gradient that returns zeros carries nothing; a chain of ops whose values happen to
    cancel (softmax's shift invariance) carries it. Empty where TF cannot say."""
    try:
        graph_def, frozen_inputs, frozen_outputs = freeze(fn)
    except Exception:  # noqa: BLE001 - e.g. a py_function: no answer from here
        return {}
    captured = {id(external): internal.op.name for external, internal in fn.graph.captures}
    names = [captured.get(id(v.handle)) for v, _ in variables] + list(float_inputs)
    present = {n.name for n in graph_def.node}
    numbered = [(i, n) for i, n in enumerate(names) if n and n in present]
    # the frozen function's outputs are the flattened structured outputs (composites
    # by their components): the floating ones by the names check gives them
    offsets, position = {}, 0
    for key, value in sorted(fn.structured_outputs.items()):
        offsets[key] = position
        position += len(tf.nest.flatten(value, expand_composites=True))
    out: dict[str, dict[int, bool]] = {}
    for key, output, index in _float_outputs(fn):
        if key not in outputs or offsets[output] + index >= len(frozen_outputs):
            continue
        tensor = frozen_outputs[offsets[output] + index]

        found: list[bool] = []
        traced = _gradient_function(tf, graph_def, [t.name for t in frozen_inputs],
                                    tensor.name, [f"{n}:0" for _, n in numbered], found)

        try:
            specs = [tf.TensorSpec(tensor.shape, tensor.dtype, name="upstream")] + [
                tf.TensorSpec(t.shape, t.dtype) for t in frozen_inputs]
            concrete = tf.function(traced, autograph=False).get_concrete_function(*specs)
            inlined = freeze(concrete)[0]
        except Exception:  # noqa: BLE001 - LookupError for an unknown custom gradient
            continue
        carried = _downstream_tensors(inlined, "upstream")
        results = [t.name for t in concrete.outputs]
        out[key] = {i: exists and _carries(carried, _producer(inlined, name))
                    for (i, _), exists, name in zip(numbered, found, results)}
    return out


def _gradient_function(tf: Any, graph_def: Any, inputs: list[str], output: str,
                       sources: list[str], found: list[bool]) -> Any:
    """(upstream, *inputs) -> gradients of ``output`` for ``sources`` in the imported
    graph; ``found`` says which exist (None gradients are returned as empty)."""
    def traced(upstream: Any, *args: Any) -> list[Any]:
        elements = tf.graph_util.import_graph_def(
            graph_def, input_map=dict(zip(inputs, args)), return_elements=[output] + sources)
        grads = tf.gradients(elements[0], elements[1:], grad_ys=upstream)
        found[:] = [g is not None for g in grads]
        return [tf.zeros([0]) if g is None else tf.convert_to_tensor(g) for g in grads]

    return traced


def _producer(graph_def: Any, output: str) -> str:
    """The tensor behind a function output (through the Identity that returns it)."""
    nodes = {n.name: n for n in graph_def.node}
    tensor = output.split(":")[0]
    node = nodes.get(tensor)
    while node is not None and node.op == "Identity" and node.input:
        tensor = node.input[0].lstrip("^")
        node = nodes.get(tensor.split(":")[0])
    return tensor if ":" in tensor else f"{tensor}:0"


# ops whose output depends on the shapes of their inputs only: nothing of the upstream
# gradient's values passes them (a custom gradient's zeros_like(dy), traced for an
# upstream of unknown shape, is a ZerosLike that reads dy). The harness's own list, kept
# apart from opregistry's so that the oracle does not share its mistakes.
SHAPE_ONLY_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike",
                            "BroadcastGradientArgs", "VariableShape", "TensorListLength",
                            "TensorListElementShape"})
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def _downstream_tensors(graph_def: Any, start: str,
                        loops: dict[str, int] | None = None) -> set[str]:
    """Every tensor (``node:k``) whose value the node ``start``'s value reaches along
    data edges, not through an op that reads only shapes. A function call left in the
    graph (a loaded model's custom gradient is called, not inlined) passes input j to
    output k only where its body does; so does a control-flow op not lowered (``If``,
    ``Case``: where some branch does; ``While``: where its body does, run as many
    times as ``loops`` says the node iterated in the call, else any number of times);
    any other op passes every input to every output (``node:*``)."""
    nodes = {n.name: n for n in graph_def.node}
    functions = {f.signature.name: f for f in graph_def.library.function}
    consumers: dict[str, list[tuple[str, int]]] = {}  # tensor -> (node, input position)
    for node in graph_def.node:
        position = 0
        for text in node.input:
            if text.startswith("^"):
                continue
            name, _, index = text.partition(":")
            consumers.setdefault(f"{name}:{index or 0}", []).append((node.name, position))
            position += 1
    produced: dict[str, list[str]] = {}  # node -> its consumed tensors
    for tensor in consumers:
        produced.setdefault(tensor.rsplit(":", 1)[0], []).append(tensor)
    reached: set[str] = {f"{start}:*"}
    stack = [start]  # nodes with newly reached outputs

    def outputs_of(name: str) -> list[str]:
        return produced.get(name, [])

    while stack:
        name = stack.pop()
        tensors = outputs_of(name) if f"{name}:*" in reached else \
            [t for t in outputs_of(name) if t in reached]
        for tensor in tensors:
            for consumer, position in consumers.get(tensor, []):
                node = nodes[consumer]
                if node.op in SHAPE_ONLY_OPS:
                    continue
                if node.op in CONTROL_FLOW_OPS:
                    passed = _control_flow_outputs(node, position, functions,
                                                   (loops or {}).get(consumer))
                else:
                    body = functions.get(node.attr["f"].func.name) \
                        if node.op in CALL_OPS else None
                    passed = _body_outputs(body, position, functions) \
                        if body is not None else None
                new = {f"{consumer}:*"} if passed is None else \
                    {f"{consumer}:{k}" for k in passed}
                if not new <= reached and f"{consumer}:*" not in reached:
                    reached |= new
                    stack.append(consumer)
    return reached


WHILE_OPS = frozenset({"While", "StatelessWhile"})
CONTROL_FLOW_OPS = WHILE_OPS | {"If", "StatelessIf", "Case", "StatelessCase"}


def _control_flow_outputs(node: Any, position: int, functions: dict[str, Any],
                          iterations: int | None) -> set[int] | None:
    """The outputs of a control-flow node (not lowered) that its input ``position``
    reaches: a branch op's where some branch's body does (its first input chooses the
    branch: no value passes); a loop's, after exactly ``iterations`` runs of its body
    (the loop variable itself after none), or after any number when not known."""
    if node.op not in WHILE_OPS:
        if position == 0:
            return set()
        names = [node.attr[a].func.name for a in ("then_branch", "else_branch")
                 if a in node.attr] + [f.name for f in node.attr["branches"].list.func]
        found: set[int] = set()
        for name in names:
            passed = _body_outputs(functions[name], position - 1, functions) \
                if name in functions else None
            if passed is None:
                return None
            found |= passed
        return found
    body = functions.get(node.attr["body"].func.name)
    if body is None:
        return None

    def step(positions: frozenset[int]) -> frozenset[int] | None:
        out: set[int] = set()
        for p in positions:
            passed = _body_outputs(body, p, functions)
            if passed is None:
                return None
            out |= passed
        return frozenset(out)

    first = frozenset({position})
    current: frozenset[int] | None = first
    if iterations is None:  # any number of runs: every set on the way
        reached, frontier = set(first), first
        while frontier:
            following = step(frontier)
            if following is None:
                return None
            frontier = following - reached
            reached |= following
        return reached
    seen: list[frozenset[int]] = []  # the sets repeat: at most 2^n distinct ones
    for done in range(iterations):
        assert current is not None
        if current in seen:  # periodic from here: skip whole periods
            start = seen.index(current)
            return set(seen[start + (iterations - done) % (done - start)])
        seen.append(current)
        current = step(current)
        if current is None:
            return None
    return set(current) if current is not None else None


def _carries(reached: set[str], tensor: str) -> bool:
    return tensor in reached or f"{tensor.split(':')[0]}:*" in reached


def _body_outputs(fdef: Any, position: int, functions: dict[str, Any]) -> set[int] | None:
    """The outputs of function ``fdef`` whose value its input ``position`` reaches
    (None: not known, all); nested calls pass every input to every output."""
    signature = fdef.signature
    if position >= len(signature.input_arg) or any(
            a.number_attr or a.type_list_attr for a in signature.output_arg):
        return None
    arg = signature.input_arg[position].name
    body = {n.name: n for n in fdef.node_def}
    out = set()
    for k, out_arg in enumerate(signature.output_arg):
        seen: set[str] = set()
        stack = [fdef.ret[out_arg.name].split(":")[0]]
        while stack:
            name = stack.pop()
            if name == arg:
                out.add(k)
                break
            if name in seen or name not in body or body[name].op in SHAPE_ONLY_OPS:
                continue
            seen.add(name)
            stack.extend(t.split(":")[0] for t in body[name].input if not t.startswith("^"))
    return out


def _float_outputs(fn: Any) -> list[tuple[str, str, int]]:
    """(name, key, component) of every floating output: a composite output
    (SparseTensor, RaggedTensor) by its floating components, as check names them."""
    import tensorflow as tf

    out = []
    for key, value in sorted(fn.structured_outputs.items()):
        flat = tf.nest.flatten(value, expand_composites=True)
        floating = [i for i, t in enumerate(flat)
                    if getattr(t, "dtype", None) is not None and t.dtype.is_floating]
        for number, index in enumerate(floating):
            out.append((key if len(floating) == 1 else f"{key}/{number}", key, index))
    return out


def _component(tf: Any, results: Any, key: str, index: int) -> Any:
    return tf.nest.flatten(results[key], expand_composites=True)[index]


def _upstream(tf: Any, value: Any, seed: int) -> Any:
    """A random upstream gradient: the implicit ones would sum the output, and the sum
    of a softmax is constant (its gradient is zero everywhere)."""
    return tf.random.stateless_normal(tf.shape(value), seed=[seed, 7], dtype=value.dtype)


def _tape_point(tf: Any, fn: Any, specs: dict[str, Any], variables: list[Any],
                float_inputs: list[str], seed: int, feeds: dict[str, Any] | None = None
                ) -> dict[str, list[str]]:
    inputs = _random_inputs(tf, specs, seed, feeds)
    sources = [v for v, _ in variables] + [inputs[k] for k in float_inputs]
    outputs = _float_outputs(fn)
    try:
        # persistent only to ask more than one output: a persistent tape's first call of a
        # loaded function costs twice a plain one's (MobileNetV2: 6.6 s against 3.0 s)
        with tf.GradientTape(persistent=len(outputs) > 1,
                             watch_accessed_variables=False) as tape:
            for source in sources:
                tape.watch(source)
            results = fn(**inputs)
    except Exception:  # noqa: BLE001 - the loaded model cannot run (py_function)
        return {o: [FAILS] * len(sources) for o, _, _ in outputs}
    out = {}
    for output, key, index in outputs:
        try:
            value = _component(tf, results, key, index)
            grads = tape.gradient(value, sources, output_gradients=_upstream(tf, value, seed))
            out[output] = [_classify(tf, g) for g in grads]
        except Exception:  # noqa: BLE001 - e.g. a custom gradient that was not saved
            out[output] = [FAILS] * len(sources)
    return out


def _graph_points(tf: Any, fn: Any, specs: dict[str, Any], variables: list[Any],
                  float_inputs: list[str], seeds: tuple[int, ...],
                  feeds: dict[str, Any] | None = None) -> list[dict[str, list[str]]]:
    """Per seed: output -> answers of ``tf.gradients`` in a ``tf.function`` (the seed of
    the inputs and of the upstream gradient is an argument): one traced for all the
    outputs, each output's ``tf.gradients`` of its own; where that one cannot be built
    or run (an output whose gradient raises), one traced per output."""
    points = [_random_inputs(tf, specs, seed, feeds) for seed in seeds]
    outputs = _float_outputs(fn)
    n = len(variables) + len(float_inputs)
    out: list[dict[str, list[str]]] = [{} for _ in seeds]

    # tracing and freezing a call's gradient is most of the cost: once, not per output
    def every_output(args: Any, seed: Any) -> list[Any]:
        results = fn(**args)
        sources = [v.handle for v, _ in variables] + [args[k] for k in float_inputs]
        found = []
        for _, key, index in outputs:
            value = _component(tf, results, key, index)
            upstream = tf.random.stateless_normal(tf.shape(value), seed=tf.stack([seed, 7]),
                                                  dtype=value.dtype)
            found.append(tf.gradients(value, sources, grad_ys=upstream))
        return found

    try:
        together = tf.function(every_output, autograph=False)
        for number, (seed, inputs) in enumerate(zip(seeds, points)):
            values = together(inputs, tf.constant(seed))
            for (output, _, _), grads in zip(outputs, values):
                out[number][output] = [_classify(tf, g) for g in grads]
        return out
    except Exception:  # noqa: BLE001 - some output's gradient: each on its own
        out = [{} for _ in seeds]
    for output, key, index in outputs:
        @tf.function
        def grads(args, seed, key=key, index=index):
            results = fn(**args)
            sources = [v.handle for v, _ in variables] + [args[k] for k in float_inputs]
            value = _component(tf, results, key, index)
            upstream = tf.random.stateless_normal(tf.shape(value), seed=tf.stack([seed, 7]),
                                                  dtype=value.dtype)
            return tf.gradients(value, sources, grad_ys=upstream)

        for number, (seed, inputs) in enumerate(zip(seeds, points)):
            try:
                values = grads(inputs, tf.constant(seed))
                out[number][output] = [_classify(tf, g) for g in values]
            except Exception:  # noqa: BLE001 - the graph cannot be built or run
                out[number][output] = [FAILS] * n
    return out


def tf1_answers(path: Path, feeds: dict[str, Any] | None = None) -> list[TFOutput]:
    """Every MetaGraph of a TF1 SavedModel, loaded into a session graph of its own.
    Signature inputs and outputs are read as TF reads them (a SparseTensor or
    RaggedTensor by its components; a ref output as its value); the targets are the
    inputs whose graph tensor is floating (a composite's floating components).
    ``feeds``: signature input key -> the value to feed (a serialized Example, say)
    instead of a random one."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    tf1 = tf.compat.v1
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((path / "saved_model.pb").read_bytes())
    answers = []
    for meta in saved.meta_graphs:
        tags = list(meta.meta_info_def.tags)
        with tf.Graph().as_default() as graph, tf1.Session(graph=graph) as sess:
            loaded = tf1.saved_model.loader.load(sess, tags, str(path))
            variables = [v for v in tf1.trainable_variables() if v.dtype.base_dtype.is_floating]
            for key, sig in sorted(loaded.signature_def.items()):
                inputs = {k: tf1.saved_model.utils.get_tensor_from_tensor_info(v, graph)
                          for k, v in sig.inputs.items()}
                float_inputs = {k: _float_components(tf, t) for k, t in inputs.items()}
                float_inputs = {k: c for k, c in sorted(float_inputs.items()) if c}
                for output, info in sorted(sig.outputs.items()):
                    value = tf1.saved_model.utils.get_tensor_from_tensor_info(info, graph)
                    outs = _float_components(tf, value)
                    for number, out in enumerate(outs):
                        name = output if len(outs) == 1 else f"{output}/{number}"
                        answer = TFOutput(",".join(tags), key, name, how="tf1-graph")
                        verdicts = _tf1_verdicts(tf, np, sess, out, variables,
                                                 list(float_inputs.values()), inputs,
                                                 feeds or {})
                        for var, verdict in zip(variables, verdicts):
                            answer.variables[(var.op.name,)] = verdict
                        for input_key, verdict in zip(float_inputs, verdicts[len(variables):]):
                            answer.inputs[input_key] = verdict
                        answers.append(answer)
    return answers


def _float_components(tf: Any, value: Any) -> list[Any]:
    """The floating tensors of a signature's tensor: itself, or a composite's values."""
    return [t for t in tf.nest.flatten(value, expand_composites=True)
            if t.dtype.base_dtype.is_floating]


def _tf1_verdicts(tf: Any, np: Any, sess: Any, out: Any, variables: list[Any],
                  input_components: list[list[Any]], inputs: dict[str, Any],
                  feeds: dict[str, Any]) -> list[str]:
    """gradient / none for every variable, then every input (any of its components),
    at two random points."""
    sources = variables + [c for components in input_components for c in components]
    upstream = tf.random.stateless_normal(tf.shape(out), seed=[3, 7],
                                          dtype=out.dtype.base_dtype)
    grads = tf.gradients(out, sources, grad_ys=upstream)
    verdicts = [NONE] * len(sources)
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        feed = {}
        for key, tensor in inputs.items():
            feed.update(_tf1_feed(tf, rng, tensor, feeds.get(key)))
        for index, g in enumerate(grads):
            if g is not None and np.any(_values(tf, sess.run(g, feed)) != 0):
                verdicts[index] = GRADIENT
    # an input is one target, whatever number of components it has
    out_verdicts = verdicts[:len(variables)]
    start = len(variables)
    for components in input_components:
        part = verdicts[start:start + len(components)]
        out_verdicts.append(GRADIENT if GRADIENT in part else NONE)
        start += len(components)
    return out_verdicts


def _values(tf: Any, value: Any) -> Any:
    return value.values if hasattr(value, "indices") and hasattr(value, "values") else value


def _tf1_feed(tf: Any, rng: Any, tensor: Any, given: Any) -> dict[Any, Any]:
    """A value for a signature input: a plain tensor, a SparseTensor (two entries) or a
    RaggedTensor (two rows of one value), random unless ``given``."""
    import numpy as np

    if isinstance(tensor, tf.SparseTensor):
        rank = tensor.shape.rank or 2
        indices = np.asarray([[i] + [0] * (rank - 1) for i in range(2)], np.int64)
        values = given if given is not None else _random_array(tf, rng, tensor.values.dtype, [2])
        return {tensor.indices: indices, tensor.values: values,
                tensor.dense_shape: np.asarray([2] + [1] * (rank - 1), np.int64)}
    if isinstance(tensor, tf.RaggedTensor):
        feed = {}
        for splits in tensor.nested_row_splits:
            feed[splits] = np.asarray([0, 1, 2], splits.dtype.as_numpy_dtype)
        flat = tensor.flat_values
        feed[flat] = given if given is not None else \
            _random_array(tf, rng, flat.dtype, [2] + [d or 1 for d in flat.shape.as_list()[1:]])
        return feed
    if given is not None:
        return {tensor: given}
    shape = [d if d is not None else 2 for d in tensor.shape.as_list()] \
        if tensor.shape.rank is not None else [2]
    return {tensor: _random_array(tf, rng, tensor.dtype, shape)}


def _random_array(tf: Any, rng: Any, dtype: Any, shape: list[int]) -> Any:
    import numpy as np

    dtype = tf.as_dtype(dtype).base_dtype
    if dtype.is_floating:
        return rng.uniform(-1.0, 1.0, shape).astype(dtype.as_numpy_dtype)
    if dtype.is_bool:
        return np.ones(shape, bool)
    if dtype.is_integer:
        return rng.integers(0, 2, shape).astype(dtype.as_numpy_dtype)
    if dtype == tf.string:
        return np.full(shape, b"The quick brown fox jumped", object)
    return np.zeros(shape, dtype.as_numpy_dtype)


def answers_in_fresh_process(paths: list[Path], preload: tuple[str, ...] = ()
                             ) -> dict[str, list[TFOutput]]:
    """TF's answers from a process that did not build the models: a py_function's
    callback registered where the model was saved must not help the loaded model.
    ``preload``: op libraries the models need, as a user loads them (a module to
    import, a ``.py`` file to run, a ``.so`` for ``tf.load_op_library``)."""
    return finish_answers(start_answers(paths, preload))


def start_answers(paths: list[Path], preload: tuple[str, ...] = ()) -> Any:
    """The fresh process of ``answers_in_fresh_process``, started (it runs while the
    caller does other work); ``finish_answers`` waits for its answers."""
    import subprocess

    preloads = [arg for item in preload for arg in ("--preload", str(item))]
    return subprocess.Popen([sys.executable, __file__, *preloads, "--answers",
                             *map(str, paths)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish_answers(process: Any) -> dict[str, list[TFOutput]]:
    import json

    stdout, stderr = process.communicate(timeout=3600)
    if process.returncode != 0:
        raise RuntimeError(f"the TF side failed: {stderr[-3000:]}")
    raw = json.loads(stdout.strip().splitlines()[-1])
    return {path: [TFOutput(a["meta_graph"], a["signature"], a["output"],
                            {tuple(k): v for k, v in a["variables"]}, a["inputs"], a["how"])
                   for a in answers] for path, answers in raw.items()}


def _preload(items: list[str]) -> None:
    import importlib
    import runpy

    import tensorflow as tf

    for item in items:
        if item.endswith(".so"):
            tf.load_op_library(item)
        elif item.endswith(".py"):
            runpy.run_path(item)
        else:
            importlib.import_module(item)


def _print_answers(paths: list[str]) -> None:
    import json

    out = {}
    for path in paths:
        out[path] = [{"meta_graph": a.meta_graph, "signature": a.signature,
                      "output": a.output, "variables": [[list(k), v] for k, v in
                                                        a.variables.items()],
                      "inputs": a.inputs, "how": a.how} for a in tf_answers(Path(path))]
    sys.stdout.write("\n" + json.dumps(out) + "\n")


def tf_answers(path: Path, feeds: dict[str, Any] | None = None) -> list[TFOutput]:
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((path / "saved_model.pb").read_bytes())
    if any(len(m.object_graph_def.nodes) for m in saved.meta_graphs):
        return tf2_answers(path, feeds)
    return tf1_answers(path, feeds)


# ------------------------------------------------------------------------ comparison

def compare(name: str, path: Path, result: Any, answers: list[TFOutput]) -> Comparison:
    """Every pair TF answered against the static result, in both directions."""
    from opregistry.model.results import FATAL_REASONS

    done = Comparison(name)
    reports = {(o.meta_graph or "serve", o.signature, o.output): o for o in result.outputs}
    targets = {(t.kind, t.signature if t.kind == "input" else None, t.name): t
               for t in result.targets}
    by_path = {t.path or t.name: t for t in result.targets if t.kind == "variable"}
    fatal = {(f.meta_graph or "serve", f.signature, f.output)
             for f in result.findings if any(b.reason in FATAL_REASONS
                                             for b in f.stops)}
    seen_outputs, seen_pairs, failing = set(), set(), set()
    for answer in answers:
        where = (answer.meta_graph, answer.signature, answer.output)
        label = f"{name} [{answer.how}] {'/'.join(where)}"
        report = reports.get(where)
        if report is None:
            done.disagreements.append(f"{label}: output not in the check result")
            continue
        if where not in seen_outputs:
            seen_outputs.add(where)
            done.outputs += 1
        static = {n: GRADIENT for n in report.with_gradient}
        static.update({n: "blocked" for n in report.blocked})
        static.update({n: "unrelated" for n in report.unrelated})
        pairs = [(f"variable {'|'.join(paths)}", _static_variable(paths, by_path, result),
                  verdict) for paths, verdict in answer.variables.items()]
        pairs += [(f"input {key}", (targets.get(("input", answer.signature, key)) and key),
                   verdict) for key, verdict in answer.inputs.items()]
        failed = False
        for what, static_name, verdict in pairs:
            done.answers += 1
            seen_pairs.add((where, what))
            ours = "unused" if static_name == "" else static.get(static_name or "", "missing")
            if ours == "missing":
                done.disagreements.append(f"{label} {what}: not a target of check")
                continue
            if (verdict == GRADIENT) != (ours == GRADIENT):
                done.disagreements.append(f"{label} {what}: TF {verdict}, check {ours}")
            if verdict == GRADIENT:
                done.with_gradient += 1
            else:
                done.without += 1
            failed |= verdict == FAILS
        if failed:
            failing.add(where)
            if report.blocked and where not in fatal:
                done.disagreements.append(f"{label}: TF cannot differentiate it, check "
                                          f"does not say so")
        elif where in fatal:
            done.disagreements.append(f"{label}: check says TF cannot differentiate it")
    done.pairs, done.failing_outputs = len(seen_pairs), len(failing)
    # the other direction: every output and target of check is one TF knows
    for where in reports:
        if where not in seen_outputs:
            done.disagreements.append(f"{name} {'/'.join(where)}: checked, but not an "
                                      f"output TF differentiates")
    known = {p for a in answers for paths in a.variables for p in paths}
    for target in result.targets:
        if target.kind == "variable" and (target.path or target.name) not in known:
            done.disagreements.append(f"{name} variable {target.name}: not a trainable "
                                      f"variable TF finds")
    tf_inputs: dict[str, set[str]] = {}
    for answer in answers:
        tf_inputs.setdefault(answer.signature, set()).update(answer.inputs)
    for target in result.targets:
        if target.kind == "input" and target.signature in tf_inputs and \
                target.name not in tf_inputs[target.signature]:
            done.disagreements.append(f"{name} input {target.signature}/{target.name}: not "
                                      f"a floating input TF finds")
    return done


def _static_variable(paths: tuple[str, ...], by_path: dict[str, Any], result: Any
                     ) -> str | None:
    """The static target name for a TF variable (by object path); "" when check lists
    it as unused; None when check does not know it."""
    for p in paths:
        if p in by_path:
            return by_path[p].name
    if any(p in result.unused_variables for p in paths):
        return ""
    return None


def run(entries: list[Any], db: Any = None, preload: tuple[str, ...] = ()) -> list[Comparison]:
    from opregistry import check

    answers = answers_in_fresh_process([e.path for e in entries], preload)
    return [compare(e.name, e.path, check(e.path, db=db), answers[str(e.path)])
            for e in entries]


def report(comparisons: list[Comparison]) -> str:
    from tabulate import tabulate

    rows = [(c.model, c.outputs, c.pairs, c.answers, c.with_gradient, c.without,
             c.failing_outputs, len(c.disagreements)) for c in comparisons]
    rows.append(("total", sum(c.outputs for c in comparisons),
                 sum(c.pairs for c in comparisons), sum(c.answers for c in comparisons),
                 sum(c.with_gradient for c in comparisons),
                 sum(c.without for c in comparisons),
                 sum(c.failing_outputs for c in comparisons),
                 sum(len(c.disagreements) for c in comparisons)))
    text = tabulate(rows, headers=["model", "outputs", "pairs", "TF answers", "gradient",
                                   "none", "outputs TF fails", "disagreements"])
    lines = [d for c in comparisons for d in c.disagreements]
    return text + ("\n\n" + "\n".join(lines) if lines else "")


def main() -> None:
    import corpus

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to build the corpus (default: temp)")
    parser.add_argument("--only", nargs="*", help=f"corpus parts: {', '.join(corpus.BUILDERS)}"
                        f"; more: {', '.join(corpus.EXTRA_BUILDERS)}")
    parser.add_argument("--db", help="database (default: the shipped one)")
    parser.add_argument("--answers", nargs="*", help=argparse.SUPPRESS)  # the TF side
    parser.add_argument("--preload", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.answers is not None:
        _preload(args.preload)
        return _print_answers(args.answers)
    root = args.out or Path(tempfile.mkdtemp(prefix="opregistry-corpus-"))
    comparisons = run(corpus.build(root, args.only), db=args.db)
    print(report(comparisons))
    sys.exit(1 if any(c.disagreements for c in comparisons) else 0)


if __name__ == "__main__":
    main()
