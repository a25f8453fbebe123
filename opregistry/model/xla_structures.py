"""The structures compiling a training step under XLA teaches, which no single op's
harvest shows (``xla_check`` applies them). Each rule is tested against TF compiling the
step (tests/test_check_xla.py, tests/test_xla_step.py, tests/xla_differential.py).

Per output and for a loaded call alike:

* a While on a gradient path without a maximum iteration count: its gradient keeps
  every iteration's values in TensorList accumulators of unknown size;
* TensorLists / TensorArrays of unknown size in the forward pass;
* the writes of a ``tf.TensorArray(dynamic_size=True)`` on a gradient path (their
  gradient resizes the list: ``TensorListResize``, which XLA has no kernel for);
* a ``tf.TensorArray(dynamic_size=True)`` written past the size it was made with, off
  every gradient path: the step compiles and computes other numbers (``differs``):
  XLA keeps the size, so its ``stack()``, ``size()``, ``gather`` and ``concat`` and
  the read of its last element see a list whose writes past the end were clamped
  into its last element (or dropped, at size 0).

Only for a loaded call (TF differentiates the function it loaded, not the Python that
traced it, so what ``tf.function`` does for XLA when it traces a step does not happen):

* a loop that reads a TensorList (``tf.map_fn``, ``tf.scan``, ``tf.foldl``,
  ``TensorArray.read``, Keras RNN layers over their time steps) on a gradient path of
  the targets: the loaded loop's gradient takes sizes and shapes from loop arguments
  (``TensorListReserve`` / ``BroadcastGradientArgs`` ``must be a compile-time
  constant``);
* a ``tf.cond`` / ``tf.switch_case`` on a gradient path whose gradient needs a value
  computed inside a branch: TF rewrites the loaded branches to return it as an Optional
  (``OptionalFromValue``, which XLA has no kernel for); a live step's cond gives XLA the
  plain value instead.
"""
from __future__ import annotations

import struct
from collections.abc import Callable

from opregistry.model.flatten import INST, OUT, TOP, Flat, tensor_id
from opregistry.vocabulary import XlaPart, XlaStepStatus

# (instance, part, status, cause, message): how a rule reports
Add = Callable[[int, XlaPart, XlaStepStatus, "str | None", "str | None"], None]

WHILE_OPS = ("While", "StatelessWhile")
BRANCH_OPS = ("If", "StatelessIf", "Case", "StatelessCase")
# ops that make a TensorList / TensorArray whose size input or attr can be unknown
# (-1): XLA needs every list's size when it compiles
UNSIZED_LISTS = {"EmptyTensorList": 1, "TensorListReserve": 1}
TENSOR_LIST_UNKNOWN_SIZE = "tensor_list_unknown_size"
TENSOR_ARRAY_UNKNOWN_SIZE = "tensor_array_unknown_size"
# a loaded loop's gradient: TensorListReserve's size, BroadcastGradientArgs' shapes
# taken from loop arguments
LOOP_SHAPE_NOT_CONSTANT = "loop_shape_not_constant"
# a loaded cond's gradient: its branches return intermediates as Optionals
OPTIONAL_INTERMEDIATES = "optional_intermediates"
# an element read past the size XLA gives a TensorList: the size it was reserved with
TENSOR_ARRAY_PAST_SIZE = "tensor_array_past_size"
# ops that read one element of a TensorList (TensorArray.read) or of its stack
LIST_READS = ("TensorListGetItem", "StridedSlice")
# a dynamic-size TensorArray written past its size: compiles, other numbers
TENSOR_ARRAY_WRITES_PAST_SIZE = "tensor_array_writes_past_size"
# ops that read a TensorList whole (TensorArray.stack, size, gather, concat) or one
# element of it (read): what XLA's fixed-size list changes
LIST_VALUES = ("TensorListStack", "TensorListLength", "TensorListGather",
               "TensorListConcatV2", "TensorListGetItem")
