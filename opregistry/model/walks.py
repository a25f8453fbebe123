"""The walks over a flattened graph: whether an op passes a gradient from an input
(``passes``), what a gradient reaches backwards (``gradient_reach``, recording where it
stops), what an output depends on, and the forward walk to the ops where a path stops."""
from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal

from opregistry.model.flatten import IDENTITY_LIKE, INST, OUT, Flat, tensor_id
from opregistry.model.graph import STATIC_FORMATS, Node
from opregistry.model.readers.schema import GRADIENT_CARRIERS
from opregistry.model.results import GradientStop
from opregistry.vocabulary import StopReason

if TYPE_CHECKING:
    from opregistry.registry.facts import OpFacts
    from opregistry.registry.lookup import InputGradient

# tensor -> [(instance, input position or -1 - output index)]: who reads it
Consumers = dict[int, list[tuple[int, int]]]
# what ``passes`` says of an input: a reason its gradient stops, or that a custom
# gradient replaces it (REPLACED); None: it passes
Passing = Literal[StopReason, "replaced_by_custom_gradient"]
# (instance, input position, input tensor, reason): where an output's gradient stops
Stop = tuple[int, int, int, StopReason]


def passes(flat: Flat, inst: int, position: int) -> Passing | None:
    """None if ``inst`` passes a gradient from input ``position``, else the reason."""
    node = flat.nodes[inst]
    op = node.op
    if op not in IDENTITY_LIKE:  # custom gradients are IdentityN: the rest can be cached
        key = flat.passes_key(node)
        by_position = flat.passes_cache.setdefault(key, {})
        if position not in by_position:
            by_position[position] = op_passes(flat, node, position)
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
    return op_passes(flat, node, position)


_MISSING = object()
# a custom gradient's forward results: their gradient is the custom one, so the walks
# neither pass nor report them
REPLACED: Final = "replaced_by_custom_gradient"
_NO_REASONS: dict[int, Passing | None] = {}  # never filled: look the reason up with passes


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def op_passes(flat: Flat, node: Node, position: int) -> StopReason | None:
    if node.op in PYTHON_OPS and flat.model.format in STATIC_FORMATS:
        return "python_function_not_saved"
    facts = flat.facts.get(node.op)
    if facts is None:
        return "unknown_op"
    if facts.gradient == "no_gradient":
        return "no_gradient"
    if facts.gradient == "missing":
        return "missing"
    if facts.effective == "none":
        return "none"
    if facts.inputs:
        row = _input_row(flat, node, facts, position)
        if row is not None and row.result != "gradient" and facts.effective == "partial":
            return "partial_input"
        if row is not None and row.result in ("none", "zero", "raises") and \
                facts.effective == "differentiable":
            return "partial_input"
    return None


def _input_row(flat: Flat, node: Node, facts: OpFacts, position: int
               ) -> InputGradient | None:
    """The probe's row for input ``position`` of ``node``: by argument name, as a
    variadic op (ConcatV2, AddN) was probed with its own N."""
    names = flat.input_arg_names(node)
    name = names[position] if names is not None and position < len(names) else None
    return next((i for i in facts.inputs if i.name == name), None) if name else \
        next((i for i in facts.inputs if i.position == position), None)


def per_output_ops(flat: Flat) -> frozenset[str]:
    """The op types of the model whose gradient gives some input nothing from some
    output's upstream (the per-output facts of revision 0007): FusedBatchNorm's batch
    mean and variance give its input nothing. Computed once per flattened graph."""
    if flat.per_output is None:
        flat.per_output = frozenset(
            op for op, facts in flat.facts.items() if facts is not None and any(
                row.by_output and any(r != "gradient" for r in row.by_output)
                for row in facts.inputs))
    return flat.per_output


def output_passes(flat: Flat, inst: int, out_index: int, position: int
                  ) -> StopReason | None:
    """None if ``inst``'s gradient passes to input ``position`` what arrives at its
    output ``out_index`` (or nothing is known per output), else ``partial_input``.
    Only asked where ``passes`` says the input gets a gradient at all."""
    node = flat.nodes[inst]
    facts = flat.facts.get(node.op)
    row = _input_row(flat, node, facts, position) if facts is not None else None
    table = row.by_output if row is not None else None
    if not table:
        return None
    if len(table) != len(flat.out_types[inst]):  # variadic outputs: only if uniform
        return None if len(set(table)) != 1 or table[0] == "gradient" else "partial_input"
    return None if out_index >= len(table) or table[out_index] == "gradient" \
        else "partial_input"


