"""Gradient-path analysis of a model against one release of the database.

The graph is flattened first (``flatten``: every function call inlined). Then, for
every signature output, with the targets of that signature (the model's trainable
variables and the signature's own floating inputs):

* *depends on*: what the output reaches backwards along data edges;
* *gets a gradient*: what reaches the output forwards along edges that carry
  gradients (float, complex, resource, variant) through ops that pass a gradient from
  that input (per the release's registry and probe results);
* a target the output depends on but that gets no gradient is a *finding*, with every
  op where a gradient path from the target stops and the output is still downstream;
* a target that gets a gradient but also runs into such an op on another path has a
  *partial path*;
* what a loaded model cannot differentiate at all (a custom gradient whose function
  was not saved, a py_function whose Python is not in the file) blocks every target
  of the signature, as TensorFlow fails for the whole function call.
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from itertools import chain
from typing import Any

from opregistry.model.flatten import _CARRIERS, _IDENTITY_LIKE, _INST, _OUT, Flat, _tensor
from opregistry.model.readers import _schema
from opregistry.model.readers.model import Model, Node
from opregistry.model.results import (
    FATAL_REASONS,
    BlockingOp,
    CheckResult,
    Finding,
    OutputReport,
    PartialPath,
    Target,
)

# --------------------------------------------------------------------------- analysis

def _passes(flat: Flat, inst: int, position: int) -> str | None:
    """None if ``inst`` passes a gradient from input ``position``, else the reason."""
    node = flat.nodes[inst]
    op = node.op
    if op not in _IDENTITY_LIKE:  # custom gradients are IdentityN: the rest can be cached
        key = flat.passes_key(node)
        by_position = flat.passes_cache.setdefault(key, {})
        if position not in by_position:
            by_position[position] = _op_passes(flat, node, position)
        return by_position[position]
    if "_gradient_op_type" in node.attr:  # tf.custom_gradient
        op_type = _text(node.attr["_gradient_op_type"].s)
        bound = flat.model.gradient_bindings.get(op_type)
        if bound is None:
            # not saved: a loaded model looks the gradient up by this op type and fails
            flat.unsaved_custom_gradients.add(node.name)
            return "custom_gradient_not_saved"
        given, forward = flat.custom_gradient_inputs(bound, node)
        if given is not None and position not in given:
            # the forward results' own gradient is replaced, not a path that stops
            return REPLACED if position < forward else "custom_gradient_none"
    return _op_passes(flat, node, position)


_MISSING = object()
# a custom gradient's forward results: their gradient is the custom one, so the walks
# neither pass nor report them
REPLACED = "replaced_by_custom_gradient"
_NO_REASONS: dict[int, str | None] = {}  # never filled: look the reason up with _passes


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _op_passes(flat: Flat, node: Node, position: int) -> str | None:
    if node.op in PYTHON_OPS and flat.model.format in STATIC_FORMATS:
        return "python_function_not_saved"
    facts = flat.facts.get(node.op)
    if facts is None:
        return "unknown_op"
    if facts.gradient in ("no_gradient", "missing"):
        return facts.gradient
    if facts.effective == "none":
        return "none"
    if facts.inputs:
        # by argument name: a variadic op (ConcatV2, AddN) was probed with its own N
        names = flat.input_arg_names(node)
        name = names[position] if names is not None and position < len(names) else None
        row = next((i for i in facts.inputs if i.name == name), None) if name else \
            next((i for i in facts.inputs if i.position == position), None)
        if row is not None and row.result != "gradient" and facts.effective == "partial":
            return "partial_input"
        if row is not None and row.result in ("none", "zero", "raises") and \
                facts.effective == "differentiable":
            return "partial_input"
    return None


# formats whose files hold no Python: a py_function's callback is not in them
STATIC_FORMATS = frozenset({"savedmodel", "graphdef", "pbtxt"})
# ops whose output does not depend on the values of their inputs (only on shapes):
# that no gradient passes them is no concern on a path that also carries one
_VALUE_FREE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike",
                             "BroadcastGradientArgs", "TensorListLength", "VariableShape"})


def analyse(model: Model, facts: dict[str, Any], release: str,
            outputs: list[tuple[str | None, str]] | None = None) -> CheckResult:
    """Every (signature output, target) pair: with a gradient (and ops of concern on a
    path that still carries one), blocked (a finding, with the ops where its paths
    stop) or unrelated (the output does not depend on the target)."""
    flat = Flat(model, facts)
    flat.add_graph(model.nodes, "", None, {})
    state = _State(flat)
    variables, inputs = _targets(model, flat)
    meta_graph = ",".join(model.tags)
    reports, findings, partials, subgraphs = [], [], [], []
    by_signature: dict[str, list[tuple[str, int]]] = {}
    for signature, output, tensor in _outputs(model, flat, outputs):
        by_signature.setdefault(signature, []).append((output, tensor))
    for signature, sig_outputs in by_signature.items():
        targets = variables + inputs.get(signature, [])
        stops = {output: state.stops(tensor) for output, tensor in sig_outputs}
        fatal = _fatal_ops(flat, state, sig_outputs, stops)
        for output, tensor in sig_outputs:
            graded = state.reach(tensor)
            report = OutputReport(signature, output, meta_graph=meta_graph)
            for target in targets:
                sources = target.sources
                if not fatal and any(s in graded for s in sources):
                    report.with_gradient.append(target.name)
                    ops = _ops_reached(flat, state, stops[output], sources, concern=True)
                    if ops:
                        report.partial_path[target.name] = sorted({b.op for b in ops})
                        partials.append(PartialPath(signature, output, target.kind,
                                                    target.name, tuple(ops), meta_graph))
                    continue
                dep_insts = state.dep_insts(tensor)
                source = next((s for s in sources if s & _INST in dep_insts), None)
                if source is None:
                    report.unrelated.append(target.name)
                    continue
                report.blocked.append(target.name)
                if fatal:
                    blocking = list(fatal)
                else:
                    blocking = _ops_reached(flat, state, stops[output], sources) or \
                        _blocking_ops(flat, state.consumers(), source, state.dep(tensor),
                                      dep_insts)
                findings.append(Finding(signature, output, target.kind, target.name,
                                        tuple(blocking), meta_graph))
                subgraphs.append(_subgraph(flat, state.consumers(), source, tensor,
                                           dep_insts))
            reports.append(report)
    all_targets = [t.public for t in variables] + [t.public for sig in sorted(inputs)
                                                    for t in inputs[sig]]
    return CheckResult(release=release, source=model.source, findings=findings,
                       outputs=reports, unknown_ops=sorted(flat.unknown),
                       unsaved_custom_gradients=sorted(flat.unsaved_custom_gradients),
                       partial_paths=partials, targets=all_targets,
                       unused_variables=list(model.unused_variables), subgraphs=subgraphs)


class _State:
    """Walks of one flattened graph, each done once and kept: what an output's
    gradient reaches, where it stops, what the output depends on."""

    def __init__(self, flat: Flat):
        self.flat = flat
        self._reach: dict[int, set[int]] = {}
        self._stops: dict[int, list[tuple[int, int, int, str]]] = {}
        self._upstream: dict[int, set[int]] = {}
        self._dep: dict[int, set[int]] = {}
        self._dep_insts: dict[int, set[int]] = {}
        self._consumers: dict[int, list[tuple[int, int]]] | None = None

    def reach(self, tensor: int) -> set[int]:
        if tensor not in self._reach:
            self._reach[tensor], raw = _gradient_reach(self.flat, tensor, record=True)
            self._stops[tensor] = _relevant_stops(self.flat, raw)
        return self._reach[tensor]

    def upstream(self, tensor: int) -> set[int]:
        """What a gradient arriving at ``tensor`` reaches (no stops recorded)."""
        if tensor not in self._upstream:
            self._upstream[tensor] = self._reach.get(tensor) or \
                _gradient_reach(self.flat, tensor)[0]
        return self._upstream[tensor]

    def stops(self, tensor: int) -> list[tuple[int, int, int, str]]:
        """(instance, position, input tensor, reason) of every op where the gradient
        of ``tensor`` stops while the output's value still depends on the op through
        edges a gradient could use (not only through a condition, index or shape)."""
        self.reach(tensor)
        return self._stops[tensor]

    def dep(self, tensor: int) -> set[int]:
        if tensor not in self._dep:
            self._dep[tensor] = _depends_on(self.flat, tensor)
        return self._dep[tensor]

    def dep_insts(self, tensor: int) -> set[int]:
        if tensor not in self._dep_insts:
            self._dep_insts[tensor] = {t & _INST for t in self.dep(tensor)}
        return self._dep_insts[tensor]

    def consumers(self) -> dict[int, list[tuple[int, int]]]:
        """tensor -> [(instance, input position or -1 - output index)]: built only
        when a finding needs a forward walk."""
        if self._consumers is None:
            self._consumers = defaultdict(list)
            for inst in range(len(self.flat.keys)):
                _add_consumers(self.flat, inst, self._consumers)
        return self._consumers


def _relevant_stops(flat: Flat, raw: list[tuple[int, int, int]]
                    ) -> list[tuple[int, int, int, str]]:
    """From the edges where a gradient walk stopped, the stops that matter: an edge that
    could carry a gradient into an op that passes none, or an integer edge whose value
    an op would pass a gradient for (``cast(argmax(h))``: followed back to ArgMax). An
    integer that only reaches a condition, an index or a shape is not followed."""
    found: dict[tuple[int, int], tuple[int, int, int, str]] = {}
    values: list[int] = []  # integer tensors whose value the gradient region uses
    for inst, position, ref in raw:
        if flat.trainable(ref):
            reason = _passes(flat, inst, position)
            if reason is not None and reason != REPLACED:
                found[(inst, position)] = (inst, position, ref, reason)
        elif _passes(flat, inst, position) is None:
            values.append(ref)
    seen: set[int] = set()
    while values:
        t: int = values.pop()
        if t in seen:
            continue
        seen.add(t)
        inst = t & _INST
        if inst in flat.transparent:
            values.extend(flat.transparent[inst].get(t >> _OUT, ()))
            continue
        for position, edge in enumerate(flat.inputs[inst]):
            if edge is None:
                continue
            reason = _passes(flat, inst, position)
            if reason == REPLACED:
                continue
            if flat.trainable(edge):  # where a gradient would have turned into an integer
                found.setdefault((inst, position), (inst, position, edge,
                                                    reason or "integer_edge"))
            elif reason is None:
                values.append(edge)
    return [found[k] for k in sorted(found)]


def _ops_reached(flat: Flat, state: _State, stops: list[tuple[int, int, int, str]],
                 sources: tuple[int, ...], concern: bool = False) -> list[BlockingOp]:
    """The stops that a gradient path from ``sources`` runs into. With ``concern``,
    the ones worth a word on a path that still gets a gradient elsewhere (not ops
    that only read a shape, not the fatal ones reported for the whole signature)."""
    out: dict[int, BlockingOp] = {}
    for inst, _position, ref, reason in stops:
        op = flat.ops[inst]
        if concern and (op in _VALUE_FREE_OPS or reason in FATAL_REASONS):
            continue
        if inst in out:
            continue
        upstream = state.upstream(ref)  # what a gradient arriving at ``ref`` reaches
        if any(s in upstream for s in sources):
            node = flat.nodes[inst]
            out[inst] = BlockingOp(node.name, node.op, flat.functions[inst], reason)
    return sorted(out.values(), key=lambda b: (b.function or "", b.node))


def _fatal_ops(flat: Flat, state: _State, outputs: list[tuple[str, int]],
               stops: dict[str, list[tuple[int, int, int, str]]]) -> tuple[BlockingOp, ...]:
    """Ops that make a loaded model fail to differentiate every output of a signature:
    a custom gradient whose function was not saved (TF looks it up by its op type and
    raises, for the whole function call), and, in a file, a py_function whose Python
    callback is not there (the signature cannot even run)."""
    found: dict[int, BlockingOp] = {}
    for output_stops in stops.values():
        for inst, _position, _ref, reason in output_stops:
            if reason == "custom_gradient_not_saved":
                node = flat.nodes[inst]
                found[inst] = BlockingOp(node.name, node.op, flat.functions[inst], reason)
    if flat.model.format in STATIC_FORMATS and PYTHON_OPS & flat.model.op_types:
        for _output, tensor in outputs:
            for inst in state.dep_insts(tensor):
                if flat.ops[inst] in PYTHON_OPS:
                    node = flat.nodes[inst]
                    found[inst] = BlockingOp(node.name, node.op, flat.functions[inst],
                                             "python_function_not_saved")
    return tuple(sorted(found.values(), key=lambda b: (b.function or "", b.node)))


def _depends_on(flat: Flat, output: int) -> set[int]:
    """Every tensor ``output`` reaches backwards along data edges."""
    dep: set[int] = set()
    inputs, transparent = flat.inputs, flat.transparent
    stack: list[int | None] = [output]
    pop, push_all, add = stack.pop, stack.extend, dep.add
    while stack:  # runs once per tensor of the model: kept flat on purpose
        t = pop()
        if t is None or t in dep:
            continue
        add(t)
        inst = t & _INST
        if inst in transparent:
            push_all(transparent[inst].get(t >> _OUT, ()))
        else:
            push_all(inputs[inst])
    return dep


def _subgraph(flat: Flat, consumers: Any, source: int, output: int, dep_insts: set[int]
              ) -> tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]:
    """Nodes downstream of ``source`` (any data edge) that ``output`` depends on."""
    keys = flat.keys
    start = source & _INST
    seen = {start}
    queue = deque([start])
    while queue:
        inst = queue.popleft()
        for index in range(max(1, len(flat.out_types[inst]))):
            for consumer, _ in consumers.get(_tensor(inst, index), []):
                if consumer in dep_insts and consumer not in seen:
                    seen.add(consumer)
                    queue.append(consumer)
    nodes = [(keys[i], flat.ops[i], "target" if i == start else
              "output" if i == output & _INST else None)
             for i in sorted(seen, key=keys.__getitem__)]
    transparent = flat.transparent
    edges = sorted({(keys[r & _INST], keys[i]) for i in seen for r in flat.inputs[i]
                    if r is not None and r & _INST in seen} |
                   {(keys[r & _INST], keys[i]) for i in seen if transparent.get(i)
                    for refs in transparent[i].values() for r in refs if r & _INST in seen})
    return nodes, edges


def _add_consumers(flat: Flat, inst: int, consumers: Any) -> None:
    transparent = flat.transparent.get(inst)
    if transparent is not None:
        for out_index, refs in transparent.items():
            for body_ref in refs:
                consumers[body_ref].append((inst, -1 - out_index))
    else:
        for position, ref in enumerate(flat.inputs[inst]):
            if ref is not None:
                consumers[ref].append((inst, position))


def _gradient_reach(flat: Flat, output: int, record: bool = False
                    ) -> tuple[set[int], list[tuple[int, int, int]]]:
    """Every tensor a gradient of ``output`` reaches: one backward pass along edges
    that carry gradients, through inputs their consumer passes a gradient to. With
    ``record``, also the edges (instance, position, input) where it stopped."""
    reached: set[int] = set()
    stopped: list[tuple[int, int, int]] = []
    if not flat.trainable(output):
        return reached, stopped
    inputs, out_types, ops, transparent = flat.inputs, flat.out_types, flat.ops, \
        flat.transparent
    trainable, cache, carriers = flat.trainable, flat.passes_cache, _CARRIERS
    stack = [output]
    pop, push, add, stop = stack.pop, stack.append, reached.add, stopped.append
    while stack:  # depth-first: the order does not matter, the set does
        t = pop()
        if t in reached:
            continue
        add(t)
        inst = t & _INST
        if inst in transparent:
            stack.extend(r for r in transparent[inst].get(t >> _OUT, []) if trainable(r))
            continue
        op = ops[inst]
        # variadic ops are cached under (op, counts) by _passes: not found here
        reasons = cache.get(op, _NO_REASONS) if op not in _IDENTITY_LIKE else _NO_REASONS
        position = -1
        for ref in inputs[inst]:
            position += 1
            # an edge to a tensor reached already can still be where a path stops
            if ref is None or (ref in reached and not record):
                continue
            # trainable(ref), inlined: this runs once per edge of the model
            types = out_types[ref & _INST]
            index = ref >> _OUT
            if (types[index] if index < len(types) else (types[0] if types else 0)) \
                    not in carriers:
                if record:
                    stop((inst, position, ref))
                continue
            reason = reasons.get(position, _MISSING)
            if reason is _MISSING:
                reason = _passes(flat, inst, position)
            if reason is None:
                push(ref)
            elif record:
                stop((inst, position, ref))
    return reached, stopped


def _blocking_ops(flat: Flat, consumers: Any, source: int, dep: set[int],
                  dep_insts: set[int]) -> list[BlockingOp]:
    """Every op where a gradient path from a blocked ``source`` stops while the output
    still depends on what the op produces."""
    seen: set[int] = set()
    queue = deque([source])
    blocking: dict[int, BlockingOp] = {}
    nodes, functions, trainable = flat.nodes, flat.functions, flat.trainable
    while queue:
        t = queue.popleft()
        if t in seen:
            continue
        seen.add(t)
        for inst, position in consumers.get(t, []):
            node = nodes[inst]
            if position < 0:  # into a call's output through its body
                queue.append(_tensor(inst, -1 - position))
                continue
            reason = _passes(flat, inst, position)
            if reason is not None:
                if inst in dep_insts and reason != REPLACED:
                    blocking[inst] = BlockingOp(node.name, node.op, functions[inst], reason)
                continue
            if inst in flat.transparent:
                continue  # the body consumes the input through its arguments
            for out_index in range(len(flat.out_types[inst])):
                out = _tensor(inst, out_index)
                if trainable(out):
                    queue.append(out)
                elif out in dep:
                    blocking[inst] = BlockingOp(node.name, node.op, functions[inst],
                                                "integer_edge")
    return sorted(blocking.values(), key=lambda b: (b.function or "", b.node))


@dataclass(frozen=True)
class _Source:
    """A target as the walks see it: the tensors that stand for it (a variable can be
    captured through several handles)."""

    kind: str
    name: str
    sources: tuple[int, ...]
    public: Target


def _targets(model: Model, flat: Flat) -> tuple[list[_Source], dict[str, list[_Source]]]:
    """The trainable variables (every signature may use them) and, per signature, its
    floating inputs. Inputs of different signatures are different tensors even where
    their keys are the same."""
    top = flat.top
    handles: dict[str, list[int]] = {}
    for node_name, name in sorted(model.variables.items()):  # top-level variable handles
        if node_name in top and (model.trainable is None or name in model.trainable):
            handles.setdefault(name, []).append(top[node_name])
    variables = [_Source("variable", name, tuple(sources),
                         Target("variable", name, model.variable_paths.get(name, "")))
                 for name, sources in sorted(handles.items())]
    inputs: dict[str, list[_Source]] = {}
    for sig in model.signatures.values():
        for name, (tensor, dtype) in sorted(sig.inputs.items()):
            ref = _top_tensor(flat, tensor)
            if ref is not None and dtype in _schema.DIFFERENTIABLE_TYPES:
                inputs.setdefault(sig.key, []).append(
                    _Source("input", name, (ref,), Target("input", name, signature=sig.key)))
    if not model.signatures:  # a bare GraphDef: its float placeholders
        ops, out_types = flat.ops, flat.out_types
        for key, inst in sorted(top.items()):
            if ops[inst] == "Placeholder" and out_types[inst] and \
                    out_types[inst][0] in _schema.DIFFERENTIABLE_TYPES:
                inputs.setdefault("", []).append(
                    _Source("input", key, (inst,), Target("input", key, signature="")))
    return variables, inputs


def _top_tensor(flat: Flat, text: str) -> int | None:
    """The tensor ``node:index`` of the top-level graph (None: no such node)."""
    node, _, index = text.partition(":")
    inst = flat.top.get(node)
    if inst is None:
        return None
    try:
        number = int(index or 0)
    except ValueError:
        return None
    if not 0 <= number < max(1, len(flat.out_types[inst])):
        return None
    return _tensor(inst, number)


def output_keys(model: Model) -> list[tuple[str, str]]:
    """(signature, output key) of every output ``check`` can be asked about."""
    return [(sig.key, name) for sig in model.signatures.values()
            for name, (_, dtype) in sig.outputs.items()
            if dtype in _schema.DIFFERENTIABLE_TYPES]


def _outputs(model: Model, flat: Flat, wanted: list[tuple[str | None, str]] | None):
    for sig in model.signatures.values():
        for name, (tensor, dtype) in sorted(sig.outputs.items()):
            if dtype not in _schema.DIFFERENTIABLE_TYPES:
                continue  # an integer output has no gradient to ask for
            if wanted and (sig.key, name) not in wanted and (None, name) not in wanted:
                continue
            ref = _top_tensor(flat, tensor)
            if ref is not None:
                yield sig.key, name, ref
    if not model.signatures:
        if wanted:
            for out in wanted:
                ref = _top_tensor(flat, out[1])
                if ref is not None:
                    yield "", out[1], ref
            return
        # a bare GraphDef: the floating outputs of top-level nodes nothing consumes
        # (set operations in C: the graph may have millions of nodes)
        top = flat.top
        consumed: set[int | None] = set(chain.from_iterable(flat.inputs[:len(top)]))
        consumed.discard(None)
        consumed.update([t & _INST for t in consumed if t is not None and t > _INST])
        keys, ops, out_types = flat.keys, flat.ops, flat.out_types
        for inst in sorted(set(top.values()) - consumed):
            if ops[inst] != "Placeholder":
                for index, dtype in enumerate(out_types[inst]):
                    if dtype in _schema.DIFFERENTIABLE_TYPES:
                        yield "", f"{keys[inst]}:{index}", _tensor(inst, index)


# ops whose derivative jumps: finite differences straddling the point disagree
NON_SMOOTH_OPS = frozenset({
    "Relu", "Relu6", "LeakyRelu", "Abs", "Sign", "Round", "Floor", "Ceil", "Rint",
    "Maximum", "Minimum", "Max", "Min", "MaxPool", "MaxPoolV2", "MaxPool3D",
    "MaxPoolWithArgmax", "ClipByValue", "FloorDiv", "FloorMod", "Mod", "TruncateDiv",
    "TruncateMod", "SegmentMax", "SegmentMin", "UnsortedSegmentMax",
    "UnsortedSegmentMin", "TopKV2", "ArgMax", "ArgMin", "Select", "SelectV2",
    "FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars", "QuantizeAndDequantizeV2",
    "QuantizeAndDequantizeV4"})
# ops that run Python: their gradient is whatever the Python side gives (often none)
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def path_ops(model: Model, facts: dict[str, Any], pairs: list[tuple[str, str]]
             ) -> dict[tuple[str, str], tuple[bool, bool, list[tuple[str, BlockingOp]]]]:
    """For each (output, target): whether the output depends on the target at all,
    whether a gradient path reaches it, and the ops between them that explain a
    numerical verdict, as (kind, op) with kind
    ``stops`` (a gradient path stops there), ``python`` (runs Python),
    ``custom_gradient``, ``flagged`` (the release's numerical probe flagged the op's
    gradient) or ``non_smooth``."""
    flat = Flat(model, facts)
    flat.add_graph(model.nodes, "", None, {})
    consumers: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for inst in range(len(flat.keys)):
        _add_consumers(flat, inst, consumers)
    by_key = dict(zip(flat.keys, range(len(flat.keys))))  # subgraphs name their nodes
    variables, inputs = _targets(model, flat)
    targets = {t.name: t.sources for t in variables + [t for sig in inputs.values()
                                                        for t in sig]}
    outputs = {name: tensor for _, name, tensor in _outputs(model, flat, None)}
    out: dict[tuple[str, str], tuple[bool, bool, list[tuple[str, BlockingOp]]]] = {}
    reach: dict[int, set[int]] = {}  # output tensor -> what its gradient reaches
    for output, target in pairs:
        tensor, sources = outputs.get(output), targets.get(target)
        if tensor is None or sources is None:
            continue
        if tensor not in reach:
            reach[tensor] = _gradient_reach(flat, tensor)[0]
        dep = _depends_on(flat, tensor)
        dep_insts = {t & _INST for t in dep}
        source = next((s for s in sources if s & _INST in dep_insts), None)
        if source is None:
            out[(output, target)] = (False, False, [])
            continue
        found = [("stops", b) for b in _blocking_ops(flat, consumers, source, dep,
                                                      dep_insts)]
        stopping = {b.node for _, b in found}
        nodes, _ = _subgraph(flat, consumers, source, tensor, dep_insts)
        for key, op, _role in nodes:
            inst = by_key[key]
            node = flat.nodes[inst]

            def blocking(reason: str, node: Any = node, op: str = op, inst: int = inst
                         ) -> BlockingOp:
                return BlockingOp(node.name, op, flat.functions[inst], reason)

            if op in PYTHON_OPS and node.name not in stopping:
                found.append(("stops", blocking("python_function")))
            if "_gradient_op_type" in node.attr:
                found.append(("custom_gradient", blocking("custom_gradient")))
            fact = facts.get(op)
            if fact is not None and fact.verification == "flagged":
                found.append(("flagged", blocking("gradient_flagged_by_probe")))
            if op in NON_SMOOTH_OPS:
                found.append(("non_smooth", blocking("non_smooth")))
        out[(output, target)] = (True, any(s in reach[tensor] for s in sources), found)
    return out
