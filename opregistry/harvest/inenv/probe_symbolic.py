"""The symbolic probe: call an op's registered gradient function on the op built in a
graph, with an upstream gradient for every output, and classify what comes back for each
input (``gradient``, ``none``, ``zero``, ``raises``); the ops on the gradient's path.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+, graph mode.
"""
from __future__ import print_function

import re

from . import probe_args as args
from . import probe_families as families
from .probe_api import STRING_OVERRIDES, TRAINABLE, ProbeFailure, failure_reason
from .probe_build import FUNCTIONAL, build, build_functional, build_imported, variant_input

_ZERO_SOURCES = ("ZerosLike", "Zeros")
_PASS_THROUGH = ("Identity", "Reshape", "Cast", "BroadcastTo", "Tile", "ExpandDims",
                 "Squeeze", "Transpose", "Snapshot")
# Gradient functions that raise these for every caller raise "by design" (or by a
# TF bug such as a wrong signature); other exceptions are taken as our fault.
_BY_DESIGN = ("NotImplementedError", "LookupError", "RuntimeError")
_WRONG_ARITY = re.compile(r"takes \d+ positional arguments? but \d+ (were|was) given")
# The function feeds a handle of a type fixed by the op's signature into an op that
# takes another (e.g. TensorArray V1/V2 gradients building TensorArrayGradV3 in 2.x).
_HANDLE_MISMATCH = re.compile(r"has type (string|resource|variant)\w* that does not match "
                              r"expected type of (string|resource|variant)")
# (float input shape, how integer inputs are made)
_CONFIGS = (
    (None, "placeholder"), ([2, 2], "placeholder"), ([2, 2, 2, 2], "placeholder"),
    ([2, 2], "scalar"), ([2, 2, 2, 2], "ones"), ([2, 2], "ones"), ([2, 2, 2, 2], "pairs"),
    ([2], "placeholder"), ([], "placeholder"), ([2, 2, 2], "placeholder"),
    ([2, 2, 2, 2, 2], "placeholder"), ([1, 2, 2, 1], "ones"), ([2, 2], "pairs"),
    ([2, 2, 2, 2], "named"), ([2, 2], "named"),
)


def _is_zero(api, tensor, depth=0):
    """True when ``tensor`` is a constant zero built by the gradient function."""
    if depth > 6:
        return False
    try:
        value = api.tensor_util.constant_value(tensor)
    except Exception:  # noqa: BLE001
        value = None
    if value is not None:
        try:
            return not value.any()
        except AttributeError:
            return value == 0
    op = tensor.op
    if op.type in _ZERO_SOURCES:
        return True
    if op.type == "Fill":
        return _is_zero(api, op.inputs[1], depth + 1)
    if op.type in _PASS_THROUGH and op.inputs:
        return _is_zero(api, op.inputs[0], depth + 1)
    if op.type == "Mul":
        return any(_is_zero(api, t, depth + 1) for t in op.inputs)
    return False


def _classify(api, value):
    if value is None:
        return "none"
    tensors = [value.values] if hasattr(value, "values") and hasattr(value, "indices") else [value]
    if all(_is_zero(api, t) for t in tensors):
        return "zero"
    return "gradient"


def _arg_names(args, op, tensors, fallback):
    """One OpDef argument name per tensor (a list argument repeats its name)."""
    names = []
    for arg in args:
        count = 1
        if arg.number_attr:
            count = op.get_attr(arg.number_attr)
        elif arg.type_list_attr:
            count = len(op.get_attr(arg.type_list_attr))
        names.extend([arg.name] * count)
    if len(names) != len(tensors):  # functional ops built through the API
        names = ["%s%d" % (fallback, i) for i in range(len(tensors))]
    return names


def input_names(op_def, op):
    return _arg_names(op_def.input_arg, op, op.inputs, "input")


def output_names(op_def, op):
    return _arg_names(op_def.output_arg, op, op.outputs, "output")


def _raises_by_design(exc):
    """A gradient function that raises this raises for every caller: an explicit
    refusal (LookupError, NotImplementedError, RuntimeError, an assertion with a
    message) or a signature that does not fit the op (a TF bug)."""
    name = type(exc).__name__
    if name == "AssertionError":
        return bool(str(exc).strip())
    if name == "TypeError":
        return bool(_WRONG_ARITY.search(str(exc)) or _HANDLE_MISMATCH.search(str(exc)))
    return name in _BY_DESIGN