# ops that run Python: their gradient is whatever the Python side gives (often none)
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def relevant_stops(flat: Flat, raw: list[tuple[int, int, int, int]]) -> list[Stop]:
    """From the edges where a gradient walk stopped, the stops that matter: an edge that
    could carry a gradient into an op that passes none, or an integer edge whose value
    an op would pass a gradient for (``cast(argmax(h))``: followed back to ArgMax). An
    integer that only reaches a condition, an index or a shape is not followed."""
    found: dict[tuple[int, int], Stop] = {}
    values: list[int] = []  # integer tensors whose value the gradient region uses
    for inst, position, ref, out in raw:
        if flat.carries_gradient(ref):
            reason = passes(flat, inst, position)
            if reason is None:  # it passes from some output, not from this one
                reason = output_passes(flat, inst, out, position)
            if reason is not None and reason != REPLACED:
                found[(inst, position)] = (inst, position, ref, reason)
        elif passes(flat, inst, position) is None:
            values.append(ref)
    seen: set[int] = set()
    while values:
        t: int = values.pop()
        if t in seen:
            continue
        seen.add(t)
        inst = t & INST
        if inst in flat.transparent:
            values.extend(flat.transparent[inst].get(t >> OUT, ()))
            continue
        for position, edge in enumerate(flat.inputs[inst]):
            if edge is None:
                continue
            reason = passes(flat, inst, position)
            if reason == REPLACED:
                continue
            if flat.carries_gradient(edge):  # where a gradient would have turned into an integer
                found.setdefault((inst, position), (inst, position, edge,
                                                    reason or "integer_edge"))
            elif reason is None:
                values.append(edge)
    return [found[k] for k in sorted(found)]


def depends_on(flat: Flat, output: int) -> set[int]:
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
        inst = t & INST
        if inst in transparent:
            push_all(transparent[inst].get(t >> OUT, ()))
        else:
            push_all(inputs[inst])
    return dep


def subgraph(flat: Flat, consumers: Consumers, source: int, output: int, dep_insts: set[int]
              ) -> tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]:
    """Nodes downstream of ``source`` (any data edge) that ``output`` depends on."""
    keys = flat.keys
    start = source & INST
    seen = {start}
    queue = deque([start])
    while queue:
        inst = queue.popleft()
        for index in range(max(1, len(flat.out_types[inst]))):
            for consumer, _ in consumers.get(tensor_id(inst, index), []):
                if consumer in dep_insts and consumer not in seen:
                    seen.add(consumer)
                    queue.append(consumer)
    nodes = [(keys[i], flat.ops[i], "target" if i == start else
              "output" if i == output & INST else None)
             for i in sorted(seen, key=keys.__getitem__)]
    transparent = flat.transparent
    edges = sorted({(keys[r & INST], keys[i]) for i in seen for r in flat.inputs[i]
                    if r is not None and r & INST in seen} |
                   {(keys[r & INST], keys[i]) for i in seen if transparent.get(i)
                    for refs in transparent[i].values() for r in refs if r & INST in seen})
    return nodes, edges


def add_consumers(flat: Flat, inst: int, consumers: Consumers) -> None:
    transparent = flat.transparent.get(inst)
    if transparent is not None:
        for out_index, refs in transparent.items():
            for body_ref in refs:
                consumers[body_ref].append((inst, -1 - out_index))
    else:
        for position, ref in enumerate(flat.inputs[inst]):
            if ref is not None:
                consumers[ref].append((inst, position))


def gradient_reach(flat: Flat, output: int, record: bool = False, more: Sequence[int] = ()
                    ) -> tuple[set[int], list[tuple[int, int, int, int]]]:
    """Every tensor a gradient of ``output`` (and of ``more``) reaches: one backward
    pass along edges that carry gradients, through inputs their consumer passes a
    gradient to (from the output it arrives at). With ``record``, also the edges
    (instance, position, input, the output the gradient arrived at) where it stopped."""
    reached: set[int] = set()
    stopped: list[tuple[int, int, int, int]] = []
    stack = [t for t in (output, *more) if flat.carries_gradient(t)]
    if not stack:
        return reached, stopped
    inputs, out_types, ops, transparent = flat.inputs, flat.out_types, flat.ops, \
        flat.transparent
    carries, cache, carriers = flat.carries_gradient, flat.passes_cache, GRADIENT_CARRIERS
    per_output = per_output_ops(flat)
    pop, push, add, stop = stack.pop, stack.append, reached.add, stopped.append
    while stack:  # depth-first: the order does not matter, the set does
        t = pop()
        if t in reached:
            continue
        add(t)
        inst = t & INST
        if inst in transparent:
            stack.extend(r for r in transparent[inst].get(t >> OUT, []) if carries(r))
            continue
        op = ops[inst]
        # variadic ops are cached under (op, counts) by passes: not found here
        reasons = cache.get(op, _NO_REASONS) if op not in IDENTITY_LIKE else _NO_REASONS
        position = -1
        for ref in inputs[inst]:
            position += 1
            # an edge to a tensor reached already can still be where a path stops
            if ref is None or (ref in reached and not record):
                continue
            # carries_gradient(ref), inlined: this runs once per edge of the model
            types = out_types[ref & INST]
            index = ref >> OUT
            if (types[index] if index < len(types) else (types[0] if types else 0)) \
                    not in carriers:
                if record:
                    stop((inst, position, ref, t >> OUT))
                continue
            reason = reasons.get(position, _MISSING)
            if reason is _MISSING:
                reason = passes(flat, inst, position)
            if reason is None and op in per_output:
                reason = output_passes(flat, inst, t >> OUT, position)
            if reason is None:
                push(ref)
            elif record:
                stop((inst, position, ref, t >> OUT))
    return reached, stopped