# TensorListSetItem's attribute for a dynamic-size TensorArray's write: its gradient
# then calls TensorListResize (tensorflow/python/ops/list_ops.py)
_RESIZE = "resize_if_index_out_of_bounds"
_DT_INT64 = 9  # types.proto

# ops whose gradient function uses none of their inputs' or outputs' values (only
# static shapes, constants or the upstream gradient): in a branch, nothing of theirs
# is captured, and a loaded call's backward function takes none of their operands from
# the forward pass (tensorflow/python/ops/math_grad.py, array_grad.py)
CAPTURES_NOTHING = frozenset({
    "Add", "AddV2", "Sub", "Neg", "AddN", "Identity", "IdentityN", "Snapshot", "Cast",
    "Reshape", "ExpandDims", "Squeeze", "Sum", "Transpose", "ZerosLike", "OnesLike",
    "StopGradient", "PreventGradient"})
# ops whose gradient uses their own output: always a value computed in the branch
_USES_OUTPUT = frozenset({
    "Tanh", "Sigmoid", "Exp", "Expm1", "Sqrt", "Rsqrt", "Reciprocal", "Inv", "Relu",
    "Relu6", "Elu", "Selu", "Softmax", "LogSoftmax", "Cholesky", "MatrixInverse",
    "MatrixDeterminant", "Qr", "SelfAdjointEigV2", "Svd", "TopKV2"})


# ops whose gradient for one operand reads only the others (and the upstream): with
# those constant and the upstream zeros, the gradient is a constant (math_grad.py,
# sparse_grad.py)
_LINEAR = frozenset({"SparseTensorDenseMatMul", "MatMul", "BatchMatMulV2", "Mul"})
# ops that grappler folds when every input is a constant
_CALLS = ("PartitionedCall", "StatefulPartitionedCall")
_FOLDS = frozenset({"Const", "Identity", "Cast", "Reshape", "Pack", "Fill", "ExpandDims"})


def folded(flat: Flat, consumers: dict[int, list[tuple[int, int]]], backward: list[int],
           reach: set[int], carries: Callable[[int], bool], call: int) -> set[int]:
    """The ops of a loaded call's ``backward`` whose gradient TF folds to a constant in
    the step of an output whose gradient reaches ``reach``: TF feeds zeros for the
    gradients of the call's other outputs, and grappler folds a gradient whose upstream
    is those zeros (through ops whose gradient is folded too) and whose other operands
    are constants (``tf.sparse.sparse_dense_matmul`` of a constant SparseTensor: its
    gradient, which XLA has no kernel for, never reaches XLA). ``carries``: whether a
    tensor carries the step's gradient; ``call``: the signature's call, whose outputs'
    upstream is zeros for every other output."""
    out = {j for j in backward if j not in flat.transparent and not reached(flat, j, reach)
           and _reads_constants(flat, j, carries)}
    flowing = set(backward)  # the ops whose gradient flows back into their operands

    def zeros(tensor: int, depth: int = 0) -> bool:
        """Whether the upstream gradient of ``tensor`` is zeros (folded) in the step."""
        for k, position in consumers.get(tensor, ()):
            if position >= 0:
                if k in flowing and k not in out:
                    return False
            elif k != call and (flat.ops[k] not in _CALLS or depth > 16 or not zeros(
                    tensor_id(k, -1 - position), depth + 1)):
                return False  # (a nested call passes its output's gradient through)
        return True

    changed = bool(out)
    while changed:  # an op whose upstream is not all zeros is not folded
        changed = False
        for j in list(out):
            if not all(zeros(tensor_id(j, i)) for i in range(len(flat.out_types[j]))):
                out.discard(j)
                changed = True
    return out