class control_flow_v1(object):
    """TensorArray (V1-V3) gradients only work with TF1 control flow, which is what
    graphs containing those ops use; TF2 switches it off process-wide."""

    def __init__(self, api, wanted):
        self.wanted = wanted
        self.module = None

    def __enter__(self):
        if self.wanted:
            try:
                from tensorflow.python.ops import control_flow_util
            except ImportError:
                return self
            self.module = control_flow_util
            self.old = getattr(control_flow_util, "ENABLE_CONTROL_FLOW_V2", None)
            control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
        return self

    def __exit__(self, *exc):
        if self.module is not None:
            self.module.ENABLE_CONTROL_FLOW_V2 = self.old
        return False


def _upstream(api, op, index, output):
    name = api.type_name(output.dtype)
    if name == "DT_RESOURCE":
        return None
    if name == "DT_VARIANT":
        return variant_input(api, op.type, "DT_FLOAT", None, 1000 + index)
    return api.placeholder(output.dtype.base_dtype, shape=output.get_shape(), name="grad%d" % index)


def _call_gradient(api, fn, graph, op):
    """(what the gradient function returns, the upstream gradient given per output)."""
    with graph.as_default():
        # TensorArray gradients take their source name from the gradient's name scope.
        with graph.name_scope("gradients"):
            upstream = [_upstream(api, op, i, o) for i, o in enumerate(op.outputs)]
            returned = fn(op, *upstream)
    if not isinstance(returned, (list, tuple)):
        returned = [returned]
    return list(returned), upstream


# ops whose result depends on the shape of their input only: an upstream gradient that
# reaches a returned gradient through one of them gives it no value
_SHAPE_ONLY = ("Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike",
               "BroadcastGradientArgs", "VariableShape", "TensorListLength",
               "TensorListElementShape")


def _reads(value, upstream, forward):
    """The positions of ``upstream`` whose values ``value`` (a returned gradient) reads
    along data edges, not through an op that reads only shapes; a function call (While,
    If) reads all its inputs."""
    tensors = [value.values] if hasattr(value, "values") and hasattr(value, "indices") \
        else [value]
    wanted = dict((id(t.op), k) for k, t in enumerate(upstream) if t is not None)
    found, seen = set(), set()
    stack = [t.op for t in tensors]
    while stack:
        node = stack.pop()
        if id(node) in seen or node is forward:
            continue
        seen.add(id(node))
        if id(node) in wanted:
            found.add(wanted[id(node)])
            continue
        if node.type in _SHAPE_ONLY:
            continue
        stack.extend(t.op for t in node.inputs)
    return found


def by_output(rows, returned, upstream, forward, op_def):
    """For an op of several outputs, what each output's upstream gradient gives each
    input (``outputs`` of a row, one result per output position): ``gradient`` where
    the input's gradient reads that upstream's values, else ``zero`` (a gradient is
    linear in its upstream: one that does not read it is zero by fact), ``none`` where
    the input's gradient is None. FusedBatchNorm's gradient reads only the normalised
    value's upstream: the batch mean and variance give the input nothing. Not recorded
    where some output has no upstream to give (a resource), nor for ops that run a
    function (While, If): what passes there is the body's, not the op's."""
    if len(upstream) < 2 or any(u is None for u in upstream) or \
            any(a.type in ("func", "list(func)") for a in op_def.attr):
        return
    for row, value in zip(rows, returned):
        if row["result"] in ("none", "zero"):
            row["outputs"] = [row["result"]] * len(upstream)
            continue
        read = _reads(value, upstream, forward)
        row["outputs"] = ["gradient" if k in read else "zero" for k in range(len(upstream))]


