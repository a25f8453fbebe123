"""One gradient call as the analysis sees it: a Model whose one signature has the
differentiated tensors as outputs and the sources as targets, built from the graph
being traced (tf.function, Keras ``fit``, a TF1 graph) or from the ops recorded
eagerly; then every source's verdict, with the ops where its paths stop."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from opregistry.creation_sites import Site, SiteOf, shown
from opregistry.guard.live_facts import Facts, why
from opregistry.model.graph import Model, Signature
from opregistry.model.readers import schema
from opregistry.model.results import GradientStop
from opregistry.tf_types import (
    Graph,
    Nest,
    Operation,
    Proto,
    Tensor,
    TFCallable,
    TFModule,
    Variable,
)
from opregistry.vocabulary import PathStatus

# a tape's stretches of recording in a graph: [graph, ops before, ops at the end or None]
Spans = list[list[Graph]]


@dataclass(frozen=True)
class Verdict:
    """What the analysis says about one source of a gradient call."""

    status: PathStatus
    stops: tuple[GradientStop, ...] = ()  # with the line that created each ("file:line")
    why: dict[GradientStop, str] = field(default_factory=dict, hash=False)  # each stop, said


def variable_of(source: Nest) -> Variable | None:
    """The tf.Variable behind a source (a Keras 3 variable wraps one), or None."""
    for candidate in (source, getattr(source, "_value", None)):
        if candidate is not None and hasattr(candidate, "handle") and \
                hasattr(candidate, "trainable") and hasattr(candidate, "read_value"):
            return candidate
    return None


def source_name(source: Nest, index: int) -> str:
    var = variable_of(source)
    if var is not None:
        name = getattr(source, "path", None) or getattr(var, "name", None) or f"var{index}"
        name = name[:-2] if name.endswith(":0") else name
        return f"variable '{name}'"
    name = getattr(source, "name", None)
    if isinstance(name, str) and name:  # a graph tensor
        return f"source '{name}'"
    shape = getattr(source, "shape", "?")
    return f"source {index} (a tensor of shape {list(shape) if shape else []})"


def unique(names: list[str]) -> list[str]:
    """The names, those that repeat told apart by their position."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return [f"{n} (#{i})" if counts[n] > 1 else n for i, n in enumerate(names)]


def signature_model(model: Model, outputs: dict[str, tuple[str, int]],
                    variables: dict[str, str], inputs: dict[str, tuple[str, int]]) -> Model:
    """``model`` with one signature: the differentiated tensors as outputs, the sources
    as targets (variables by the node of their handle, tensors as inputs)."""
    model.variables = dict(variables)
    model.trainable = set(variables.values())
    model.signatures = {"gradient": Signature("gradient", inputs, outputs)}
    return model


def graph_def_model(tf: TFModule, graph_def_bytes: bytes, graph: Graph = None) -> Model:
    """A Model from a serialised GraphDef; the custom gradients of ``graph`` bound to
    their traced gradient functions as ``check`` binds a live object's."""
    from opregistry.model.readers import traced
    from opregistry.model.readers.savedmodel import from_graph_def

    model = from_graph_def(schema.parse("GraphDef", graph_def_bytes), "guarded", "traced")
    if graph is not None:
        traced.bind_custom_gradients(tf, graph, model)
    return model


def judge(model: Model, facts: Facts, site_of: SiteOf
          ) -> dict[str, Verdict]:
    """Target name -> Verdict, over every output of the one signature: a gradient if
    any output gives one, else blocked (the union of the stops) or unrelated."""
    from opregistry.model.analysis import analyse

    known = facts.get(model.op_types)
    # TF walked this call and did not raise: its own walk, not a whole call's
    result = analyse(model, known, facts.release or "installed", whole_call=False)
    verdicts: dict[str, Verdict] = {}
    stops: dict[str, dict[tuple[str, str | None], GradientStop]] = {}
    for report in result.outputs:
        for name in report.with_gradient:
            verdicts[name] = Verdict("gradient")
        for name in report.unrelated:
            verdicts.setdefault(name, Verdict("unrelated"))
    for finding in result.findings:
        if finding.target in verdicts and verdicts[finding.target].status == "gradient":
            continue
        for op in finding.stops:
            stops.setdefault(finding.target, {})[(op.node, op.function)] = op
    for name, ops in stops.items():
        placed = tuple(replace(op, site=shown_site(site_of(op.node, op.function)))
                       for _, op in sorted(ops.items(), key=lambda i: (i[0][1] or "", i[0][0])))
        verdicts[name] = Verdict("blocked", placed,
                                 {op: why(known, op.op, op.reason) for op in placed})
    return verdicts


def raising(model: Model, facts: Facts, site_of: SiteOf,
            message: str) -> tuple[GradientStop, ...]:
    """The ops of a gradient call that TF failed with ``message`` whose gradient raises
    and that its gradient reaches (``check``'s rule: ``analysis.raising_ops``), those
    of the op type TF names first, with the lines that created them; reason
    ``missing`` or ``none`` as the facts say, for their remedies."""
    from opregistry.model.analysis import raising_ops

    known = facts.get(model.op_types)
    found = raising_ops(model, known)
    named = [op for op in found if re.search(rf"\b{re.escape(op.op)}\b", message)]
    return tuple(replace(op, reason="missing" if known[op.op].gradient == "missing"
                         else "none", site=shown_site(site_of(op.node, op.function)))
                 for op in named or found)


def shown_site(site: Site | None) -> str | None:
    """A creation site as ``check`` shows one (``file:line``, relative to the working
    directory when inside it), or None where the op's line is unknown."""
    return shown(site) if site is not None else None


# ops whose NodeDef TF rewrites after creation (the gradient of a functional cond or
# while adds outputs to the forward op): read again at every call
_REWRITTEN_OPS = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case",
                            "StatelessCase"})