def _reads_constants(flat: Flat, inst: int, carries: Callable[[int], bool]) -> bool:
    """Whether the forward values ``inst``'s gradient reads are all constants."""
    op = flat.ops[inst]
    if op in CAPTURES_NOTHING:
        return True
    if op not in _LINEAR:
        return False
    operands = [t for t in flat.inputs[inst] if t is not None]
    carrying = [t for t in operands if carries(t)]
    if len(carrying) != 1:
        return False
    for t in operands:
        if t in carrying:
            continue
        stack, seen = [t & INST], set()
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            if flat.ops[j] not in _FOLDS or j in flat.transparent or (
                    flat.ops[j] != "Const" and not flat.inputs[j]):
                return False
            stack.extend(x & INST for x in flat.inputs[j] if x is not None)
    return True


def reached(flat: Flat, inst: int, reach: set[int]) -> bool:
    return any(tensor_id(inst, i) in reach for i in range(max(1, len(flat.out_types[inst]))))


def while_structure(flat: Flat, inst: int, below: set[int], reach: set[int], add: Add
                    ) -> None:
    """A While on a gradient path (its body records ops for the tape, and a gradient
    reaches its outputs) whose maximum iteration count (while_v2's second loop
    variable) is -1: the backward pass accumulates each iteration's values in
    TensorLists of unknown size."""
    if not flat.inputs[inst] or inst not in below or not reached(flat, inst, reach):
        return  # (the loop-variable instances of a While have no inputs)
    inputs = flat.inputs[inst]
    limit = int_constant(flat, inputs[1]) if len(inputs) > 1 else None
    if limit is not None and limit < 0:
        add(inst, "structure", "fails", TENSOR_LIST_UNKNOWN_SIZE,
            "a while_loop without maximum_iterations on a gradient path: its gradient "
            "needs TensorList accumulators of unknown size (XLA compilation requires a "
            "fixed tensor list size); give the loop maximum_iterations (autograph gives "
            "a `for ... in tf.range(n)` loop one when it traces under XLA, so a step "
            "traced again from Python may compile where this graph does not)")


def loaded_loop_reads(flat: Flat, inst: int, body: list[int], below: set[int],
                      below_all: set[int], reach: set[int], add: Add) -> None:
    """A loaded While the step's targets differentiate through, whose body reads a
    TensorList that carries a gradient (map_fn, scan, foldl, TensorArray.read): the
    loop's gradient gives the list's gradient back in a TensorListReserve whose size
    is a loop argument of the loaded backward, not a compile-time constant."""
    if not flat.inputs[inst] or inst not in below or not reached(flat, inst, reach):
        return
    for j in body:
        if flat.ops[j] == "TensorListGetItem" and j in below_all:
            add(inst, "structure", "fails", LOOP_SHAPE_NOT_CONSTANT,
                f"a loop that reads a TensorList ({flat.nodes[j].name}: tf.map_fn, "
                "tf.scan, tf.foldl, TensorArray.read, a Keras RNN, GRU or LSTM over its "
                "time steps) on a gradient path of a loaded function: the loop's "
                "gradient takes sizes and shapes from loop arguments (TensorListReserve, "
                "BroadcastGradientArgs: must be a compile-time constant), which XLA "
                "refuses; the same step over the live model, traced from Python, "
                "compiles")
            return


def loaded_branches(flat: Flat, inst: int, body: list[int], below_all: set[int],
                    reach: set[int], add: Add) -> None:
    """A loaded If / Case on a gradient path whose gradient needs a value computed in a
    branch (not a branch argument, not a constant): TF's cond_v2 rewrites the loaded
    branches to return it wrapped in an Optional (OptionalFromValue: no XLA kernel)."""
    if inst not in below_all or not reached(flat, inst, reach):
        return
    for j in body:
        if j not in below_all or not reached(flat, j, reach) or j in flat.transparent:
            continue
        op = flat.ops[j]
        facts = flat.facts.get(op)
        if facts is None or facts.gradient != "registered" or op in CAPTURES_NOTHING:
            continue
        if op in _USES_OUTPUT or any(
                t is not None and flat.keys.caller(t & INST) == inst
                and flat.ops[t & INST] != "Const" for t in flat.inputs[j]):
            add(inst, "structure", "fails", OPTIONAL_INTERMEDIATES,
                f"a tf.cond / tf.switch_case of a loaded function on a gradient path "
                f"whose gradient needs a value computed inside a branch ({op} "
                f"{flat.nodes[j].name}): TF rewrites the loaded branches to return it as "
                "an Optional (OptionalFromValue), which XLA has no kernel for (the same "
                "step over the live model, traced from Python, compiles)")
            return


