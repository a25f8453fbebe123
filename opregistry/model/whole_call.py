"""Whole-call facts: TF differentiates a loaded function, a traced step or a GraphDef
function as one call and builds one backward function for all of it, so an op whose
gradient raises (``missing``: TF's LookupError) on any gradient path fails every
output of the call. A GraphDef's top level is no one call (an Estimator graph holds
many computations): there each output is its own call, ``tf.gradients(output,
targets)``, which asks only the ops between the targets and the output."""
from __future__ import annotations

from opregistry.model.flatten import INST, Flat, tensor_id
from opregistry.model.graph import STATIC_FORMATS
from opregistry.model.results import GradientStop
from opregistry.model.walks import PYTHON_OPS, Stop, WalkState, depends_on, forward_reach


def fatal_ops(flat: Flat, state: WalkState, outputs: list[tuple[str, int]],
              stops: dict[str, list[Stop]], whole_call: bool = True
              ) -> tuple[GradientStop, ...]:
    """Ops that make a model fail to differentiate every output of a signature: a
    custom gradient whose function was not saved (TF looks it up by its op type and
    raises, for the whole function call), an op of the call whose gradient raises
    (missing, or raising for every input: ``in_whole_call``), and, in a file, a
    py_function whose Python callback is not there (the signature cannot even run)."""
    found: dict[int, GradientStop] = {}
    for output_stops in stops.values():
        for inst, _position, _ref, reason in output_stops:
            # TF builds one backward function for the whole call: an op on a gradient
            # path whose gradient raises (missing: LookupError; one that raises for
            # every input, PreventGradient) fails every output
            if reason == "custom_gradient_not_saved" or (
                    whole_call and in_whole_call(flat, inst)
                    and reason in ("missing", "none")
                    and raises_in_call(flat, state, inst, outputs)):
                node = flat.nodes[inst]
                found[inst] = GradientStop(node.name, node.op, flat.functions[inst],
                                         reason if reason == "custom_gradient_not_saved"
                                         else "gradient_raises")
    if flat.model.format in STATIC_FORMATS and PYTHON_OPS & flat.model.op_types:
        used: set[int] = set()
        for _output, tensor in outputs:
            used |= state.dep_insts(tensor)
        # a py_function is stateful: a function runs it whether or not an output uses
        # its result (automatic control dependencies), so the whole signature fails
        running = {flat.functions[inst] for inst in used} - {None}
        for inst, op in enumerate(flat.ops):
            if op in PYTHON_OPS and (inst in used or flat.functions[inst] in running):
                node = flat.nodes[inst]
                found[inst] = GradientStop(node.name, node.op, flat.functions[inst],
                                         "python_function_not_saved")
    return tuple(sorted(found.values(), key=lambda b: (b.function or "", b.node)))


class Between:
    """The ops TF's ``tf.gradients(output, targets)`` may ask for a gradient: those
    reached forward from a target (``walks.forward_reach``), walked once per signature
    and only when an op whose gradient raises is in question."""

    def __init__(self, flat: Flat, state: WalkState, sources: list[int]):
        self.flat, self.state, self.sources = flat, state, sources
        self._reached: set[int] | None = None

    def __contains__(self, inst: int) -> bool:
        if self._reached is None:
            self._reached = forward_reach(self.flat, self.state.consumers(), self.sources)
        return inst in self._reached


def raising_at_top(flat: Flat, state: WalkState, tensor: int,
                   stops: list[Stop], between: Between,
                   fatal: tuple[GradientStop, ...]) -> tuple[GradientStop, ...]:
    """``fatal`` and the top-level ops of a GraphDef that make TF raise for this
    output's gradient call, ``tf.gradients(output, targets)`` (an Estimator graph
    holds many computations: its top level is no one call). TF asks an op for its
    gradient only between the targets and the output (``_PendingCount``) and only
    when a gradient arrives at it (``gradient_arrives``): a missing one raises there
    for every target of the call."""
    found = {(b.function, b.node): b for b in fatal}
    for inst, _position, _ref, reason in stops:
        node = flat.nodes[inst]
        if reason in ("missing", "none") and flat.functions[inst] is None \
                and (None, node.name) not in found and gradient_raises(flat, inst) \
                and gradient_arrives(flat, state, inst, [("", tensor)]) and inst in between:
            found[(None, node.name)] = GradientStop(node.name, node.op, None, "gradient_raises")
    return tuple(sorted(found.values(), key=lambda b: (b.function or "", b.node)))


def in_whole_call(flat: Flat, inst: int) -> bool:
    """Whether TF differentiates ``inst`` as part of one call whose gradient fails
    whole when an op's gradient raises: an op inside a SavedModel's or a GraphDef's
    function (a top-level graph is only the call), any op of a traced step (a
    tf.function, Keras's train step)."""
    if flat.model.format == "savedmodel":
        return flat.functions[inst] is not None
    # not a GraphDef's top level: an Estimator's training graph (its optimizer, its
    # gradients/ subgraph, the tf.data pipeline) is no one call; there each output is
    # its own call, tf.gradients(output, targets) (``raising_at_top``); a GraphDef's
    # functions are calls
    if flat.model.format in ("graphdef", "pbtxt"):
        return flat.functions[inst] is not None
    return True


def raises_in_call(flat: Flat, state: WalkState, inst: int,
                   outputs: list[tuple[str, int]]) -> bool:
    """Whether TF, differentiating the call, asks ``inst`` for a gradient that raises:
    its gradient raises, a gradient of some output arrives at it, and it is between
    the call's inputs and its outputs (TF walks only those ops: a Unique of a
    constant inside the call is never asked)."""
    return gradient_raises(flat, inst) and gradient_arrives(flat, state, inst, outputs) \
        and reads_call_input(flat, inst)


def reads_call_input(flat: Flat, inst: int) -> bool:
    """Whether ``inst`` depends on an input of the call: a node without inputs that is
    not a constant of the call itself (a placeholder, a variable's handle; in a
    SavedModel whatever the top-level graph passes into the function)."""
    for ref in flat.inputs[inst]:
        if ref is None:
            continue
        for tensor in depends_on(flat, ref):
            source = tensor & INST
            if not flat.inputs[source] and source not in flat.transparent and not (
                    flat.ops[source] == "Const" and in_whole_call(flat, source)):
                return True
    return False


def gradient_arrives(flat: Flat, state: WalkState, inst: int,
                     outputs: list[tuple[str, int]]) -> bool:
    """Whether a gradient of some output reaches an output of ``inst`` (TF asks an op
    for its gradient only then: Bucketize's int32 result, cast to float, gets none)."""
    mine = [tensor_id(inst, i) for i in range(len(flat.out_types[inst]))]
    return any(t in state.reach(tensor) for _output, tensor in outputs for t in mine)


def gradient_raises(flat: Flat, inst: int) -> bool:
    """Whether asking TF for ``inst``'s gradient raises: no gradient registered at all
    (``missing``), or a gradient function that raises for every input."""
    facts = flat.facts.get(flat.ops[inst])
    if facts is None:
        return False
    carrying = [i for i in facts.inputs if i.carries_gradient]
    return facts.gradient == "missing" or (
        bool(carrying) and all(i.result == "raises" for i in carrying))
