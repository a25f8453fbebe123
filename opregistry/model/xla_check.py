"""``check --xla``: does an output's training step compile under XLA on the CPU?

What TF compiles is the *step*. For a loaded call (a TF2 SavedModel's signature, from
``tf.saved_model.save`` or Keras ``model.export``) that includes the call's whole
backward function, whichever output is differentiated: the gradient of every op between
the step's targets and any output of the call, the forward values it needs, and the loop
and branch rewrites the loaded backward makes (``step_findings``); an op only another
output needs, off every gradient path, is pruned, so the view stays per output. Where TF
prunes the graph per fetch (a TF1 graph, a GraphDef, a traced step), each output is its
own step (``xla_findings``). The targets are the trainable variables (a graph without
variables: its floating inputs); a loaded call's backward also differentiates every
floating input of the call, which decides its loops' and branches' rewrites.

Three things must compile:

* every op of the forward pass (a loaded call: also the forward values its whole
  backward function uses), as the release's harvest compiled it (``xla``);
* the gradient of every op TensorFlow differentiates in the backward pass: an op
  downstream of a target whose output a gradient of an output reaches, as the harvest
  compiled that gradient (``xla_gradient``);
* the structures compiling teaches, which no single op's harvest shows
  (``xla_structures``).

An op the release was not harvested with XLA for is ``unknown``, said as such.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Mapping

from opregistry.db.vocabulary import XLA_NOTHING_TO_COMPILE as NOTHING_TO_COMPILE
from opregistry.model import xla_structures as rules
from opregistry.model.flatten import INST, OUT, Flat, tensor_id
from opregistry.model.results import XlaFinding
from opregistry.model.walks import WalkState
from opregistry.model.xla_structures import Add
from opregistry.registry.lookup import Xla
from opregistry.tf_types import Proto
from opregistry.vocabulary import XlaPart, XlaStepStatus

# ops XLA takes as the frame of any compiled function, not as computations: arguments,
# constants, variable reads, calls and control flow (their bodies are checked op by op,
# the While's structure by its own rule). The harvest cannot build most of them alone.
FRAME_OPS = frozenset({
    "Placeholder", "_Arg", "_Retval", "Const", "NoOp", "Identity", "IdentityN",
    "ReadVariableOp", "VarHandleOp", "VarIsInitializedOp", "StopGradient",
    "PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If",
    "StatelessIf", "Case", "StatelessCase"})
WHILE_OPS = rules.WHILE_OPS
CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
# a release harvested with XLA before ops without a registered gradient were compiled
# alone (document format 4): such an op (Range, TensorArraySizeV3...) has no verdict
NOT_COMPILED = ("no XLA verdict: this release was harvested with XLA before ops without a "
                "registered gradient were compiled (harvest it again with --xla)")

Cache = dict[tuple[int, ...], set[int]]
# where a loaded call's finding is, in the step TF compiles whole
_WHERE = {"forward": "in the forward pass of {}: this output's, or what the call's "
                     "whole backward function needs of it",
          "gradient": "in the backward function of {}, which TF builds for the whole call "
                      "whatever output the step differentiates",
          "structure": "in {} as the call's whole backward function rewrites it"}


def xla_findings(flat: Flat, state: WalkState, signature: str, output: str, tensor: int,
                 sources: Iterable[int], downstream_cache: Cache,
                 meta_graph: str = "") -> list[XlaFinding]:
    """What keeps ``output``'s training step (gradients for ``sources``) from compiling
    under XLA, and what cannot be told (``unknown``), in the order of the graph: the
    step of a graph TF prunes per fetch."""
    below = _below(flat, state, sources, downstream_cache)
    found: list[XlaFinding] = []

    def add(inst: int, part: XlaPart, status: XlaStepStatus, cause: str | None,
            message: str | None) -> None:
        node = flat.nodes[inst]
        found.append(XlaFinding(signature, output, node.name, node.op, flat.functions[inst],
                                part, status, cause, message, meta_graph=meta_graph))

    _collect(flat, state.dep_insts(tensor), below, below, state.reach(tensor), add, None,
             state)
    return found


def step_findings(flat: Flat, state: WalkState, signature: str, call: int,
                  outputs: list[tuple[str, int]], sources: Iterable[int],
                  call_sources: Iterable[int], downstream_cache: Cache,
                  meta_graph: str = "") -> dict[str, list[XlaFinding]]:
    """output -> what keeps the step over loaded ``call`` from compiling under XLA.

    TF builds one backward function for the whole call: the gradient for ``sources``
    of every op between them and any output of the call (the other outputs' upstream
    gradients are zeros, not pruned), and the forward values those gradients use. What
    the step compiles for one output is then that output's forward pass, the whole
    backward function and the forward ops it needs; a loop or branch in it is the one
    the backward rewrote for every float input in ``call_sources``. Ops only other
    outputs need, off every gradient path of the sources, are pruned."""
    below = _below(flat, state, sources, downstream_cache)
    below_all = _below(flat, state, call_sources, downstream_cache)
    reach: set[int] = set()
    for _output, tensor in outputs:
        reach |= state.reach(tensor)
    backward = [j for j in below if rules.reached(flat, j, reach)]
    needed = _needed(flat, backward)
    function = _called(flat, call)
    found: dict[str, list[XlaFinding]] = {}
    sources = set(sources)
    for output, tensor in outputs:
        mine = found[output] = []
        # the gradients TF folds to constants in this output's step (zeros upstream,
        # constant operands): neither they nor the forward ops they stand on are in it
        folded = rules.folded(flat, state.consumers(), backward, state.reach(tensor),
                              lambda t: t in sources or (
                                  t & INST in below and flat.carries_gradient(t)), call)
        mine_below = below - folded if folded else below
        mine_needed = _needed(flat, [j for j in backward if j not in folded]) \
            if folded else needed

        def add(inst: int, part: XlaPart, status: XlaStepStatus, cause: str | None,
                message: str | None, mine: list[XlaFinding] = mine, output: str = output) -> None:
            node = flat.nodes[inst]
            where = _WHERE[part].format(function)
            mine.append(XlaFinding(signature, output, node.name, node.op,
                                   flat.functions[inst], part, status, cause,
                                   f"{message} ({where})" if message else where,
                                   meta_graph=meta_graph))

        _collect(flat, state.dep_insts(tensor) | mine_needed, mine_below, below_all, reach,
                 add, state, state)
    return found


def _needed(flat: Flat, backward: list[int]) -> set[int]:
    """The forward ops a backward function of the ops ``backward`` stands on: those ops,
    and what the values their gradients read depend on (the operands and outputs of
    the ops whose gradient uses them: an Add's gradient reads neither, so an operand
    only another output's Add needs is not computed for the step). A call's or loop's
    outputs stand for its bodies' ops, which are in ``backward`` themselves where they
    need to be: only the instance, not what its outputs reach."""
    reads = [j for j in backward if flat.ops[j] not in rules.CAPTURES_NOTHING]
    return {t & INST for t in _depends_on_all(flat, [
        *(t for j in reads for t in flat.inputs[j] if t is not None),
        *(tensor_id(j, i) for j in reads if j not in flat.transparent
          for i in range(len(flat.out_types[j])))])} | set(backward)


def _depends_on_all(flat: Flat, seeds: list[int]) -> set[int]:
    """Every tensor any of ``seeds`` reaches backwards along data edges (one walk)."""
    dep: set[int] = set()
    stack: list[int | None] = list(seeds)
    while stack:
        t = stack.pop()
        if t is None or t in dep:
            continue
        dep.add(t)
        inst = t & INST
        if inst in flat.transparent:
            stack.extend(flat.transparent[inst].get(t >> OUT, ()))
        else:
            stack.extend(flat.inputs[inst])
    return dep


def signature_call(flat: Flat, tensors: Iterable[int]) -> int | None:
    """The one top-level function call a signature's outputs come from (a TF2
    SavedModel: TF runs and differentiates that function whole), or None (a TF1 graph or
    a GraphDef: TF runs what a fetch needs)."""
    if flat.model.format != "savedmodel":
        return None
    calls = set()
    for tensor in tensors:
        for _ in range(16):
            inst = tensor & INST
            if flat.functions[inst] is not None:
                return None
            if flat.ops[inst] in CALL_OPS:
                calls.add(inst)
                break
            ins = flat.inputs[inst]
            index = tensor >> OUT if flat.ops[inst] == "IdentityN" else 0
            if flat.ops[inst] not in ("Identity", "IdentityN") or len(ins) <= index or \
                    ins[index] is None:
                return None
            tensor = ins[index]  # type: ignore[assignment]
        else:
            return None
    return calls.pop() if len(calls) == 1 else None


def _called(flat: Flat, call: int) -> str:
    node = flat.nodes[call]
    try:
        return f"function {node.attr['f'].func.name}"
    except (KeyError, AttributeError):
        return f"the function {node.name} calls"


def _below(flat: Flat, state: WalkState, sources: Iterable[int], cache: Cache) -> set[int]:
    key = tuple(sorted(set(sources)))
    if key not in cache:
        cache[key] = downstream(flat, state.consumers(), key)
    return cache[key]


def _collect(flat: Flat, insts: Iterable[int], below: set[int], below_all: set[int],
             reach: set[int], add: Add, loaded: WalkState | None, state: WalkState) -> None:
    """The findings of the forward ops ``insts`` in graph order; ``loaded`` (the
    analysis state) for a loaded call, whose loops and branches its backward rewrites."""
    ordered = sorted(insts, key=flat.keys.__getitem__)
    calls = {i for i in ordered if flat.ops[i] in WHILE_OPS + rules.BRANCH_OPS
             and flat.inputs[i]} if loaded is not None else set()
    bodies = rules.bodies(flat, calls) if calls else {}
    for inst in ordered:
        op = flat.ops[inst]
        if op in WHILE_OPS:
            rules.while_structure(flat, inst, below_all, reach, add)
            if inst in bodies:
                rules.loaded_loop_reads(flat, inst, bodies[inst], below, below_all, reach,
                                        add)
            continue
        if op in rules.BRANCH_OPS and inst in bodies:
            rules.loaded_branches(flat, inst, bodies[inst], below_all, reach, add)
            continue
        if inst in flat.transparent or op in FRAME_OPS:
            continue
        if _list_structures(flat, inst, below, reach, add, state):
            continue
        facts = flat.facts.get(op)
        xla = getattr(facts, "xla", None)
        if facts is not None and xla is not None and xla.variants:  # this node's setting
            xla = setting_verdict(xla, flat.nodes[inst].attr, facts.definition)
        if facts is None or xla is None:
            add(inst, "forward", "unknown", None, "not in the database" if facts is None
                else NOT_COMPILED if facts.gradient != "registered" and _harvested_with_xla(
                    flat) else "the release was not harvested with XLA for this op")
            continue
        if xla.forward != "compiles":
            add(inst, "forward", xla.forward, xla.forward_op if xla.forward == "fails" else None,
                xla.forward_reason)
            continue
        if inst in below and facts.gradient == "registered" and \
                rules.reached(flat, inst, reach) and xla.gradient != "compiles" and \
                xla.gradient_reason != NOTHING_TO_COMPILE:
            add(inst, "gradient", xla.gradient,
                xla.gradient_blocker if xla.gradient == "fails" else None, xla.gradient_reason)


def _list_structures(flat: Flat, inst: int, below: set[int], reach: set[int], add: Add,
                     state: WalkState) -> bool:
    """The TensorList / TensorArray rules for ``inst``; True where they decide the op
    (its own harvest verdict is not asked)."""
    op = flat.ops[inst]
    if op == "TensorListSetItem" and rules.resizes(flat, inst):
        # the harvest compiled this op's gradient without resizing: the attr decides
        if inst in below and rules.reached(flat, inst, reach) and \
                not rules.resized_before(flat, inst):
            add(inst, "structure", "fails", rules.TENSOR_ARRAY_UNKNOWN_SIZE,
                "a TensorArray with dynamic_size=True written on a gradient path: the "
                "gradient of its writes resizes the list (TensorListResize), which "
                "XLA cannot compile; give the TensorArray its size")
        return True
    if op in rules.UNSIZED_LISTS or op == "TensorArrayV3":
        # a list's making compiles when its size is known: the structure decides
        # (the harvest cannot build one alone: its size is an argument)
        rules.list_structure(flat, inst, add)
        return True
    if op in rules.LIST_READS:
        # an element past the size XLA gives a TensorArray: the list decides
        message = rules.past_list_size(flat, inst)
        if message is not None:
            add(inst, "structure", "fails", rules.TENSOR_ARRAY_PAST_SIZE, message)
            return True
    if op in rules.LIST_VALUES:
        # compiles, and computes other numbers: XLA keeps a dynamic TensorArray's size
        said = rules.writes_past_size(flat, inst, state.consumers(),
                                      lambda j: j in below and rules.reached(
                                          flat, j, reach))
        if said is not None:
            add(inst, "structure", said[0], rules.TENSOR_ARRAY_WRITES_PAST_SIZE, said[1])
    return False


def setting_verdict(xla: Xla, attrs: Mapping[str, Proto], definition: dict[str, Any]) -> Xla:
    """The verdict of the variant whose setting a node has (``attrs``: its AttrValue
    messages by name; an attribute left out, as SavedModels leave defaults out: the
    OpDef's default), or the op's own verdict where no variant matches."""
    defaults = {a["name"]: a.get("default") or {} for a in definition.get("attrs", ())}
    for variant in xla.variants:
        if all(_value(attrs, defaults, name, type(value)) == value
               for name, value in variant.attrs):
            return variant.xla
    return xla


def _value(attrs: Mapping[str, Proto], defaults: dict[str, dict[str, object]], name: str,
           kind: type) -> object:
    """A node's value of attribute ``name`` as ``kind`` (bool, int or str); None where
    neither the node nor the OpDef says."""
    field = {bool: "b", int: "i", str: "s"}.get(kind)
    if field is None:
        return None
    if name in attrs:
        value = getattr(attrs[name], field)
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else kind(value)
    return defaults.get(name, {}).get(field)


def _harvested_with_xla(flat: Flat) -> bool:
    return any(getattr(facts, "xla", None) is not None for facts in flat.facts.values())


def verdict(findings: list[XlaFinding]) -> XlaStepStatus:
    """An output's XLA status from its findings: fails (TF raises or aborts), differs
    (compiles and computes other numbers than without XLA), unknown or compiles."""
    statuses = {x.status for x in findings}
    worst: tuple[XlaStepStatus, ...] = ("fails", "differs", "unknown")
    return next((s for s in worst if s in statuses), "compiles")


def downstream(flat: Flat, consumers: dict[int, list[tuple[int, int]]],
               sources: tuple[int, ...]) -> set[int]:
    """Instances a gradient-carrying value of ``sources`` flows into: the ops
    ``tf.GradientTape`` records while watching the targets."""
    seen: set[int] = set()
    insts: set[int] = set()
    stack = list(sources)
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        for inst, position in consumers.get(t, ()):
            insts.add(inst)
            if position < 0:  # into a call's (or loop's) output through its body
                stack.append(tensor_id(inst, -1 - position))
                continue
            if inst in flat.transparent:
                continue  # the body consumes the input through its arguments
            for index in range(len(flat.out_types[inst])):
                out = tensor_id(inst, index)
                if flat.carries_gradient(out):
                    stack.append(out)
    return insts