def bodies(flat: Flat, calls: set[int]) -> dict[int, list[int]]:
    """call instance -> the instances directly in its bodies, for ``calls``."""
    out: dict[int, list[int]] = {c: [] for c in calls}
    for j in range(len(flat.keys)):
        caller = flat.keys.caller(j)
        if caller != TOP and caller in out:
            out[caller].append(j)
    return out


def list_structure(flat: Flat, inst: int, add: Add) -> None:
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
    position = UNSIZED_LISTS[node.op]
    size = int_constant(flat, inputs[position]) if len(inputs) > position else None
    if size is not None and size < 0:
        add(inst, "structure", "fails", TENSOR_LIST_UNKNOWN_SIZE,
            "a TensorList of unknown size (-1 elements): XLA compilation requires a fixed "
            "tensor list size")


def list_size(flat: Flat, ref: int | None) -> int | None:
    """How many elements XLA gives the TensorList at ``ref``: the constant its
    TensorListReserve was made with, through its writes. tf2xla's TensorListReserve
    makes a buffer of that many elements and its TensorListSetItem ignores
    ``resize_if_index_out_of_bounds`` (a write past the end is clamped into it), so a
    ``tf.TensorArray(size=0, dynamic_size=True)`` stays empty under XLA. None where the
    list comes from anything else (a loop, a call, TensorListFromTensor)."""
    for _ in range(64):
        if ref is None:
            return None
        inst = ref & INST
        op = flat.ops[inst]
        if op in ("Identity", "TensorListSetItem") and flat.inputs[inst]:
            ref = flat.inputs[inst][0]
            continue
        if op == "TensorListReserve" and len(flat.inputs[inst]) > 1:
            return int_constant(flat, flat.inputs[inst][1])
        return None
    return None


def past_list_size(flat: Flat, inst: int) -> str | None:
    """Why a read of one element of a TensorList (``TensorArray.read``) or of its stack
    (``ta.stack()[i]``: a StridedSlice taking index ``i`` of dimension 0) fails to
    compile, where the element is past the size XLA gives the list (``list_size``): the
    stack has that many rows under XLA, so a constant index past them is refused
    ("slice index i of dimension 0 out of bounds", TF's strided-slice validation), and
    a read of an empty list is a dynamic slice larger than its operand. None if it
    compiles or cannot be told."""
    inputs = flat.inputs[inst]
    if not inputs or inputs[0] is None:
        return None
    if flat.ops[inst] == "TensorListGetItem":
        size = list_size(flat, inputs[0])
        return None if size != 0 else (
            "TensorArray.read of a list XLA sizes at 0 elements (a TensorArray made with "
            "size=0, dynamic_size=True: XLA keeps the size a TensorArray is made with "
            "and drops its writes past it): \"Slice dim size 1 greater than dynamic "
            "slice dimension: 0\"; give the TensorArray its size")
    stack = inputs[0] & INST
    while flat.ops[stack] == "Identity" and flat.inputs[stack] and \
            flat.inputs[stack][0] is not None:
        stack = flat.inputs[stack][0] & INST  # type: ignore[operator]
    if flat.ops[stack] != "TensorListStack" or len(inputs) < 2:
        return None
    size = list_size(flat, flat.inputs[stack][0] if flat.inputs[stack] else None)
    index = _first_index(flat, inst)
    if size is None or index is None or -size <= index < size:
        return None
    return (f"element {index} of a TensorArray's stack, which XLA sizes at {size} "
            "elements (XLA keeps the size a TensorArray is made with, and a "
            "dynamic_size=True TensorArray's writes past it are dropped): \"slice index "
            f"{index + size if index < 0 else index} of dimension 0 out of bounds\"; give "
            "the TensorArray its size")