class GraphState:
    """One graph as parsed so far: the ops and functions already in ``model``, so a
    call parses only what the graph gained since the last one (a train step with many
    gradient calls, each adding its gradient's ops, is parsed once in all)."""

    def __init__(self) -> None:
        self.model: Model | None = None
        self.parsed = 0  # the graph's first ``parsed`` operations are in the model
        self.functions: set[str] = set()
        self.rewritten: list[Operation] = []  # ops of _REWRITTEN_OPS, read again each call
        self.traced: set[str] = set()  # custom gradient op types bound already


def grow(tf: TFModule, state: GraphState, graph: Graph) -> Model:
    """``state``'s model with every op and function ``graph`` has now."""
    ops = graph.get_operations()
    new = ops[state.parsed:]
    functions = getattr(graph, "_functions", None) or {}
    fresh = [name for name in list(functions) if name not in state.functions]
    if state.model is not None and not new and not fresh and not state.rewritten:
        return state.model
    from tensorflow.core.framework import graph_pb2

    data = graph_pb2.GraphDef()
    data.node.extend(op.node_def for op in new + state.rewritten)
    for name in fresh:
        definition = getattr(functions[name], "definition", None)
        if definition is None:  # not a function object we know: read them all
            data.library.CopyFrom(graph.as_graph_def().library)
            break
        data.library.function.add().CopyFrom(definition)
    part = graph_def_model(tf, data.SerializeToString())
    model = state.model
    if model is None:
        model = state.model = part
    else:
        model.nodes.update(part.nodes)
        model.functions.update(part.functions)
        model.variables.update(part.variables)
        model.gradient_bindings.update(part.gradient_bindings)
        model.known_op_types = (model.known_op_types or set()) | part.op_types
    state.parsed = len(ops)
    state.functions.update(fresh)
    state.rewritten.extend(op for op in new if op.type in _REWRITTEN_OPS)
    _bind_custom_gradients(tf, state, graph, part, [functions[n] for n in fresh])
    return model


def _bind_custom_gradients(tf: TFModule, state: GraphState, graph: Graph, part: Model,
                           functions: list[TFCallable]) -> None:
    """Bind the tf.custom_gradient ops among the newly parsed ones (in the graph or in
    its new functions) to their traced gradient functions, as ``check`` binds a live
    object's (``traced.bind_custom_gradients``), each op type traced once."""
    from tensorflow.python.framework import ops as tf_ops

    from opregistry.model.readers.savedmodel import function_from_def

    model = state.model
    assert model is not None
    owners = [(graph, part.nodes.values())] + [
        (getattr(f, "graph", None), fn.nodes.values())
        for f in functions for fn in part.functions.values()
        if fn.name == getattr(f, "name", None)]
    for owner, nodes in owners:
        for node in nodes:
            if "_gradient_op_type" not in node.attr:
                continue
            op_type = node.attr["_gradient_op_type"].s.decode()
            model.gradient_bindings.setdefault(op_type, "(in-process Python function)")
            if op_type in state.traced or owner is None:
                continue
            state.traced.add(op_type)
            try:
                op = owner.get_operation_by_name(node.name)
                grad_fn = tf_ops.gradient_registry.lookup(op_type)
                traced = tf.function(grad_fn).get_concrete_function(None, *op.inputs)
                fdef = schema.parse("FunctionDef", traced.function_def.SerializeToString())
            except Exception:  # noqa: BLE001 - user code: an untraceable one stays opaque
                continue
            function = function_from_def(fdef)
            model.functions.setdefault(function.name, function)
            model.gradient_bindings[op_type] = function.name


