"""Which public Python name leads to which op, and which name to show first.

The harvester records every op a public function's code reaches, with how it found
them (``python_names.method``): ``generated_wrapper`` (the op's own generated
function), ``calls_wrapper`` (a hand-written function that reaches one op), and
``..._multi`` when the code reaches several. A ``_multi`` name is *implemented by* the
op whose name is the function's (``tf.argmax`` -> ArgMax, not the Cast it also makes;
``tf.accumulate_n`` -> AccumulateNV2, not AddN); a ``_multi`` name that matches none of
its ops (``tf.clip_by_norm``, ``tf.metrics.specificity_at_sensitivity``) only *creates*
them and leads to none. Where the usual call builds ops the harvest cannot tell
(``tf.norm`` -> Sqrt), ``default_calls`` says which. This works on the shipped database
as it is.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from opregistry.registry.default_calls import DEFAULT_CALLS, default_call

__all__ = ["DEFAULT_CALLS", "HELPER_OPS", "STRUCTURE_OPS", "default_call", "helpers_last",
           "implemented_by", "newest_first", "rank", "ranked", "same_name"]

_VERSION_SUFFIX = re.compile(r"v\d+$")
_VERSION = re.compile(r"V(\d+)$")

# ops a function's code makes around its work (casts, shapes, checks, packing; TF 1's
# control flow and reference variables, which TF 2 builds as If/While and resource ops):
# where a ``_multi`` name is named after none of its ops, the others come first
# (tf.truediv -> RealDiv, not Cast; tf.image.flip_left_right -> ReverseV2, not Equal;
# tf.image.stateless_random_flip_left_right -> ReverseV2, not Enter), checked against
# what TF traces (tests/test_python_name_traces.py)
HELPER_OPS = frozenset({
    "Cast", "Shape", "ShapeN", "Size", "Rank", "Identity", "IdentityN", "Assert", "Const",
    "Range", "Pack", "Unpack", "Fill", "Reshape", "ExpandDims", "Squeeze", "ZerosLike",
    "OnesLike", "BroadcastArgs", "BroadcastTo", "Equal", "NotEqual", "Less", "LessEqual",
    "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "All", "Any",
    "StridedSlice", "Slice", "Concat", "ConcatV2", "NoOp", "Conj", "Real", "Imag",
    "Complex", "Transpose", "ConjugateTranspose", "IsInf", "IsNan", "IsFinite", "CheckNumerics",
    "CheckNumericsV2", "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond",
    "RefEnter", "RefExit", "RefMerge", "RefSwitch", "RefNextIteration", "RefIdentity",
    "ControlTrigger", "Assign", "AssignAdd", "AssignSub", "Variable", "VariableV2"})

# the ops a control-flow call is (tf.while_loop: StatelessWhile; tf.switch_case:
# StatelessCase): a trace also records the plumbing inside their bodies (a map's list
# reads and writes), which comes after them
STRUCTURE_OPS = frozenset({"While", "StatelessWhile", "If", "StatelessIf", "Case",
                           "StatelessCase", "PartitionedCall", "StatefulPartitionedCall"})


def newest_first(op: str) -> tuple[str, int]:
    """Sort key of ops by name, the newest version of an op first (AddV2 before Add,
    MatrixDiagV3 before MatrixDiag: what TF 2 builds)."""
    version = _VERSION.search(op)
    if version is None:
        return op, -1
    return op[:version.start()], -int(version.group(1))


def helpers_last(op: str) -> tuple[bool, str, int]:
    """Sort key of a name's ops where none is named after it: helpers last, then
    :func:`newest_first`."""
    return (op in HELPER_OPS, *newest_first(op))


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
