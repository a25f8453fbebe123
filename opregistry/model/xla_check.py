"""``check --xla``: does an output's training step compile under XLA on the CPU?

For every output, with the targets of its signature (the trainable variables; a graph
without variables: its floating inputs), three things must compile:

* every op the output depends on (the forward pass), as the release's harvest
  compiled it (``xla``);
* the gradient of every op TensorFlow differentiates in the backward pass: an op
  downstream of a target whose output a gradient of the output reaches (the ops
  ``tf.GradientTape`` records and then asks for a gradient), as the harvest compiled
  that gradient (``xla_gradient``);
* the structures compiling teaches, which no single op's harvest shows: a While on a
  gradient path without a maximum iteration count (its gradient keeps every iteration's
  values in TensorList accumulators of unknown size: "XLA compilation requires a fixed
  tensor list size"), TensorLists / TensorArrays of unknown size in the forward pass, and
  the writes of a ``tf.TensorArray(dynamic_size=True)`` on a gradient path (their
  gradient resizes the list: ``TensorListResize``, which XLA has no kernel for; the
  forward pass compiles). Each rule is tested against TF compiling the gradient
  (tests/test_check_xla.py).

An op the release was not harvested with XLA for is ``unknown``, said as such.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from opregistry.db.vocabulary import XLA_NOTHING_TO_COMPILE as NOTHING_TO_COMPILE
from opregistry.model.flatten import INST, Flat, tensor_id
from opregistry.model.results import XlaFinding

# ops XLA takes as the frame of any compiled function, not as computations: arguments,
# constants, variable reads, calls and control flow (their bodies are checked op by op,
# the While's structure by its own rule). The harvest cannot build most of them alone.
FRAME_OPS = frozenset({
    "Placeholder", "_Arg", "_Retval", "Const", "NoOp", "Identity", "IdentityN",
    "ReadVariableOp", "VarHandleOp", "VarIsInitializedOp", "StopGradient",
    "PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If",
    "StatelessIf", "Case", "StatelessCase"})
WHILE_OPS = ("While", "StatelessWhile")
# ops that make a TensorList / TensorArray whose size input or attr can be unknown
# (-1): XLA needs every list's size when it compiles
_UNSIZED_LISTS = {"EmptyTensorList": 1, "TensorListReserve": 1}
TENSOR_LIST_UNKNOWN_SIZE = "tensor_list_unknown_size"
TENSOR_ARRAY_UNKNOWN_SIZE = "tensor_array_unknown_size"
# TensorListSetItem's attribute for a dynamic-size TensorArray's write: its gradient
# then calls TensorListResize (tensorflow/python/ops/list_ops.py)
_RESIZE = "resize_if_index_out_of_bounds"
# a release harvested with XLA before ops without a registered gradient were compiled
# alone (document format 4): such an op (Range, TensorArraySizeV3...) has no verdict
NOT_COMPILED = ("no XLA verdict: this release was harvested with XLA before ops without a "
                "registered gradient were compiled (harvest it again with --xla)")


def xla_findings(flat: Flat, state: Any, signature: str, output: str, tensor: int,
                 sources: Iterable[int], downstream_cache: dict[tuple[int, ...], set[int]],
                 meta_graph: str = "") -> list[XlaFinding]:
    """What keeps ``output``'s training step (gradients for ``sources``) from compiling
    under XLA, and what cannot be told (``unknown``), in the order of the graph."""
    key = tuple(sorted(sources))
    if key not in downstream_cache:
        downstream_cache[key] = downstream(flat, state.consumers(), key)
    below = downstream_cache[key]
    reach = state.reach(tensor)
    found: list[XlaFinding] = []

    def add(inst: int, part: str, status: str, cause: str | None, message: str | None
            ) -> None:
        node = flat.nodes[inst]
        found.append(XlaFinding(signature, output, node.name, node.op, flat.functions[inst],
                                part, status, cause, message, meta_graph=meta_graph))

    for inst in sorted(state.dep_insts(tensor), key=flat.keys.__getitem__):
        op = flat.ops[inst]
        if op in WHILE_OPS:
            _while_structure(flat, inst, below, reach, add)
            continue
        if inst in flat.transparent or op in FRAME_OPS:
            continue
        if op == "TensorListSetItem" and _resizes(flat, inst):
            # the harvest compiled this op's gradient without resizing: the attr decides
            if inst in below and _reached(flat, inst, reach) and not _resized_before(
                    flat, inst):
                add(inst, "structure", "fails", TENSOR_ARRAY_UNKNOWN_SIZE,
                    "a TensorArray with dynamic_size=True written on a gradient path: the "
                    "gradient of its writes resizes the list (TensorListResize), which "
                    "XLA cannot compile; give the TensorArray its size")
            continue
        if op in _UNSIZED_LISTS or op == "TensorArrayV3":
            # a list's making compiles when its size is known: the structure decides
            # (the harvest cannot build one alone: its size is an argument)
            _list_structure(flat, inst, add)
            continue
        facts = flat.facts.get(op)
        xla = getattr(facts, "xla", None)
        if facts is None or xla is None:
            add(inst, "forward", "unknown", None, "not in the database" if facts is None
                else NOT_COMPILED if facts.gradient != "registered" and _harvested_with_xla(
                    flat) else "the release was not harvested with XLA for this op")
            continue
        if xla.forward != "compiles":
            add(inst, "forward", xla.forward, xla.forward_op if xla.forward == "fails" else None,
                xla.forward_reason)
            continue
        if inst in below and facts.gradient == "registered" and _reached(flat, inst, reach) \
                and xla.gradient != "compiles" and xla.gradient_reason != NOTHING_TO_COMPILE:
            add(inst, "gradient", xla.gradient,
                xla.gradient_blocker if xla.gradient == "fails" else None, xla.gradient_reason)
    return found


def _harvested_with_xla(flat: Flat) -> bool:
    return any(getattr(facts, "xla", None) is not None for facts in flat.facts.values())


def verdict(findings: list[XlaFinding]) -> str:
    """An output's XLA status from its findings: fails, unknown or compiles."""
    statuses = {x.status for x in findings}
    return "fails" if "fails" in statuses else "unknown" if statuses else "compiles"


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