def path_stops(flat: Flat, consumers: Consumers, source: int, dep: set[int],
               dep_insts: set[int]) -> list[GradientStop]:
    """Every op where a gradient path from a blocked ``source`` stops while the output
    still depends on what the op produces."""
    seen: set[int] = set()
    queue = deque([source])
    blocking: dict[int, GradientStop] = {}
    nodes, functions, carries = flat.nodes, flat.functions, flat.carries_gradient
    while queue:
        t = queue.popleft()
        if t in seen:
            continue
        seen.add(t)
        for inst, position in consumers.get(t, []):
            node = nodes[inst]
            if position < 0:  # into a call's output through its body
                queue.append(tensor_id(inst, -1 - position))
                continue
            reason = passes(flat, inst, position)
            if reason is not None:
                if inst in dep_insts and reason != REPLACED:
                    blocking[inst] = GradientStop(node.name, node.op, functions[inst], reason)
                continue
            if inst in flat.transparent:
                continue  # the body consumes the input through its arguments
            for out_index in range(len(flat.out_types[inst])):
                out = tensor_id(inst, out_index)
                if carries(out) and output_passes(flat, inst, out_index, position):
                    if out in dep:  # the gradient of this output gives the input nothing
                        blocking[inst] = GradientStop(node.name, node.op, functions[inst],
                                                    "partial_input")
                elif carries(out):
                    queue.append(out)
                elif out in dep:
                    blocking[inst] = GradientStop(node.name, node.op, functions[inst],
                                                "integer_edge")
    return sorted(blocking.values(), key=lambda b: (b.function or "", b.node))


def forward_reach(flat: Flat, consumers: Consumers, sources: Sequence[int]) -> set[int]:
    """Every instance TF's ``_MarkReachedOps`` reaches from ``sources``: their ops and
    the consumers of every reached op's floating, complex, resource or variant output
    (the first half of TF's "between" walk: an op not reached is never asked for a
    gradient)."""
    reached: set[int] = set()
    seen: set[int] = set()
    stack: list[int] = []

    def reach(inst: int) -> None:
        if inst not in reached:
            reached.add(inst)
            stack.extend(tensor_id(inst, i) for i in range(len(flat.out_types[inst])))

    for source in sources:
        reach(source & INST)
    while stack:
        t = stack.pop()
        if t in seen or not flat.carries_gradient(t):
            continue
        seen.add(t)
        for consumer, position in consumers.get(t, ()):
            if position >= 0:
                reach(consumer)
            else:  # a call boundary (transparent): its output is this tensor again
                stack.append(tensor_id(consumer, -1 - position))
    return reached


class WalkState:
    """Walks of one flattened graph, each done once and kept: what an output's
    gradient reaches, where it stops, what the output depends on."""

    def __init__(self, flat: Flat):
        self.flat = flat
        self._reach: dict[int, set[int]] = {}
        self._stops: dict[int, list[Stop]] = {}
        self._upstream: dict[int, set[int]] = {}
        self._dep: dict[int, set[int]] = {}
        self._dep_insts: dict[int, set[int]] = {}
        self._consumers: dict[int, list[tuple[int, int]]] | None = None

    def reach(self, tensor: int) -> set[int]:
        if tensor not in self._reach:
            self._reach[tensor], raw = gradient_reach(self.flat, tensor, record=True)
            self._stops[tensor] = relevant_stops(self.flat, raw)
        return self._reach[tensor]

    def upstream(self, tensor: int) -> set[int]:
        """What a gradient arriving at ``tensor`` reaches (no stops recorded)."""
        if tensor not in self._upstream:
            self._upstream[tensor] = self._reach.get(tensor) or \
                gradient_reach(self.flat, tensor)[0]
        return self._upstream[tensor]

    def stops(self, tensor: int) -> list[Stop]:
        """(instance, position, input tensor, reason) of every op where the gradient
        of ``tensor`` stops while the output's value still depends on the op through
        edges a gradient could use (not only through a condition, index or shape)."""
        self.reach(tensor)
        return self._stops[tensor]

    def dep(self, tensor: int) -> set[int]:
        if tensor not in self._dep:
            self._dep[tensor] = depends_on(self.flat, tensor)
        return self._dep[tensor]

    def dep_insts(self, tensor: int) -> set[int]:
        if tensor not in self._dep_insts:
            self._dep_insts[tensor] = {t & INST for t in self.dep(tensor)}
        return self._dep_insts[tensor]

    def consumers(self) -> Consumers:
        """tensor -> [(instance, input position or -1 - output index)]: built only
        when a finding needs a forward walk."""
        if self._consumers is None:
            self._consumers = defaultdict(list)
            for inst in range(len(self.flat.keys)):
                add_consumers(self.flat, inst, self._consumers)
        return self._consumers