def graph_call_model(tf: TFModule, state: GraphState, graph: Graph, targets: list[Tensor],
                     sources: list[Nest], names: list[str]) -> Model:
    """The Model of a gradient call in graph mode (inside a tf.function or a TF1
    graph): the graph as it is (parsed once, grown as it grows), targets and sources
    by their tensors there."""
    model = grow(tf, state, graph)
    captured = {id(external): internal for external, internal in _captures(graph)}
    variables, inputs = {}, {}
    for source, name in zip(sources, names):
        var = variable_of(source)
        if var is not None:
            handle = var.handle
            internal = captured.get(id(handle), handle if _graph_of(handle) is graph else None)
            if internal is not None:
                variables[internal.op.name] = name
            continue
        if hasattr(source, "op") and _graph_of(source) is graph:
            inputs[name] = (source.name, source.dtype.as_datatype_enum)
    outputs = {f"target {i}": (t.name, t.dtype.as_datatype_enum) for i, t in
               enumerate(targets) if hasattr(t, "op")}
    # only what the differentiated tensors depend on is analysed: not the gradients
    # and updates of the calls before (the graph of a train step grows with each)
    start = [t.split(":")[0] for t, _ in outputs.values()] + list(variables) + \
        [t.split(":")[0] for t, _ in inputs.values()]
    view = replace(model, nodes=ancestors(model.nodes, start))
    return signature_model(view, outputs, variables, inputs)


def ancestors(nodes: dict[str, Proto], start: list[str]) -> dict[str, Proto]:
    """The nodes of ``start`` and every node they read along data edges (control
    edges carry no gradient, and in a train step lead to every earlier update)."""
    kept: dict[str, Proto] = {}
    pending = [name for name in start if name in nodes]
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        node = kept[name] = nodes[name]
        for edge in node.input:
            if edge.startswith("^"):
                continue
            source = edge.split(":")[0]
            if source not in kept and source in nodes:
                pending.append(source)
    return kept


def outside_tape(targets: list[Tensor], source: Nest, spans: Spans) -> list[Operation]:
    """The ops, computed while the tape did not record (``spans``: [graph, ops
    before, ops after] of each stretch it did), whose results the recorded ops leading to
    ``targets`` read and which depend on ``source``: where the tape's record of the
    path from ``source`` ends. Empty when there is none."""
    graph = targets[0].graph
    var = variable_of(source)
    if var is not None:
        captured = {id(external): internal for external, internal in _captures(graph)}
        tensor = captured.get(id(var.handle), var.handle if _graph_of(var.handle) is graph
                              else None)
    else:
        tensor = source if _graph_of(source) is graph else None
    if tensor is None:
        return []
    stretches = [(start, end) for g, start, end in spans if g is graph]
    order = {op.name: k for k, op in enumerate(graph.get_operations())}

    def recorded(op: Operation) -> bool:
        k = order.get(op.name, -1)
        return any(start <= k and (end is None or k < end) for start, end in stretches)

    boundary: dict[str, Operation] = {}
    seen: set[str] = set()
    pending = [t.op for t in targets]
    while pending:
        op = pending.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if not recorded(op):
            boundary[op.name] = op
            continue
        pending.extend(t.op for t in op.inputs)
    return [op for _, op in sorted(boundary.items()) if _reads(op, tensor.op)]


def _reads(op: Operation, wanted: Operation) -> bool:
    """Whether ``op`` depends on ``wanted`` along data edges."""
    seen: set[str] = set()
    pending = [op]
    while pending:
        current = pending.pop()
        if current is wanted:
            return True
        if current.name in seen:
            continue
        seen.add(current.name)
        pending.extend(t.op for t in current.inputs)
    return False


def _captures(graph: Graph) -> list[tuple[Tensor, Tensor]]:
    try:
        return list(graph.captures)
    except AttributeError:  # a plain tf.Graph captures nothing
        return []


def _graph_of(tensor: Tensor) -> Graph | None:
    try:
        return tensor.graph
    except (AttributeError, ValueError):  # an eager tensor has no graph
        return None


def graph_site_of(graph: Graph) -> SiteOf:
    """node name (and the function it was inlined from, if any) -> the line that
    created it: the op's own traceback, in the function's graph where TF keeps it,
    else the line of the call into the function."""
    from opregistry.creation_sites import traceback_site

    def site_of(node: str, function: str | None) -> Site | None:
        owner = _function_graph(graph, function) if function else graph
        if owner is not None:
            try:
                found = traceback_site(owner.get_operation_by_name(node))
            except (KeyError, ValueError):
                found = None
            if found is not None:
                return found
        for op in graph.get_operations() if function else ():
            try:
                called = op.get_attr("f").name
            except (ValueError, AttributeError):
                continue
            if called == function:
                return traceback_site(op)
        return None

    return site_of


def _function_graph(graph: Graph, name: str | None) -> Graph | None:
    """The FuncGraph of a function the graph calls, when TF still holds it."""
    for candidate in (graph, getattr(graph, "outer_graph", None)):
        functions = getattr(candidate, "_functions", None) or {}
        function = functions.get(name) if hasattr(functions, "get") else None
        found = getattr(function, "graph", None)
        if found is not None:
            return found
    return None
