"""Build one op in a fresh graph from its OpDef: generated attributes, placeholder or
targeted inputs (functions, resources, variants, reference variables), or a GraphDef
import for ops the Python API cannot create directly.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+, graph mode.
"""
from __future__ import print_function

from . import probe_args as args
from .probe_api import (
    COMPLEX_TYPES,
    FLOAT_TYPES,
    STRING_OVERRIDES,
    ProbeFailure,
    failure_reason,
)

_TYPE_PREFERENCE = ("DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16", "DT_COMPLEX64",
                    "DT_COMPLEX128", "DT_INT32", "DT_INT64", "DT_BOOL", "DT_STRING")
_LIST_STRING_OVERRIDES = {"row_partition_types": [b"ROW_SPLITS"]}


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
            name in allowed for name in FLOAT_TYPES):
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
        choices = list(STRING_OVERRIDES.get(attr.name, ()))
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
                attr.type == "string" and attr.name in STRING_OVERRIDES and variant):
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
                    and set(_allowed_names(api, a)) <= set(COMPLEX_TYPES)]
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


def variant_input(api, op_name, float_type, shape, index):
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
                inputs.append(variant_input(api, op_def.name, float_type, shape, index))
            elif dtype_name in ("DT_INT32", "DT_INT64"):
                inputs.append(_int_input(api, api.dtype(dtype_name), shape, int_mode, index,
                                         arg_name, ordinal, op_def.name))
            else:
                this_shape = shape if dtype_name in FLOAT_TYPES + COMPLEX_TYPES else None
                if int_mode == "named" and shape:
                    this_shape = _named_float_shape(op_def.name, arg_name, shape)
                inputs.append(api.placeholder(api.dtype(dtype_name), shape=this_shape,
                                              name="in%d" % index))
            if builder is not None:
                builder.note_input(arg_name, inputs[-1])
        try:
            return api.create_op(graph, op_def.name, inputs, attrs, "probed")
        except Exception as exc:  # noqa: BLE001 - shape functions raise anything
            raise ProbeFailure("build", failure_reason(exc))


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
                               % (gd.versions.producer, failure_reason(exc)))
    return graph.get_operation_by_name("probed")


def build_functional(api, graph, op_type, float_type):
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


FUNCTIONAL = ("If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase",
               "EagerPyFunc")
