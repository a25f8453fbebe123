"""Probe gradient functions: which inputs receive a gradient, second order, numerics.

Runs inside the harvested TensorFlow environment next to ``collector.py`` (which
loads it by path), so the same rules apply: standard library and TensorFlow only,
Python 3.7+, TF 1.13+, graph mode everywhere (``tf.compat.v1`` where it exists).

For every op whose gradient is ``registered``, ``probe_one`` builds the op in a
fresh graph from its OpDef with generated inputs and attributes, calls the real
registered gradient function with an upstream gradient for every output, and
classifies what comes back for each input: ``gradient``, ``none``, ``zero`` or
``raises``. Ops whose inputs need more than a placeholder (functions, resources,
variants, reference variables) are built by targeted builders. It then compares
``tf.gradients`` with central finite differences at a random point away from kinks.
"""
from __future__ import print_function

import random
import re

# Data types that carry gradients (TF's rule in gradients_util: floating, complex,
# resource and variant tensors are differentiable).
_FLOAT_TYPES = ("DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16")
_COMPLEX_TYPES = ("DT_COMPLEX64", "DT_COMPLEX128")
_TRAINABLE = _FLOAT_TYPES + _COMPLEX_TYPES + ("DT_RESOURCE", "DT_VARIANT")
_TYPE_PREFERENCE = ("DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16", "DT_COMPLEX64",
                    "DT_COMPLEX128", "DT_INT32", "DT_INT64", "DT_BOOL", "DT_STRING")
_ZERO_SOURCES = ("ZerosLike", "Zeros")
_PASS_THROUGH = ("Identity", "Reshape", "Cast", "BroadcastTo", "Tile", "ExpandDims",
                 "Squeeze", "Transpose", "Snapshot")
# String attrs whose value decides whether a gradient exists or the op builds at all.
_STRING_OVERRIDES = {"equation": (b"ab,bc->ac", b"ab,bc"), "reduction": (b"sum",),
                     "padding": (b"VALID", b"SAME"), "data_format": (b"NHWC",)}
_LIST_STRING_OVERRIDES = {"row_partition_types": [b"ROW_SPLITS"]}
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


def _load_sibling(filename, module_name):
    """An in-environment module next to this file, loaded by path as this one is."""
    import importlib.util
    import os
    import sys
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__file__", None) == path:
        return loaded
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


args = _load_sibling("probe_args.py", "opregistry_probe_args")


class ProbeFailure(Exception):
    """Why an op could not be probed; ``stage`` says where it failed."""

    def __init__(self, stage, reason):
        Exception.__init__(self, "%s: %s" % (stage, reason))
        self.stage = stage
        self.reason = reason


def _one_line(exc):
    message = str(getattr(exc, "message", None) or exc)
    if "Detected at node" in message:  # TF runtime errors: the cause is the last line
        lines = [line.strip() for line in message.splitlines()
                 if line.strip() and not line.startswith((" ", "\t")) and
                 not line.strip().startswith(("[[", "File ", "Detected at node", "Graph execution"))]
        message = lines[-1] if lines else message
    text = ("%s: %s" % (type(exc).__name__, message)).strip()
    return _strip_paths(re.sub(r"\s+", " ", text))[:300]