def probe_symbolic(api, op_def):
    """Build the op, call its gradient function; returns (rows, graph, op, returned).

    A gradient function that raises for every caller gives rows with ``raises``.
    """
    fn = api.gradient_function(op_def.name)
    first_failure = None
    attempts = []
    if op_def.name in FUNCTIONAL:
        attempts.append(("functional", None, None, 0))
    if op_def.HasField("deprecation"):
        attempts.append(("imported", None, None, 0))
    for shape, int_mode in _CONFIGS:
        attempts.append(("generic", shape, int_mode, 0))
    if any(a.type == "string" and a.name in STRING_OVERRIDES for a in op_def.attr):
        attempts.append(("generic", None, "placeholder", 1))
        attempts.append(("generic", [2, 2, 2, 2], "placeholder", 1))
    family = families.family_for(op_def.name)
    if family is not None:  # last: the inputs the numerical check builds for the op (a
        # gradient that reads their static shapes: ImageProjectiveTransformV3's transforms)
        attempts.append(("family", family.shape, "named", 0))
    raised = None
    for kind, shape, int_mode, variant in attempts:
        graph = api.tf.Graph()
        try:
            if kind == "functional":
                op = build_functional(api, graph, op_def.name, "DT_FLOAT")
            elif kind == "imported":
                op = build_imported(api, graph, op_def, "DT_FLOAT")
            elif kind == "family":
                builder = args.Builder(api, graph, op_def.name, family, "DT_FLOAT", shape)
                op = build(api, graph, op_def, "DT_FLOAT", shape, int_mode, variant,
                           builder=builder)
            else:
                op = build(api, graph, op_def, "DT_FLOAT", shape, int_mode, variant)
        except ProbeFailure as failure:
            first_failure = first_failure or failure
            continue
        except Exception as exc:  # noqa: BLE001
            first_failure = first_failure or ProbeFailure("build", failure_reason(exc))
            continue
        # While gradients rewrite the forward op (accumulator inputs): judge against
        # the inputs it had before, as tf.gradients does
        inputs = list(op.inputs)
        names = input_names(op_def, op)
        try:
            with control_flow_v1(api, op_def.name.startswith("TensorArray")):
                returned, upstream = _call_gradient(api, fn, graph, op)
        except Exception as exc:  # noqa: BLE001 - gradient functions raise anything
            if _raises_by_design(exc):
                raised = raised or (graph, op, failure_reason(exc))
            else:
                first_failure = ProbeFailure("gradient", failure_reason(exc))
            continue
        if len(returned) != len(inputs):  # tf.gradients raises on this, for every graph
            raised = raised or (graph, op, "returns %d gradients for %d inputs, which "
                                "tf.gradients rejects" % (len(returned), len(inputs)))
            continue
        rows = [{"position": i, "name": n, "dtype": api.type_name(t.dtype),
                 "trainable": api.type_name(t.dtype) in TRAINABLE,
                 "result": _classify(api, g)}
                for i, (n, t, g) in enumerate(zip(names, inputs, returned))]
        by_output(rows, returned, upstream, op, op_def)
        return rows, graph, op, returned, None
    if raised is not None:
        graph, op, message = raised
        rows = [{"position": i, "name": n, "dtype": api.type_name(t.dtype),
                 "trainable": api.type_name(t.dtype) in TRAINABLE, "result": "raises"}
                for i, (n, t) in enumerate(zip(input_names(op_def, op), op.inputs))]
        return rows, graph, op, [], message
    raise first_failure or ProbeFailure("build", "no construction worked")


def effective(rows):
    """differentiable / partial / none from per-input rows."""
    candidates = [r for r in rows if r["trainable"]] or rows
    got = [r for r in candidates if r["result"] == "gradient"]
    if not got:
        return "none"
    return "differentiable" if len(got) == len(candidates) else "partial"


def gradient_path_ops(api, returned, op):
    """{op type: node name} of the ops between the returned gradients and the probe's
    inputs, along edges that carry gradients. The gradient's own gradient needs
    every one of them."""
    seen, types = set(), {}
    stack = [getattr(g, "values", g) for g in returned if g is not None]
    while stack:
        tensor = stack.pop()
        node = tensor.op
        if id(node) in seen or node is op:
            continue
        seen.add(id(node))
        if node.type in ("Placeholder", "Const", "VarHandleOp", "VariableV2"):
            continue
        types.setdefault(node.type, node.name)
        stack.extend(t for t in node.inputs if api.type_name(t.dtype) in TRAINABLE)
    return types