def _reached(flat: Flat, inst: int, reach: set[int]) -> bool:
    return any(tensor_id(inst, i) in reach for i in range(max(1, len(flat.out_types[inst]))))


def _while_structure(flat: Flat, inst: int, below: set[int], reach: set[int], add: Any
                     ) -> None:
    """A While on a gradient path (its body records ops for the tape, and a gradient
    reaches its outputs) whose maximum iteration count (while_v2's second loop
    variable) is -1: the backward pass accumulates each iteration's values in
    TensorLists of unknown size."""
    if not flat.inputs[inst] or inst not in below or not _reached(flat, inst, reach):
        return  # (the loop-variable instances of a While have no inputs)
    inputs = flat.inputs[inst]
    limit = _int_constant(flat, inputs[1]) if len(inputs) > 1 else None
    if limit is not None and limit < 0:
        add(inst, "structure", "fails", TENSOR_LIST_UNKNOWN_SIZE,
            "a while_loop without maximum_iterations on a gradient path: its gradient "
            "needs TensorList accumulators of unknown size (XLA compilation requires a "
            "fixed tensor list size); give the loop maximum_iterations (autograph gives "
            "a `for ... in tf.range(n)` loop one when it traces under XLA, so a step "
            "traced again from Python may compile where this graph does not)")


def _list_structure(flat: Flat, inst: int, add: Any) -> None:
    """A TensorList / TensorArray whose size is -1 (``tf.TensorArray(dynamic_size=True)``)
    on an output's forward pass."""
    node = flat.nodes[inst]
    if node.op == "TensorArrayV3":
        dynamic = node.attr["dynamic_size"].b if "dynamic_size" in node.attr else False
        if dynamic:
            add(inst, "structure", "fails", TENSOR_ARRAY_UNKNOWN_SIZE,
                "a TensorArray with dynamic_size=True: XLA needs its size when compiling")
        return
    inputs = flat.inputs[inst]
    position = _UNSIZED_LISTS[node.op]
    size = _int_constant(flat, inputs[position]) if len(inputs) > position else None
    if size is not None and size < 0:
        add(inst, "structure", "fails", TENSOR_LIST_UNKNOWN_SIZE,
            "a TensorList of unknown size (-1 elements): XLA compilation requires a fixed "
            "tensor list size")


def _resizes(flat: Flat, inst: int) -> bool:
    node = flat.nodes[inst]
    return node.op == "TensorListSetItem" and _RESIZE in node.attr and bool(
        node.attr[_RESIZE].b)


def _resized_before(flat: Flat, inst: int) -> bool:
    """Whether the list a resizing write writes to comes from another resizing write
    (one finding per TensorArray, at its first write)."""
    inputs = flat.inputs[inst]
    for _ in range(8):
        if not inputs or inputs[0] is None:
            return False
        producer = inputs[0] & INST
        if flat.nodes[producer].op != "Identity":
            return _resizes(flat, producer)
        inputs = flat.inputs[producer]
    return False


def _int_constant(flat: Flat, ref: int | None) -> int | None:
    """The value of a scalar integer Const at ``ref`` (through Identity); None for
    anything else."""
    for _ in range(8):
        if ref is None:
            return None
        inst = ref & INST
        node = flat.nodes[inst]
        if node.op == "Identity" and flat.inputs[inst]:
            ref = flat.inputs[inst][0]
            continue
        if node.op != "Const" or "value" not in node.attr:
            return None
        try:
            proto = node.attr["value"].tensor
            if proto.int_val:
                return int(proto.int_val[0])
            if proto.int64_val:
                return int(proto.int64_val[0])
            content = getattr(proto, "tensor_content", b"")  # TF's own NodeDef (traced)
            if len(content) == 4:
                return int(struct.unpack("<i", content)[0])
        except (AttributeError, TypeError, ValueError, struct.error):
            return None
        return None
    return None