def _first_index(flat: Flat, inst: int) -> int | None:
    """The constant index a StridedSlice takes of dimension 0 (a shrink-axis slice
    spec first, no ellipsis, new axis or begin mask there), or None. TF validates it
    against the dimension (tensorflow/core/util/strided_slice_op.cc)."""
    attr = flat.nodes[inst].attr

    def mask(name: str) -> int:
        return int(attr[name].i) if name in attr else 0

    if mask("ellipsis_mask") & 1 or mask("new_axis_mask") & 1 or \
            mask("begin_mask") & 1 or not mask("shrink_axis_mask") & 1:
        return None
    return int_constant(flat, flat.inputs[inst][1], first=True)


def resizes(flat: Flat, inst: int) -> bool:
    node = flat.nodes[inst]
    return node.op == "TensorListSetItem" and _RESIZE in node.attr and bool(
        node.attr[_RESIZE].b)


def resized_before(flat: Flat, inst: int) -> bool:
    """Whether the list a resizing write writes to comes from another resizing write
    (one finding per TensorArray, at its first write)."""
    inputs = flat.inputs[inst]
    for _ in range(8):
        if not inputs or inputs[0] is None:
            return False
        producer = inputs[0] & INST
        if flat.nodes[producer].op != "Identity":
            return resizes(flat, producer)
        inputs = flat.inputs[producer]
    return False


def int_constant(flat: Flat, ref: int | None, first: bool = False) -> int | None:
    """The value of a scalar integer Const at ``ref`` (through Identity), or with
    ``first`` the first element of an integer vector; None for anything else (a
    static reader leaves a vector's ``tensor_content`` unparsed)."""
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
            width, code = (8, "<q") if proto.dtype == _DT_INT64 else (4, "<i")
            if len(content) == width or (first and len(content) >= width):
                return int(struct.unpack(code, content[:width])[0])
        except (AttributeError, TypeError, ValueError, struct.error):
            return None
        return None
    return None


