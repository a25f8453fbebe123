"""Which public Python name leads to which op, and which name to show first.

The harvester records every op a public function's code reaches, with how it found
them (``python_names.method``): ``generated_wrapper`` (the op's own generated
function), ``calls_wrapper`` (a hand-written function that reaches one op), and
``..._multi`` when the code reaches several. A ``_multi`` name is *implemented by* the
op whose name is the function's (``tf.argmax`` -> ArgMax, not the Cast it also makes;
``tf.accumulate_n`` -> AccumulateNV2, not AddN); a ``_multi`` name that matches none of
its ops (``tf.nn.dropout``, ``tf.metrics.specificity_at_sensitivity``) only *creates*
them and leads to none. This works on the shipped database as it is.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_VERSION_SUFFIX = re.compile(r"v\d+$")

# Python names whose usual call builds another op than the harvest can tell from the
# function's code (which records every op it can reach): the ops a call with the
# default arguments builds, the one on the gradient path first. Checked against the
# ops TF traces for each call (tests/test_python_name_calls.py).
DEFAULT_CALLS: dict[str, tuple[str, ...]] = {
    # tf.where(c, x, y) (the form on a gradient path); tf.where(c) alone is Where
    "tf.where": ("SelectV2", "Where"),
    "tf.compat.v1.where": ("Select", "Where"),
    # method="bilinear" by default; area, bicubic, nearest... only when asked
    "tf.image.resize": ("ResizeBilinear", "ResizeArea", "ResizeBicubic",
                        "ResizeNearestNeighbor", "ScaleAndTranslate"),
    "tf.compat.v1.image.resize": ("ResizeBilinear", "ResizeArea", "ResizeBicubic",
                                  "ResizeNearestNeighbor"),
    "tf.image.resize_images": ("ResizeBilinear", "ResizeArea", "ResizeBicubic",
                               "ResizeNearestNeighbor"),
    # sorted by top_k over the whole last axis (ascending: of -x)
    "tf.sort": ("TopKV2",),
    "tf.argsort": ("TopKV2",),
    # side="left" by default: LowerBound; side="right": UpperBound
    "tf.searchsorted": ("LowerBound", "UpperBound"),
    # DenseBincount (the code also reaches Bincount, and Cast before it: not the count)
    "tf.math.bincount": ("DenseBincount", "Bincount"),
    "tf.compat.v1.bincount": ("DenseBincount", "Bincount"),
    # TF 2's extract_glimpse is V2 (tf.compat.v1.image.extract_glimpse: ExtractGlimpse)
    "tf.image.extract_glimpse": ("ExtractGlimpseV2", "ExtractGlimpse"),
    # composites whose code the harvest sees reach MatrixBandPart alone: the solve
    # (lu_solve), the product (lu_reconstruct), the Cholesky solve (lstsq, fast=True)
    "tf.linalg.lu_solve": ("MatrixTriangularSolve",),
    "tf.linalg.lu_reconstruct": ("MatMul",),
    "tf.linalg.lstsq": ("Cholesky", "MatrixSolveLs"),
    # TF 2 adds with AddV2 and divides floats with RealDiv (the code also reaches Add, Cast)
    "tf.add": ("AddV2", "Add"),
    "tf.math.add": ("AddV2", "Add"),
    "tf.truediv": ("RealDiv",),
    "tf.math.truediv": ("RealDiv",),
}


# ops a function's code makes around its work (casts, shapes, checks, packing): where a
# ``_multi`` name is named after none of its ops, the others come first (tf.truediv ->
# RealDiv, not Cast; tf.image.flip_left_right -> ReverseV2, not Equal), checked against
# what TF traces (tests/test_python_name_calls.py)
HELPER_OPS = frozenset({
    "Cast", "Shape", "ShapeN", "Size", "Rank", "Identity", "IdentityN", "Assert", "Const",
    "Range", "Pack", "Unpack", "Fill", "Reshape", "ExpandDims", "Squeeze", "ZerosLike",
    "OnesLike", "BroadcastArgs", "BroadcastTo", "Equal", "NotEqual", "Less", "LessEqual",
    "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "All", "Any",
    "StridedSlice", "Slice", "Concat", "ConcatV2", "NoOp", "Conj", "Real", "Imag",
    "Complex", "Transpose", "ConjugateTranspose", "IsInf", "IsNan", "IsFinite", "CheckNumerics",
    "CheckNumericsV2"})


def helpers_last(op: str) -> tuple[bool, str]:
    """Sort key of a name's ops where none is named after it: helpers last, then by name."""
    return op in HELPER_OPS, op


def _bare(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@lru_cache(maxsize=1 << 16)  # the site asks for each (name, op) once per release
def same_name(python_name: str, op: str) -> bool:
    """``tf.math.add_n`` and AddN, ``tf.argmax`` and ArgMax, ``tf.raw_ops.AddN`` and
    AddN, ``tf.accumulate_n`` and AccumulateNV2: the function is named after the op."""
    last = _bare(python_name.rsplit(".", 1)[-1])
    bare_op = _bare(op)
    return last in (bare_op, _VERSION_SUFFIX.sub("", bare_op))


def implemented_by(python_name: str, op: str, method: str | None) -> bool:
    """Whether ``python_name`` leads to ``op``: its code reaches that op alone, or
    reaches several and is named after this one."""
    if not method or not method.endswith("_multi"):
        return True
    return same_name(python_name, op)


def rank(python_name: str, op: str, current: bool = True) -> tuple[object, ...]:
    """Sort key, canonical first: ``tf.compat.v1.*`` last; names of the newest release
    before names gone since; a name after the op before another (``tf.add_n`` before
    ``tf.losses.get_total_loss``); then ``tf.x``, ``tf.module.x`` (``tf.math.*``),
    deeper and ``tf.raw_ops.*``; then the shorter name."""
    body = python_name[3:] if python_name.startswith("tf.") else python_name
    compat = body.startswith("compat.")
    if body.startswith("raw_ops."):
        depth = 3
    else:
        depth = min(body.count("."), 2)
    return (compat, not current, not same_name(python_name, op), depth, len(python_name),
            python_name)


def ranked(names: Iterable[str], op: str, current: Iterable[str] | None = None
           ) -> list[str]:
    """``names`` of ``op``, canonical first (``current``: the names the newest release
    has; all when not given)."""
    now = set(current) if current is not None else None
    return sorted(set(names), key=lambda n: rank(n, op, now is None or n in now))