# Where the harvest ran differs between machines and runs (a checkout, a cached venv):
# messages keep a file's name only, so a re-harvest records the same reason.
_DEFINED_AT = re.compile(r"\s*\(defined at [^)]*\)")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])(?:/[^/\s:'\"(),]+)+/([^/\s:'\"(),]+)")


def _strip_paths(text):
    return _ABSOLUTE_PATH.sub(r"\1", _DEFINED_AT.sub("", text))


class TFApi(object):
    """The TensorFlow entry points the probes use, resolved once per release."""

    def __init__(self):
        import numpy
        import tensorflow as tf
        from tensorflow.core.framework import attr_value_pb2, tensor_shape_pb2, types_pb2
        from tensorflow.python.framework import dtypes, ops, tensor_util
        self.np = numpy
        self.tf = tf
        self.v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
        self.attr_value_pb2 = attr_value_pb2
        self.tensor_shape_pb2 = tensor_shape_pb2
        self.types_pb2 = types_pb2
        self.dtypes = dtypes
        self.ops = ops
        self.tensor_util = tensor_util
        self.registry = getattr(ops, "_gradient_registry", None) or ops.gradient_registry

    def type_name(self, dtype):
        return self.types_pb2.DataType.Name(dtype.base_dtype.as_datatype_enum)

    def dtype(self, name):
        return self.dtypes.as_dtype(self.types_pb2.DataType.Value(name))

    def create_op(self, graph, op_type, inputs, attrs, name):
        create = getattr(graph, "_create_op_internal", None)
        if create is not None:
            return create(op_type, inputs, dtypes=None, attrs=attrs, name=name)
        return graph.create_op(op_type, inputs, None, attrs=attrs, name=name)

    def placeholder(self, dtype, shape=None, name=None):
        return self.v1.placeholder(dtype, shape=shape, name=name)

    def gradient_function(self, op_type):
        return self.registry.lookup(op_type)

    def const(self, value, dtype):
        return self.tf.constant(value, dtype=dtype)

    def gradients(self, ys, xs, grad_ys):
        fn = getattr(self.v1, "gradients", None) or self.tf.gradients
        return fn(ys, xs, grad_ys=grad_ys)


# --------------------------------------------------------------------------- building

def _allowed_names(api, attr):
    if not attr.HasField("allowed_values"):
        return []
    return [api.types_pb2.DataType.Name(n) for n in attr.allowed_values.list.type]


def _choose_type(allowed, float_type):
    if not allowed:
        return float_type
    if float_type in allowed:
        return float_type
    if float_type == "DT_DOUBLE" and "DT_COMPLEX128" in allowed and not any(
            name in allowed for name in _FLOAT_TYPES):
        return "DT_COMPLEX128"  # complex-only ops in double precision
    for name in _TYPE_PREFERENCE:
        if name in allowed:
            return name
    return allowed[0]


def _is_input_type_attr(op_def, name):
    return any(a.type_attr == name or a.type_list_attr == name for a in op_def.input_arg)


def _is_number_attr(op_def, name):
    return any(a.number_attr == name for a in list(op_def.input_arg) + list(op_def.output_arg))


def _required_attr(api, attr, variant):
    """A sensible value for an attr without a default."""
    av = api.attr_value_pb2.AttrValue
    allowed = attr.allowed_values.list if attr.HasField("allowed_values") else None
    kind = attr.type
    minimum = attr.minimum if attr.has_minimum else 0
    if kind == "string":
        choices = list(_STRING_OVERRIDES.get(attr.name, ()))
        if allowed is not None and allowed.s:
            choices = [c for c in choices if c in allowed.s] + list(allowed.s)
        return av(s=choices[variant % len(choices)] if choices else b"")
    if kind == "int":
        return av(i=max(1, minimum))
    if kind == "float":
        return av(f=1.0)
    if kind == "bool":
        return av(b=False)
    if kind == "shape":
        return av(shape=api.tensor_shape_pb2.TensorShapeProto(unknown_rank=True))
    if kind == "list(int)":
        return av(list=av.ListValue(i=[1] * max(4, minimum)))
    if kind == "list(float)":
        return av(list=av.ListValue(f=[1.0] * max(4, minimum)))
    if kind == "list(string)":
        return av(list=av.ListValue(s=_LIST_STRING_OVERRIDES.get(attr.name, [b"a"] * max(1, minimum))))
    if kind == "list(shape)":
        return av(list=av.ListValue(shape=[
            api.tensor_shape_pb2.TensorShapeProto(unknown_rank=True)] * max(1, minimum)))
    if kind == "tensor":
        return av(tensor=api.tensor_util.make_tensor_proto(0.5, dtype=api.dtypes.float32))
    raise ProbeFailure("attrs", "no generic value for required attr %s of type %s"
                       % (attr.name, kind))


def _plan(api, op_def, float_type, variant=0, family=None, precise=False):
    """(attrs as AttrValue protos, [(input arg name, dtype name, is_ref)]); a family
    (probe_args) fixes some type attributes and attribute values."""
    av = api.attr_value_pb2.AttrValue
    attrs, type_of, list_types, numbers = {}, {}, {}, {}
    types = dict(family.types) if family is not None else {}
    if precise and float_type == "DT_DOUBLE":
        types.update(_double_output_types(api, op_def))
    for attr in op_def.attr:
        if attr.type == "type" and attr.name in types:
            type_of[attr.name] = types[attr.name]
            attrs[attr.name] = av(type=api.types_pb2.DataType.Value(types[attr.name]))
        elif attr.type == "type":
            if attr.HasField("default_value") and not _is_input_type_attr(op_def, attr.name):
                chosen = api.types_pb2.DataType.Name(attr.default_value.type)
            else:
                chosen = _choose_type(_allowed_names(api, attr), float_type)
            type_of[attr.name] = chosen
            attrs[attr.name] = av(type=api.types_pb2.DataType.Value(chosen))
        elif attr.type == "list(type)":
            count = max(1, attr.minimum if attr.has_minimum else 1)
            if attr.HasField("default_value") and len(attr.default_value.list.type) >= count \
                    and not _is_input_type_attr(op_def, attr.name):
                names = [api.types_pb2.DataType.Name(t) for t in attr.default_value.list.type]
            else:
                names = [_choose_type(_allowed_names(api, attr), float_type)] * count
            list_types[attr.name] = names
            attrs[attr.name] = av(list=av.ListValue(
                type=[api.types_pb2.DataType.Value(n) for n in names]))
        elif attr.type == "int" and _is_number_attr(op_def, attr.name):
            n = max(2, attr.minimum if attr.has_minimum else 2)
            numbers[attr.name] = n
            attrs[attr.name] = av(i=n)
        elif attr.HasField("default_value") and not (
                attr.type == "string" and attr.name in _STRING_OVERRIDES and variant):
            continue  # the C API fills in defaults
        else:
            attrs[attr.name] = _required_attr(api, attr, variant)
    if family is not None:
        names = set(a.name for a in op_def.attr)
        for name, value in family.attrs.items():
            if name in names:
                attrs[name] = args.attr_value(api, value)
    slots = []
    for arg in op_def.input_arg:
        fixed = api.types_pb2.DataType.Name(arg.type) if arg.type else None
        if arg.number_attr:
            slots.extend([(arg.name, fixed or type_of.get(arg.type_attr), arg.is_ref)]
                         * numbers.get(arg.number_attr, 2))
        elif arg.type_list_attr:
            slots.extend((arg.name, t, arg.is_ref) for t in list_types.get(arg.type_list_attr, []))
        else:
            slots.append((arg.name, fixed or type_of.get(arg.type_attr), arg.is_ref))
    return attrs, slots


_COMPLEX_PARTNER = {"DT_FLOAT": "DT_DOUBLE", "DT_COMPLEX64": "DT_COMPLEX128"}


def _double_output_types(api, op_def):
    """For ops on complex numbers checked in double precision: the output type
    attributes (complex64 / float by default) in double precision too, so that the
    types of a Complex, Real or RFFT op agree."""
    complex_only = [a for a in op_def.attr if a.type == "type" and _allowed_names(api, a)
                    and set(_allowed_names(api, a)) <= set(_COMPLEX_TYPES)]
    if not complex_only:
        return {}
    out = {}
    for attr in op_def.attr:
        if attr.type != "type" or not attr.HasField("default_value") or \
                _is_input_type_attr(op_def, attr.name):
            continue
        default = api.types_pb2.DataType.Name(attr.default_value.type)
        wanted = _COMPLEX_PARTNER.get(default)
        if wanted and wanted in _allowed_names(api, attr):
            out[attr.name] = wanted
    return out


def _named_float_shape(op_name, arg_name, shape):
    """Shapes that fit an argument's usual meaning next to data of ``shape``."""
    if arg_name in ("thresh", "padding_value", "l2_regularizer", "default_value"):
        return []
    if op_name.startswith("Sparse") and arg_name.endswith("values"):
        return [2]
    if arg_name == "boxes":
        return [1, 4]
    if arg_name in ("translation",) or (op_name == "ScaleAndTranslate" and arg_name == "scale"):
        return [2]
    if arg_name == "filter" and op_name.startswith("Dilation"):
        return shape[1:]
    if arg_name == "transforms":
        return [1, 8]
    if arg_name in ("bias", "scale", "offset", "mean", "variance", "estimated_mean",
                    "estimated_variance", "reserve_space_1", "reserve_space_2", "gamma", "beta"):
        return [shape[-1]]
    if arg_name == "diagonal":
        return shape[:-1]
    return shape


def shape_or_unknown(api, shape):
    from tensorflow.python.framework import tensor_shape
    return tensor_shape.TensorShape(shape)


def _ref_input(api, graph, dtype_name, shape, index):
    """A TF1 reference tensor: the output of a VariableV2 op."""
    av = api.attr_value_pb2.AttrValue
    shape_proto = api.tensor_shape_pb2.TensorShapeProto(
        dim=[api.tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in (shape or [])],
        unknown_rank=shape is None)
    op = api.create_op(graph, "VariableV2", [], {
        "dtype": av(type=api.types_pb2.DataType.Value(dtype_name)), "shape": av(shape=shape_proto),
        "container": av(s=b""), "shared_name": av(s=b"")}, "ref%d" % index)
    return op.outputs[0]


def _variant_input(api, op_name, float_type, shape, index):
    """A variant carrying the handle data its consumer expects."""
    from tensorflow.python.ops import gen_list_ops
    dtype = api.dtype(float_type)
    if "SparseMatrix" in op_name or "CSRSparseMatrix" in op_name:
        from tensorflow.python.ops.linalg.sparse import sparse_csr_matrix_ops as csr
        dense = api.placeholder(dtype, shape=[2, 2], name="dense%d" % index)
        indices = api.placeholder(api.dtypes.int64, shape=[None, 2], name="idx%d" % index)
        return csr.dense_to_csr_sparse_matrix(dense, indices)
    tensor = api.placeholder(dtype, shape=[2, 2], name="elements%d" % index)
    return gen_list_ops.tensor_list_from_tensor(
        tensor, element_shape=api.const([2], api.dtypes.int32))


def _int_input(api, dtype, shape, mode, index, arg_name="", ordinal=None, op_name=""):
    rank = len(shape) if shape is not None else 2
    if mode == "named":  # values that fit the argument's usual meaning
        first = shape[0] if shape else 2
        if op_name.startswith("Sparse") and not op_name.startswith("SparseSegment"):
            if "indices" in arg_name:
                return api.const([[0, 0], [1, 1]], dtype)
            if "shape" in arg_name:
                return api.const([2, 2], dtype)
        if op_name.startswith("SparseSegment") and arg_name == "indices":
            return api.const([0, 1], dtype)
        if arg_name == "indices" and ("Nd" in op_name or op_name.startswith("TensorScatter")):
            return api.const([[0], [1]], dtype)
        if arg_name in ("box_ind", "box_index", "box_indices"):
            return api.const([0], dtype)
        if arg_name in ("crop_size",) or (arg_name == "size" and rank == 4):
            return api.const([2, 2], dtype)
        if arg_name in ("num_rows", "num_cols"):
            return api.const(-1, dtype)
        if arg_name == "start":
            return api.const([0] * rank, dtype)
        if arg_name == "fft_length":
            return api.const([2] * (2 if "2D" in op_name else 3 if "3D" in op_name else 1), dtype)
        if "block_shape" in arg_name:
            return api.const([1, 1], dtype)
        if arg_name in ("paddings", "crops"):
            return api.const([[0, 0], [0, 0]], dtype)
        if arg_name == "perm":
            return api.const(list(reversed(range(rank))), dtype)
        if arg_name in ("multiples",):
            return api.const([1] * rank, dtype)
        if arg_name in ("dims", "shape", "output_shape", "dense_shape", "input_sizes",
                        "filter_sizes", "orig_input_shape", "size", "element_shape"):
            return api.const([2] * rank, dtype)
        if arg_name == "segment_ids":
            return api.const([i % 2 for i in range(first)], dtype)
        if arg_name == "num_segments":
            return api.const(2, dtype)
        if arg_name == "axis" and rank > 0:
            return api.const([0], dtype)
        if arg_name == "indices" and ordinal is not None:  # DynamicStitch: distinct slots
            return api.const(ordinal, dtype)
        return api.const(0, dtype)
    if mode == "placeholder":
        return api.placeholder(dtype, name="in%d" % index)
    if mode == "scalar":
        return api.const(0, dtype)
    if mode == "ones":
        return api.const([1] * rank, dtype)
    if mode == "pairs":
        return api.const([[0, 0]] * rank, dtype)
    raise ValueError(mode)


def build(api, graph, op_def, float_type="DT_FLOAT", shape=None, int_mode="placeholder",
          variant=0, builder=None):
    """Create ``op_def`` in ``graph`` from generated inputs; return the Operation.

    ``builder`` (probe_args.Builder, for the numerical check) builds the inputs its
    family or their dtype asks for; the rest are made here."""
    family = builder.family if builder is not None else None
    attrs, slots = _plan(api, op_def, float_type, variant, family, builder is not None)
    if any(dtype is None for _, dtype, _ in slots):
        raise ProbeFailure("build", "cannot infer an input type")
    with graph.as_default():
        inputs = []
        ta = None
        seen = {}
        for index, (arg_name, dtype_name, is_ref) in enumerate(slots):
            ordinal = seen[arg_name] = seen.get(arg_name, -1) + 1
            made = builder.make_input(index, arg_name, dtype_name, is_ref, attrs) \
                if builder is not None else None
            if made is not None:
                inputs.append(made)
                continue
            if op_def.name.startswith("TensorArray") and not is_ref and (
                    dtype_name == "DT_RESOURCE" or arg_name == "flow_in"):
                # a real TensorArray: its handle and flow, as the gradient expects
                if ta is None:
                    from tensorflow.python.ops import gen_data_flow_ops
                    ta = gen_data_flow_ops.tensor_array_v3(
                        size=api.const(2, api.dtypes.int32), dtype=api.dtype(float_type),
                        element_shape=shape_or_unknown(api, shape), name="ta")
                inputs.append(ta[0] if dtype_name == "DT_RESOURCE" else ta[1])
            elif is_ref:
                inputs.append(_ref_input(api, graph, dtype_name, shape, index))
            elif dtype_name == "DT_RESOURCE":
                var = api.v1.Variable(api.tf.ones([2, 2], dtype=api.dtype(float_type)),
                                      use_resource=True, name="var%d" % index)
                inputs.append(var.handle)
            elif dtype_name == "DT_VARIANT":
                inputs.append(_variant_input(api, op_def.name, float_type, shape, index))
            elif dtype_name in ("DT_INT32", "DT_INT64"):
                inputs.append(_int_input(api, api.dtype(dtype_name), shape, int_mode, index,
                                         arg_name, ordinal, op_def.name))
            else:
                this_shape = shape if dtype_name in _FLOAT_TYPES + _COMPLEX_TYPES else None
                if int_mode == "named" and shape:
                    this_shape = _named_float_shape(op_def.name, arg_name, shape)
                inputs.append(api.placeholder(api.dtype(dtype_name), shape=this_shape,
                                              name="in%d" % index))
            if builder is not None:
                builder.note_input(arg_name, inputs[-1])
        try:
            return api.create_op(graph, op_def.name, inputs, attrs, "probed")
        except Exception as exc:  # noqa: BLE001 - shape functions raise anything
            raise ProbeFailure("build", _one_line(exc))


def build_imported(api, graph, op_def, float_type="DT_FLOAT", shape=None):
    """Build an op removed from current GraphDef versions (e.g. TopK, the
    TensorArray V1/V2 ops) the only way TF still accepts it: by importing a GraphDef
    whose producer version predates the removal, as an old model file would."""
    from tensorflow.core.framework import graph_pb2
    attrs, slots = _plan(api, op_def, float_type)
    gd = graph_pb2.GraphDef()
    gd.versions.producer = max(0, op_def.deprecation.version - 1)
    av = api.attr_value_pb2.AttrValue
    names = []
    for index, (_, dtype_name, is_ref) in enumerate(slots):
        if dtype_name is None:
            raise ProbeFailure("build", "cannot infer an input type")
        node = gd.node.add()
        node.name = "in%d" % index
        node.attr["dtype"].CopyFrom(av(type=api.types_pb2.DataType.Value(dtype_name)))
        if is_ref:
            node.op = "VariableV2"
            node.attr["shape"].CopyFrom(av(shape=api.tensor_shape_pb2.TensorShapeProto(
                unknown_rank=True)))
        else:
            node.op = "Placeholder"
        names.append(node.name)
    node = gd.node.add()
    node.name, node.op = "probed", op_def.name
    node.input.extend(names)
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    with graph.as_default():
        try:
            api.v1.import_graph_def(gd, name="")
        except Exception as exc:  # noqa: BLE001
            raise ProbeFailure("build", "import of a version-%d GraphDef: %s"
                               % (gd.versions.producer, _one_line(exc)))
    return graph.get_operation_by_name("probed")


def _build_functional(api, graph, op_type, float_type):
    """If/While/Case and their stateless forms, built the way users build them."""
    dtype = api.dtype(float_type)
    with graph.as_default():
        x = api.placeholder(dtype, shape=[2], name="x")
        stateful = not op_type.startswith("Stateless")

        def touch(value):  # a stateful op in a branch makes TF choose the stateful form
            if stateful:
                return value + 0.0 * api.v1.random_uniform([2], dtype=dtype)
            return value

        if op_type in ("If", "StatelessIf"):
            from tensorflow.python.ops import cond_v2
            pred = api.placeholder(api.dtypes.bool, shape=[], name="pred")
            cond_v2.cond_v2(pred, lambda: touch(x * 2.0), lambda: touch(x * x))
        elif op_type in ("While", "StatelessWhile"):
            from tensorflow.python.ops import while_v2
            while_v2.while_loop(lambda i, v: i < 3,
                                      lambda i, v: (i + 1, touch(v * 1.5)),
                                      [api.const(0, api.dtypes.int32), x])
        elif op_type in ("Case", "StatelessCase"):
            from tensorflow.python.ops import cond_v2
            index = api.placeholder(api.dtypes.int32, shape=[], name="index")
            cond_v2.indexed_case(index, [lambda: touch(x * 2.0), lambda: touch(x * x),
                                               lambda: touch(x + 1.0)])
        elif op_type == "EagerPyFunc":
            api.tf.py_function(lambda v: v * 2.0, [x], dtype)
        else:
            return None
    found = [o for o in graph.get_operations() if o.type == op_type]
    if found:
        return found[-1]
    # TF picks the stateful or stateless form itself; both forms have one signature,
    # so re-create the node with the other type and the same inputs and attributes.
    twin = op_type[len("Stateless"):] if op_type.startswith("Stateless") else "Stateless" + op_type
    others = [o for o in graph.get_operations() if o.type == twin]
    if not others:
        raise ProbeFailure("build", "TensorFlow built no %s op for the usual API call" % op_type)
    other = others[-1]
    attrs = dict((k, other.node_def.attr[k]) for k in other.node_def.attr)
    with graph.as_default():
        return api.create_op(graph, op_type, list(other.inputs), attrs, "probed")


_FUNCTIONAL = ("If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase",
               "EagerPyFunc")


# ---------------------------------------------------------------------- classification

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


def _input_names(op_def, op):
    return _arg_names(op_def.input_arg, op, op.inputs, "input")


def _output_names(op_def, op):
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


class _control_flow_v1(object):
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
        return _variant_input(api, op.type, "DT_FLOAT", None, 1000 + index)
    return api.placeholder(output.dtype.base_dtype, shape=output.get_shape(), name="grad%d" % index)


def _call_gradient(api, fn, graph, op):
    with graph.as_default():
        # TensorArray gradients take their source name from the gradient's name scope.
        with graph.name_scope("gradients"):
            upstream = [_upstream(api, op, i, o) for i, o in enumerate(op.outputs)]
            returned = fn(op, *upstream)
    if not isinstance(returned, (list, tuple)):
        returned = [returned]
    return list(returned)


def probe_symbolic(api, op_def):
    """Build the op, call its gradient function; returns (rows, graph, op, returned).

    A gradient function that raises for every caller gives rows with ``raises``.
    """
    fn = api.gradient_function(op_def.name)
    first_failure = None
    attempts = []
    if op_def.name in _FUNCTIONAL:
        attempts.append(("functional", None, None, 0))
    if op_def.HasField("deprecation"):
        attempts.append(("imported", None, None, 0))
    for shape, int_mode in _CONFIGS:
        attempts.append(("generic", shape, int_mode, 0))
    if any(a.type == "string" and a.name in _STRING_OVERRIDES for a in op_def.attr):
        attempts.append(("generic", None, "placeholder", 1))
        attempts.append(("generic", [2, 2, 2, 2], "placeholder", 1))
    raised = None
    for kind, shape, int_mode, variant in attempts:
        graph = api.tf.Graph()
        try:
            if kind == "functional":
                op = _build_functional(api, graph, op_def.name, "DT_FLOAT")
            elif kind == "imported":
                op = build_imported(api, graph, op_def, "DT_FLOAT")
            else:
                op = build(api, graph, op_def, "DT_FLOAT", shape, int_mode, variant)
        except ProbeFailure as failure:
            first_failure = first_failure or failure
            continue
        except Exception as exc:  # noqa: BLE001
            first_failure = first_failure or ProbeFailure("build", _one_line(exc))
            continue
        # While gradients rewrite the forward op (accumulator inputs): judge against
        # the inputs it had before, as tf.gradients does
        inputs = list(op.inputs)
        names = _input_names(op_def, op)
        try:
            with _control_flow_v1(api, op_def.name.startswith("TensorArray")):
                returned = _call_gradient(api, fn, graph, op)
        except Exception as exc:  # noqa: BLE001 - gradient functions raise anything
            if _raises_by_design(exc):
                raised = raised or (graph, op, _one_line(exc))
            else:
                first_failure = ProbeFailure("gradient", _one_line(exc))
            continue
        if len(returned) != len(inputs):  # tf.gradients raises on this, for every graph
            raised = raised or (graph, op, "returns %d gradients for %d inputs, which "
                                "tf.gradients rejects" % (len(returned), len(inputs)))
            continue
        rows = [{"position": i, "name": n, "dtype": api.type_name(t.dtype),
                 "trainable": api.type_name(t.dtype) in _TRAINABLE,
                 "result": _classify(api, g)}
                for i, (n, t, g) in enumerate(zip(names, inputs, returned))]
        return rows, graph, op, returned, None
    if raised is not None:
        graph, op, message = raised
        rows = [{"position": i, "name": n, "dtype": api.type_name(t.dtype),
                 "trainable": api.type_name(t.dtype) in _TRAINABLE, "result": "raises"}
                for i, (n, t) in enumerate(zip(_input_names(op_def, op), op.inputs))]
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
        stack.extend(t for t in node.inputs if api.type_name(t.dtype) in _TRAINABLE)
    return types


# ------------------------------------------------------------------------- numerics

_TOLERANCE = {"DT_DOUBLE": (1e-6, 1e-5), "DT_FLOAT": (1e-3, 2e-2)}  # (step, tolerance)
_NUMERIC_CONFIGS = tuple((shape, mode) for shape in ([2, 2], [2, 2, 2, 2]) for mode in (
    "named", "scalar", "ones")) + tuple((shape, mode) for shape in (
    [2], [], [2, 2, 2], [2, 2, 2, 2, 2]) for mode in ("named", "scalar")) + (
    ([2, 3], "named"),)  # cross products and colour conversions want a last dimension of 3
# Ops whose matrix input is read as symmetric: compare along symmetric directions.
_SYMMETRIC = re.compile(r"^(Cholesky|CholeskyGrad|SelfAdjointEig|SelfAdjointEigV2|BatchCholesky|"
                        r"BatchSelfAdjointEig)")
_POSITIVE_DEFINITE = re.compile(r"Cholesky|Matrix(Inverse|Determinant|Solve|Logarithm|"
                                r"Exponential|SquareRoot)|LogMatrixDeterminant|SelfAdjointEig|"
                                r"^Lu|Svd|^Qr|^Eig|MatrixTriangularSolve")


def numeric_check(api, op_def, rows, seed=1234):
    """Compare ``tf.gradients`` with central finite differences at a random point.

    Full Jacobians (at most 64 elements in and out), float64 where the kernels allow it
    (step 1e-6, tolerance 1e-5 on the error relative to max(1, |J|)), else float32
    (step 1e-3, tolerance 2e-2). Ops of a family in ``probe_args`` get their arguments
    built as callers build them, and are compared as a function of the real sources
    those are built from. Returns a dict with status ``verified``, ``flagged`` or
    ``not_verified`` and the evidence.
    """
    positions = [r["position"] for r in rows
                 if r["result"] == "gradient" and r["dtype"] in _TRAINABLE]
    if not positions:
        return {"status": "not_verified",
                "reason": "no floating, complex, resource or variant input receives a gradient"}
    devices = _kernel_devices(api, op_def.name)
    reason = args.unverifiable(op_def.name) or _no_cpu_kernel(devices, only_elsewhere=True)
    if reason:
        return {"status": "not_verified", "reason": reason}
    family = args.family_for(op_def.name)
    if family is None and any(a.name == "orig_output" for a in op_def.input_arg):
        return {"status": "not_verified",
                "reason": "orig_output must equal the forward op applied to orig_input"}
    if op_def.is_stateful and op_def.name.startswith(("Random", "Multinomial", "Parameterized")):
        return {"status": "not_verified", "reason": "random op: outputs differ between runs"}
    failures = []
    if family is not None:
        configs = [(0, (family.shape, "named"))]
    else:
        variants = (0, 1) if any(a.type == "string" and a.name in _STRING_OVERRIDES
                                 for a in op_def.attr) else (0,)
        configs = [(v, c) for v in variants for c in _NUMERIC_CONFIGS]
    for float_type, (variant, (shape, int_mode)) in (
            (f, c) for f in ("DT_DOUBLE", "DT_FLOAT") for c in configs):
        for low, high in ((0.3, 0.9), (1.1, 1.9)):
            rng = random.Random(seed)
            try:
                return _numeric_at(api, op_def, family, float_type, shape, int_mode, variant,
                                   positions, point=_RandomPoint(rng, low, high))
            except _NonFinite as failure:
                failures.append(failure)
                continue
            except ProbeFailure as failure:
                failures.append(failure)
            except Exception as exc:  # noqa: BLE001
                failures.append(ProbeFailure("numeric", _one_line(exc)))
            break  # the wider range only helps non-finite outputs
    # report the failure that got furthest: after the op was built, if any
    ran = [f for f in failures if f.stage in ("run", "nonfinite", "check")]
    best = (ran or failures)[0] if failures else None
    if best is not None and best.stage == "run" and op_def.name not in _FUNCTIONAL:
        # an op without kernels of its own can still run (AccumulateNV2 is rewritten
        # into others): only a failed run says the missing kernel is the reason
        return {"status": "not_verified",
                "reason": _no_cpu_kernel(devices, only_elsewhere=False) or best.reason}
    return {"status": "not_verified", "reason": best.reason if best else "no point worked"}


def replay(api, op_def, detail):
    """The check of a stored verification, recomputed at its stored point (``feeds``
    by placeholder name, the sources it varied): the evidence behind a flag."""
    family = args.family_named(detail.get("family"))
    point = _StoredPoint(dict((f["name"], f["value"]) for f in detail["feeds"]),
                         detail["varied"])
    return _numeric_at(api, op_def, family, detail["float_type"], detail["shape"],
                       detail["int_mode"], detail.get("variant", 0), [], point=point)


def _kernel_devices(api, op_name):
    """The device types with a kernel for ``op_name`` (None: TF cannot say)."""
    try:
        from tensorflow.python.framework import kernels
        registered = kernels.get_registered_kernels_for_op(op_name)
    except Exception:  # noqa: BLE001 - no such module (1.13) or no such op
        return None
    return sorted(set(k.device_type for k in registered.kernel))


def _no_cpu_kernel(devices, only_elsewhere):
    """Why an op cannot run here: kernels for other devices only (GPU, TPU, XLA: known
    before running it, which may crash the process), or, once a run failed, none."""
    if devices is None or set(devices) & set(["CPU", "DEFAULT", "XLA_CPU"]):
        return None  # XLA_CPU: a device of its own in 1.x, where XlaEinsum runs
    if devices:
        return "no CPU kernel (kernels for %s only)" % ", ".join(devices)
    return None if only_elsewhere else "no CPU kernel (no kernel registered at all)"


class _NonFinite(ProbeFailure):
    pass


class _RandomPoint(object):
    """A random point away from kinks; ``vary(source)``: the sources a check varies."""

    def __init__(self, rng, low, high):
        self.rng, self.low, self.high = rng, low, high

    def value(self, api, source, dtype, shape, positive_definite):
        if source.value is not None:
            return api.np.full(shape, source.value, dtype=dtype.as_numpy_dtype)
        return _point(api, dtype, shape, self.rng, self.low, self.high, positive_definite)

    def varies(self, source, positions, family):
        if source.vary is not None:
            return source.vary
        return bool(family is not None and family.vary_all) or source.position in positions


class _StoredPoint(object):
    """The point a flagged check stored, fed back by placeholder name."""

    def __init__(self, values, varied):
        self.values, self.varied = values, set(varied)

    def value(self, api, source, dtype, shape, positive_definite):
        name = source.feed.op.name
        if name not in self.values:
            raise ProbeFailure("build", "the stored point has no value for %s" % name)
        return api.np.array(self.values[name], dtype=dtype.as_numpy_dtype).reshape(shape)

    def varies(self, source, positions, family):
        return source.feed.op.name in self.varied


def _point(api, dtype, shape, rng, low, high, positive_definite):
    np = api.np
    if positive_definite and len(shape) >= 2 and shape[-1] == shape[-2]:
        n = shape[-1]
        a = np.array([rng.uniform(-1, 1) for _ in range(n * n)]).reshape(n, n)
        m = a.dot(a.T) + n * np.eye(n)
        return np.broadcast_to(m, shape).astype(dtype.as_numpy_dtype).copy()
    size = int(np.prod(shape)) if shape else 1
    # magnitudes away from 0 (kinks of abs/relu, poles of log and 1/x); the first
    # range stays inside (-1, 1) (asin, atanh), the second above 1 (acosh, zeta)
    data = np.array([rng.uniform(low, high) for _ in range(size)], dtype=np.float64)
    return data.reshape(shape).astype(dtype.as_numpy_dtype)


def _directions(np, base, symmetric):
    """Unit directions to differentiate along: the coordinate basis, or for ops that
    read a matrix as symmetric, symmetric perturbations E_ij + E_ji."""
    size = base.size
    if not symmetric or base.ndim < 2 or base.shape[-1] != base.shape[-2]:
        return np.eye(size)
    n = base.shape[-1]
    batch = size // (n * n)
    out = []
    for b in range(batch):
        for i in range(n):
            for j in range(i + 1):
                d = np.zeros((batch, n, n))
                d[b, i, j] = 1.0
                d[b, j, i] = 1.0
                out.append(d.reshape(-1))
    return np.stack(out)


def _numeric_at(api, op_def, family, float_type, shape, int_mode, variant, positions, point):
    graph = api.tf.Graph()
    builder = args.Builder(api, graph, op_def.name, family, float_type, shape)
    with _control_flow_v1(api, family is not None and family.control_flow_v1):
        if op_def.name in _FUNCTIONAL:
            op = _build_functional(api, graph, op_def.name, float_type)
        elif op_def.HasField("deprecation") and \
                op_def.deprecation.version <= graph.graph_def_versions.producer:
            op = build_imported(api, graph, op_def, float_type, shape)
        else:
            op = build(api, graph, op_def, float_type, shape, int_mode, variant, builder)
        read = builder.read_outputs(op, _output_names(op_def, op))
        outputs = [t for _, t in read if api.type_name(t.dtype) in _FLOAT_TYPES]
        if not outputs:
            kinds = sorted(set(api.type_name(o.dtype)[3:].lower() for o in op.outputs))
            raise ProbeFailure("build", "no real floating output (outputs: %s; no reader for "
                               "them)" % ", ".join(kinds) if kinds else "no outputs")
        labels = [_output_names(op_def, op)[i] + ("" if t.op.type == "Identity"
                                                  else ":" + t.op.type) for i, t in read]
        sources, feeds = _feeds(api, op_def, op, builder, shape, point)
        varied = [s for s in sources if point.varies(s, positions, family) and
                  feeds[s.feed].size]  # an empty input has no direction to vary
        result = _compare(api, op_def, graph, op, outputs, sources, varied, feeds,
                          family is not None)
    result.update({"shape": shape, "int_mode": int_mode, "float_type": float_type,
                   "variant": variant, "outputs": labels})
    if family is not None:
        result["family"] = family.name
        if family.note:
            result["note"] = family.note
    if result["status"] == "flagged":  # enough to reproduce it by hand: every input's value
        names = _input_names(op_def, op)
        result["point"] = [{"position": i, "name": names[i] if i < len(names) else "",
                            "dtype": api.type_name(t.dtype),
                            "value": feeds[t].tolist() if t in feeds else _const_value(api, t)}
                           for i, t in enumerate(op.inputs)]
        result["feeds"] = [{"name": t.op.name, "dtype": api.type_name(t.dtype),
                            "value": v.tolist()} for t, v in feeds.items()]
        result["varied"] = [s.feed.op.name for s in varied]
    return result


def _feeds(api, op_def, op, builder, shape, point):
    """(sources, feeds): a value for every placeholder of the graph. The builder's
    sources first, then the op's own placeholder inputs (sources of their position),
    then what generic builders made on the side (the dense matrix of a CSR input)."""
    np = api.np
    inputs = list(op.inputs)
    sources = list(builder.sources)
    known = set(s.feed for s in sources)
    for placeholder in op.graph.get_operations():
        if placeholder.type != "Placeholder" or placeholder.outputs[0] in known:
            continue
        t = placeholder.outputs[0]
        name = api.type_name(t.dtype)
        position = inputs.index(t) if t in inputs else None
        if name in _FLOAT_TYPES:
            sources.append(args.Source(t, position))
        elif name == "DT_BOOL":
            sources.append(args.Source(t, position, vary=False, value=True))
        elif name in ("DT_INT32", "DT_INT64") and op_def.name in _FUNCTIONAL:
            sources.append(args.Source(t, position, vary=False, value=1))  # branch index
        else:
            raise ProbeFailure("build", "cannot make a concrete %s input" % name)
    positive_definite = bool(_POSITIVE_DEFINITE.search(op_def.name))
    names = _input_names(op_def, op)
    feeds = {}
    for s in sources:
        t = s.feed
        if t.dtype.base_dtype == api.dtypes.bool:
            feeds[t] = np.array(True)
            continue
        t_shape = [d if d is not None else 2 for d in t.get_shape().as_list()] \
            if t.get_shape().dims is not None else (
                builder.arg_shape(names[s.position]) if s.position is not None and
                builder.family is not None else shape)
        feeds[t] = point.value(api, s, t.dtype.base_dtype, t_shape, positive_definite)
    if isinstance(point, _RandomPoint):
        _bound_clip_inputs(api, op_def, op, feeds)
        _normalise_labels(api, op_def, op, feeds)
    return sources, feeds


def _compare(api, op_def, graph, op, outputs, sources, varied, feeds, shaped):
    """Theoretical against numerical Jacobian of ``outputs`` w.r.t. the varied sources."""
    np = api.np
    if not varied:
        raise ProbeFailure("build", "the differentiable inputs cannot be fed")
    # the least precise of the inputs varied and the outputs read decides the step
    # (ResizeBilinear, for one, answers in float32 whatever it is given)
    dtypes = set(api.type_name(t.dtype) for t in [s.feed for s in varied] + list(outputs))
    actual = "DT_DOUBLE" if dtypes == set(["DT_DOUBLE"]) else (
        "DT_FLOAT" if dtypes <= set(["DT_FLOAT", "DT_DOUBLE"]) else None)
    if actual is None:
        raise ProbeFailure("build", "only half-precision kernels (%s)" % ", ".join(sorted(dtypes)))
    delta, tolerance = _TOLERANCE[actual]
    if sum(feeds[s.feed].size for s in varied) > 64:
        raise ProbeFailure("build", "too large for a full Jacobian")
    symmetric = bool(_SYMMETRIC.search(op_def.name))
    setups = [s.setup for s in sources if s.setup is not None]
    with graph.as_default():
        # upstream gradients with the outputs' static shapes where a family built the op
        # (CSRSparseMatrixToDense's gradient reads its dense shape from them)
        dys = [api.placeholder(o.dtype.base_dtype, shape=o.get_shape() if shaped and
                               o.get_shape().num_elements() else None, name="dy%d" % i)
               for i, o in enumerate(outputs)]
        grads = api.gradients(outputs, [s.x for s in varied], grad_ys=dys)
        if any(g is None for g in grads):
            raise ProbeFailure("check", "tf.gradients gives no gradient for an input")
        grads = [api.ops.convert_to_tensor(g) for g in grads]  # IndexedSlices -> dense
        init = [v.initializer for v in api.v1.global_variables()]
    session = api.v1.Session(graph=graph)

    def run(fetches, feed):
        if setups:
            session.run(setups, feed_dict=feed)
        return session.run(fetches, feed_dict=feed)

    try:
        if init:
            session.run(init)
        try:
            ys = run(outputs, feeds)
            again = run(outputs, feeds)
        except Exception as exc:  # noqa: BLE001 - no kernel for this dtype, bad values...
            raise ProbeFailure("run", _one_line(exc))
        if any(not np.all(np.isfinite(y)) for y in ys):
            raise _NonFinite("nonfinite", "non-finite output at the test point")
        if any(not np.array_equal(a, b) for a, b in zip(ys, again)):
            raise ProbeFailure("check", "outputs differ between two runs at the same point")
        if sum(y.size for y in ys) > 64:
            raise ProbeFailure("build", "too large for a full Jacobian")
        theory = []  # one backward pass per output element
        for out_index, y in enumerate(ys):
            for j in range(y.size):
                feed = dict(feeds)
                for k, (d, v) in enumerate(zip(dys, ys)):
                    seed = np.zeros(v.size, dtype=v.dtype)
                    if k == out_index:
                        seed[j] = 1
                    feed[d] = seed.reshape(v.shape)
                theory.append([np.asarray(g, dtype=np.float64).reshape(-1)
                               for g in run(grads, feed)])
        errors, worst = [], 0.0
        for x_index, s in enumerate(varied):
            base = feeds[s.feed]
            directions = _directions(np, base, symmetric)
            jt = np.stack([row[x_index] for row in theory]) if theory else np.zeros((0, base.size))
            along_theory = jt.dot(directions.T)
            columns = []
            for d in directions:
                fp, fm = dict(feeds), dict(feeds)
                fp[s.feed] = (base.reshape(-1) + delta * d).reshape(base.shape).astype(base.dtype)
                fm[s.feed] = (base.reshape(-1) - delta * d).reshape(base.shape).astype(base.dtype)
                yp, ym = run(outputs, fp), run(outputs, fm)
                columns.append(np.concatenate(
                    [((a.astype(np.float64) - b.astype(np.float64)) / (2 * delta)).reshape(-1)
                     for a, b in zip(yp, ym)]))
            along_numeric = np.stack(columns, axis=1) if columns else np.zeros_like(along_theory)
            err = float(np.max(np.abs(along_theory - along_numeric))) if along_theory.size else 0.0
            scale = max(1.0, float(np.max(np.abs(along_numeric))) if along_numeric.size else 1.0)
            per_output, row = [], 0
            for k, y in enumerate(ys):  # which output's gradient is off
                block = np.abs(along_theory[row:row + y.size] - along_numeric[row:row + y.size])
                per_output.append(float(block.max()) / scale if block.size else 0.0)
                row += y.size
            errors.append({"position": s.position, "source": s.feed.op.name, "max_error": err,
                           "relative": err / scale, "per_output": per_output})
            worst = max(worst, err / scale)
    finally:
        session.close()
    return {"status": "verified" if worst <= tolerance else "flagged", "dtype": actual,
            "tolerance": tolerance, "delta": delta, "max_error": worst,
            "inputs": _per_input(errors), "symmetric": symmetric}


def _per_input(errors):
    """One entry per op input (the worst of the sources built for it); sources that
    build no single input are listed with ``position`` None."""
    by_position, out = {}, []
    for entry in errors:
        if entry["position"] is None:
            out.append(entry)
            continue
        kept = by_position.get(entry["position"])
        if kept is None or entry["relative"] > kept["relative"]:
            by_position[entry["position"]] = entry
    return sorted(by_position.values(), key=lambda e: e["position"]) + out


def _const_value(api, tensor):
    try:
        value = api.tensor_util.constant_value(tensor)
    except Exception:  # noqa: BLE001
        return None
    return value.tolist() if value is not None else None


def _normalise_labels(api, op_def, op, feeds):
    """Cross-entropy labels are probability distributions: rows that sum to 1."""
    if "CrossEntropy" not in op_def.name:
        return
    for name, t in zip(_input_names(op_def, op), op.inputs):
        if name == "labels" and t in feeds and feeds[t].ndim >= 1:
            value = feeds[t]
            feeds[t] = (value / value.sum(axis=-1, keepdims=True)).astype(value.dtype)


def _bound_clip_inputs(api, op_def, op, feeds):
    """Keep clip bounds on their side of the data, as callers do (min < t < max)."""
    names = _input_names(op_def, op)
    for name, t in zip(names, op.inputs):
        if t in feeds and name in ("clip_value_min", "min", "input_min"):
            feeds[t] = feeds[t] * 0 - 2.0
        elif t in feeds and name in ("clip_value_max", "max", "input_max"):
            feeds[t] = feeds[t] * 0 + 2.0


# --------------------------------------------------------------------------- one op

def probe_one(api, op_def):
    """What the symbolic probe learns about one op with a registered gradient."""
    record = {}
    try:
        rows, graph, op, returned, raised = probe_symbolic(api, op_def)
    except ProbeFailure as failure:
        return {"effective": "unknown", "reason": str(failure)}
    except Exception as exc:  # noqa: BLE001 - never let one op stop the others
        return {"effective": "unknown", "reason": "probe: " + _one_line(exc)}
    record["inputs"] = rows
    record["effective"] = effective(rows)
    if raised:
        record["reason"] = "gradient function raises: " + raised
        return record
    record["gradient_path_ops"] = gradient_path_ops(api, returned, op)
    return record


def wants_numeric_check(record):
    return record.get("effective") in ("differentiable", "partial") and "reason" not in record


def second_order(records, statuses):
    """Fill ``second_order`` (differentiable / blocked / unknown) for every record:
    a gradient is itself differentiable when every op on its path has a gradient
    that gives one in this release."""
    for name, record in records.items():
        types = record.pop("gradient_path_ops", None)
        if record.get("effective") == "none":
            continue  # no gradient, so no gradient of the gradient to judge
        if types is None:
            record["second_order"] = "unknown"
            continue
        blockers = []
        for op_type in sorted(types):
            status = statuses.get(op_type)
            effective_status = records.get(op_type, {}).get("effective")
            if status is None:
                blockers.append({"op": op_type, "reason": "not_in_registry"})
            elif status in ("missing", "no_gradient"):
                blockers.append({"op": op_type, "reason": status})
            elif effective_status == "none":
                reason = "raises" if "raises" in records[op_type].get("reason", "") else "none"
                blockers.append({"op": op_type, "reason": reason})
        record["second_order"] = "blocked" if blockers else "differentiable"
        record["second_order_blockers"] = blockers
    return records


# ----------------------------------------------------------- XLA (issue 25)
# The subject that xla.py compiles: the op built as the numerical check builds it, in
# float32 (what training compiles), then its gradient with a fed upstream gradient.
# Call site for the split harvester: collector's worker calls ``xla_check``.

xla = _load_sibling("xla.py", "opregistry_xla")
_XLA_TOLERANCE = {"float32": _TOLERANCE["DT_FLOAT"][1], "float64": _TOLERANCE["DT_DOUBLE"][1]}


def xla_check(api, op_def, record):
    """``record["xla"]``: whether the op and its gradient compile with XLA on the CPU."""
    return xla.probe_xla(api.tf, api.np, lambda: _xla_subject(api, op_def, record),
                         _XLA_TOLERANCE)


def _xla_subject(api, op_def, record):
    family = args.family_for(op_def.name)
    configs = [(family.shape, "named")] if family is not None else list(_NUMERIC_CONFIGS)
    positions = [r["position"] for r in record.get("inputs", ())
                 if r["result"] == "gradient" and r["dtype"] in _TRAINABLE]
    wants_gradient = record.get("effective") in ("differentiable", "partial")
    first = None
    for shape, int_mode in configs:
        graph = api.tf.Graph()
        builder = args.Builder(api, graph, op_def.name, family, "DT_FLOAT", shape)
        flow = _control_flow_v1(api, family is not None and family.control_flow_v1)
        try:
            with flow:
                if op_def.name in _FUNCTIONAL:
                    op = _build_functional(api, graph, op_def.name, "DT_FLOAT")
                elif op_def.HasField("deprecation") and \
                        op_def.deprecation.version <= graph.graph_def_versions.producer:
                    op = build_imported(api, graph, op_def, "DT_FLOAT", shape)
                else:
                    op = build(api, graph, op_def, "DT_FLOAT", shape, int_mode, 0, builder)
                read = builder.read_outputs(op, _output_names(op_def, op))
                outputs = [t for _, t in read if api.type_name(t.dtype) in _FLOAT_TYPES]
                these = positions
                if not outputs:  # the forward still compiles or not (Where, Unique)
                    outputs, these = [t for _, t in read], []
                point = _RandomPoint(random.Random(1234), 0.3, 0.9)
                sources, feeds = _feeds(api, op_def, op, builder, shape, point)
                if any(s.setup is not None for s in sources) or \
                        api.v1.global_variables():
                    raise ProbeFailure("build", "needs variables or set-up ops")
            with api.v1.Session(graph=graph) as session:  # it runs without XLA
                ys = session.run(outputs, feed_dict=feeds)
        except Exception as exc:  # noqa: BLE001 - builders and shape functions raise anything
            first = first or exc
            continue
        xs = [s.x for s in sources if these and point.varies(s, these, family)]

        def make_gradient(graph=graph, outputs=outputs, xs=xs, flow=flow, ys=ys):
            if not wants_gradient or not xs:
                return None
            with flow, graph.as_default():
                dys = [api.placeholder(o.dtype.base_dtype, shape=o.get_shape(), name="dy%d" % i)
                       for i, o in enumerate(outputs)]
                grads = api.gradients(outputs, xs, grad_ys=dys)
                grads = [api.ops.convert_to_tensor(g) for g in grads if g is not None]
            rng = api.np.random.RandomState(1234)
            return grads, dict((d, (0.5 + rng.random_sample(y.shape)).astype(y.dtype))
                               for d, y in zip(dys, ys))
        return graph, op, outputs, feeds, make_gradient
    raise first if first is not None else ProbeFailure("build", "no construction worked")