def writes_past_size(flat: Flat, inst: int, consumers: dict[int, list[tuple[int, int]]],
                     on_gradient_path: Callable[[int], bool]
                     ) -> tuple[XlaStepStatus, str] | None:
    """(status, why) where ``inst``, an op reading a TensorList (``LIST_VALUES``), is a
    ``tf.TensorArray(dynamic_size=True)`` made with a constant size N and written at an
    index N or more (a constant index, or a loop's index where the loop may run more
    than N times), off every gradient path; None otherwise. tf2xla keeps N: a write
    past it is clamped into element N - 1 (dropped when N is 0), and so is a read, so
    the step compiles and computes other numbers (``differs``) for the stack, the size
    (N), a gather or concat and the read of element N - 1 or past it unless that is the
    last element written; TF refuses (``fails``) a gather of a list it sizes at 0 and a
    gather or concat of a list a loop without maximum_iterations wrote. A read of element
    N or more of an empty list or of a stack (``past_list_size``) and a resizing write
    on a gradient path (``TensorListResize``) fail by their own findings."""
    inputs = flat.inputs[inst]
    if not inputs or inputs[0] is None:
        return None
    traced = _written(flat, inputs[0])
    if traced is None:
        return None
    size, writes = traced
    if size is None or size < 0 or any(on_gradient_path(j) for j, _, _ in writes):
        return None
    past = [(index, limit) for _, index, limit in writes
            if (index is not None and index >= size) or (
                index is None and (limit is None or limit < 0 or limit > size))]
    if not past:
        return None
    op = flat.ops[inst]
    constant = [index for index, _ in past if index is not None]
    unbounded = any(index is None and (limit is None or limit < 0) for index, limit in past)
    # the element XLA's clamped writes leave last holds the highest index's value
    last = max(constant) if len(constant) == len(past) else None

    def kept(index: int | None) -> bool:
        return index is not None and 0 <= index and (index < size - 1 or index == last)

    if op == "TensorListGetItem":
        if kept(int_constant(flat, inputs[1]) if len(inputs) > 1 else None):
            return None
    if op == "TensorListStack":
        slices = consumers.get(tensor_id(inst, 0), [])
        # (a traced step's forward function also returns the stack for its backward
        # function, which reads only its shape: the direct reads decide)
        slices = [(k, position) for k, position in slices if position >= 0] or slices
        if any(flat.ops[k] == "StridedSlice" and position == 0 and past_list_size(
                flat, k) is not None for k, position in slices):
            return None  # an element past the size: the step fails (past_list_size)
        indices = [_first_index(flat, k) if flat.ops[k] == "StridedSlice" and position == 0
                   else None for k, position in slices]
        if indices and all(kept(i) for i in indices):
            return None  # only elements XLA keeps as TF has them
    if constant:
        how = f"written at index {max(constant)}"
    else:
        limit = next(limit for _, limit in past)
        how = ("written in a loop without maximum_iterations" if limit is None or limit < 0
               else f"written in a loop of up to {limit} iterations")
    made = f"a TensorArray with dynamic_size=True made with size={size}, {how}"
    if (op == "TensorListGather" and size == 0) or (
            op in ("TensorListGather", "TensorListConcatV2") and unbounded):
        what = "gather" if op == "TensorListGather" else "concat"
        return "fails", (f"{made}: XLA refuses its {what}"
                         + (" of a list it sizes at 0 elements" if size == 0 else
                            " (\"XLA compilation requires a fixed tensor list size\")")
                         + "; give the TensorArray its size")
    read = {"TensorListStack": "its stack()", "TensorListLength": "its size()",
            "TensorListGather": "its gather()", "TensorListConcatV2": "its concat()",
            "TensorListGetItem": "its read() of the last element"}[op]
    clamped = "drops every write" if size == 0 else \
        f"clamps each write past it into element {size - 1}"
    return "differs", (
        f"{made}: XLA keeps the size a TensorArray is made with and {clamped}, so {read} "
        "gives other numbers than TF without XLA (the step compiles, nothing raises"
        + (", whenever the loop writes more elements than that" if not constant else "")
        + "); give the TensorArray the size it needs")


def _written(flat: Flat, ref: int | None
             ) -> tuple[int | None, list[tuple[int, int | None, int | None]]] | None:
    """(the size the TensorList at ``ref`` was reserved with, its resizing writes as
    (instance, constant index or None, the enclosing loop's maximum_iterations or
    None)), back through Identity, writes and While loops; None where the list comes
    from anything else."""
    writes: list[tuple[int, int | None, int | None]] = []
    loop: int | None = None  # the While whose body the walk is in
    seen: set[int] = set()
    for _ in range(256):
        if ref is None or ref in seen:
            return None
        seen.add(ref)
        inst = ref & INST
        op = flat.ops[inst]
        if op == "Identity" and flat.inputs[inst]:
            ref = flat.inputs[inst][0]
        elif op == "TensorListSetItem" and flat.inputs[inst]:
            if resizes(flat, inst):
                inputs = flat.inputs[inst]
                index = int_constant(flat, inputs[1]) if len(inputs) > 1 else None
                limit = None
                if loop is not None:
                    index = None  # (the loop's counter, whatever it starts as)
                    ins = flat.inputs[loop]
                    limit = int_constant(flat, ins[1]) if len(ins) > 1 else None
                writes.append((inst, index, limit))
            ref = flat.inputs[inst][0]
        elif op in WHILE_OPS and inst in flat.transparent:
            if flat.inputs[inst]:  # the loop: into its body's output
                refs = flat.transparent[inst].get(ref >> OUT, [])
                loop = inst
            else:  # a loop variable: its value before the loop
                refs = flat.transparent[inst].get(0, [])[:1]
                loop = None
            if not refs:
                return None
            ref = refs[0]
        elif op == "TensorListReserve" and len(flat.inputs[inst]) > 1:
            return int_constant(flat, flat.inputs[inst][1]), writes
        else:
            return None
    return None
