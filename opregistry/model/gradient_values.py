"""What each op's gradient function keeps, for second order (opregistry/model/
second_order.py): the second pass differentiates the first pass's gradient ops, so a
target changes a first gradient only through the values those ops read. The op tables
(linear, bilinear, piecewise-linear ops) and the walks over values they need."""
from __future__ import annotations

from collections.abc import Iterable

from opregistry.model.flatten import INST, OUT, Flat, tensor_id
from opregistry.model.function_library import VALUE_FREE_OPS
from opregistry.model.walks import gradient_reach

# ops whose Jacobian is constant (their gradient functions keep no value, only shapes)
LINEAR_OPS = frozenset({
    "Identity", "IdentityN", "Snapshot", "EnsureShape", "PreventGradient", "Add", "AddV2",
    "AddN", "Sub", "Neg", "Sum", "Mean", "Reshape", "Transpose", "ConcatV2", "Concat",
    "Slice", "StridedSlice", "Pad", "PadV2", "MirrorPad", "Tile", "ExpandDims", "Squeeze",
    "Pack", "Unpack", "Split", "SplitV", "BroadcastTo", "ReverseV2", "Cumsum", "BiasAdd",
    "Cast", "ReadVariableOp", "GatherV2", "Gather", "ResourceGather", "GatherNd",
    "UnsortedSegmentSum", "SegmentSum", "SparseSegmentSum", "SparseSegmentMean",
    "SparseSegmentSqrtN", "ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic",
    "ResizeArea", "AvgPool", "AvgPool3D", "SpaceToDepth", "DepthToSpace", "SpaceToBatchND",
    "BatchToSpaceND", "TensorListFromTensor", "TensorListStack", "TensorListGetItem",
    "TensorListSetItem", "TensorListPushBack", "TensorListPopBack", "TensorListReserve",
    "TensorListElementShape", "ZerosLike", "OnesLike", "StopGradient", "Fill",
    "ScatterNd", "TensorScatterAdd", "MatrixDiag", "MatrixDiagV3", "MatrixDiagPartV3",
    "Real", "Imag", "Conj", "Complex", "AvgPoolGrad", "Copy",
})
# ops whose Jacobian for one input is another input: their gradient keeps the others
BILINEAR_OPS = frozenset({
    "Mul", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D", "Conv3D",
    "Conv1D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInputV2",
    "DepthwiseConv2dNativeBackpropInput", "Einsum", "Conv2DBackpropFilter",
})
# ops whose Jacobian is piecewise constant: a second derivative through them is zero
# (structurally: their gradient still reads their input, so a tape records it)
PIECEWISE_LINEAR_OPS = frozenset({
    "Relu", "Relu6", "LeakyRelu", "MaxPool", "MaxPoolV2", "MaxPool3D", "Maximum", "Minimum",
    "Abs", "ClipByValue", "Select", "SelectV2", "Max", "Min", "SegmentMax", "SegmentMin",
    "UnsortedSegmentMax", "UnsortedSegmentMin", "ReluGrad", "Relu6Grad", "MaxPoolGrad",
    "FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars",
    "FakeQuantWithMinMaxVarsPerChannel", "Sign", "Floor", "Ceil", "Round", "Rint",
})
# gradient ops whose own gradient is rightly absent: what they compute does not change
# with their inputs' values, or only by steps
HARMLESS_BLOCKERS = VALUE_FREE_OPS | {"StopGradient", "Sign", "Floor", "FloorDiv", "Round",
                                      "Ceil", "Rint", "FloorMod", "Cast"}
# ops whose gradient op takes only the incoming gradient (and shapes, sizes, indices):
# none of the op's floating tensors
GRADIENT_KEEPS_NO_VALUES = frozenset({
    "ResizeNearestNeighbor", "FractionalAvgPool", "AvgPool", "AvgPool3D", "SparseSegmentSum",
    "SparseSegmentMean", "SparseSegmentSqrtN", "SparseSegmentSumWithNumSegments",
    "SparseSegmentMeanWithNumSegments", "SparseSegmentSqrtNWithNumSegments",
})


def op_outputs(flat: Flat, inst: int) -> list[int]:
    return [tensor_id(inst, i) for i in range(max(1, len(flat.out_types[inst])))]


def floats(flat: Flat, refs: Iterable[int | None]) -> list[int]:
    return [r for r in refs if r is not None and flat.carries_gradient(r)]


def kept_values(flat: Flat, inst: int, position: int, structural: bool) -> list[int]:
    """The tensors ``inst``'s gradient for input ``position`` keeps: for their values
    (``structural`` False: what its Jacobian changes with) or at all (what a tape sees
    it read)."""
    op = flat.ops[inst]
    if op in LINEAR_OPS:
        return []
    if op in BILINEAR_OPS:
        return floats(flat, [r for p, r in enumerate(flat.inputs[inst]) if p != position])
    if op in PIECEWISE_LINEAR_OPS and not structural:
        return []
    return floats(flat, [*flat.inputs[inst], *op_outputs(flat, inst)])


def own_values(flat: Flat, inst: int, structural: bool) -> list[int]:
    """What a blocked op's own gradient op reads of the op's tensors."""
    op = flat.ops[inst]
    if structural:
        return [] if op in GRADIENT_KEEPS_NO_VALUES else \
            floats(flat, [*flat.inputs[inst], *op_outputs(flat, inst)])
    if op in LINEAR_OPS or op in PIECEWISE_LINEAR_OPS:
        return []
    return floats(flat, [*flat.inputs[inst], *op_outputs(flat, inst)])


def reach_all(flat: Flat, tensors: list[int]) -> set[int]:
    """What a gradient arriving at any of ``tensors`` reaches (one walk)."""
    if not tensors:
        return set()
    return gradient_reach(flat, tensors[0], more=tensors[1:])[0]


def float_upstream(flat: Flat, tensors: list[int]) -> set[int]:
    """Every tensor ``tensors`` are computed from along floating edges, through any op
    (what a tape records, whether or not the op has a gradient)."""
    seen: set[int] = set()
    stack = [t for t in tensors if flat.carries_gradient(t)]
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        inst = t & INST
        if inst in flat.transparent:
            stack.extend(flat.transparent[inst].get(t >> OUT, ()))
            continue
        stack.extend(r for r in flat.inputs[inst]
                     if r is not None and flat.carries_gradient(r))
    return seen
