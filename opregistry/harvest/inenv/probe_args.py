"""Argument generators for the numerical check: inputs built as callers build them.

In-environment code (see ``__init__.py``): standard library, TensorFlow and numpy
only, Python 3.7+, TF 1.13+, graph mode.

The numerical check compares the Jacobian of real floating outputs with respect to real
floating inputs. Most ops are such a function of their own inputs, fed as placeholders.
The others need an argument built the way their callers build it (a TensorList from a
tensor, ``orig_output = max_pool(orig_input)``, a CSR matrix from a dense one, row splits
that start at 0, a variable a resource handle points to) or an output read back as real
tensors (a list stacked, a complex number split into its real and imaginary parts).

For those the check varies the real *sources* the arguments are built from and compares
the Jacobian of the *read* outputs. The builders and readers are ops with gradients of
their own (checked on their own where they have a family here), so a wrong gradient of
the op shows up in the composite as it would for the op alone.

A ``Family`` is data: which ops it covers, the shapes, integer values and attributes
that fit them, and which generator builds an argument or reader reads an output.
Reason-only entries (``UNVERIFIABLE``) say why an op is not compared at all.
"""
from __future__ import print_function

import re


class Source(object):
    """A real floating placeholder the point is fed into.

    ``x`` is what ``tf.gradients`` differentiates with respect to: the placeholder itself,
    or the handle of a variable it initialises (``setup``: the assignment, run with the
    feeds before every evaluation). ``position`` is the op input it builds (None: built
    by a generator for no single input); ``vary``: whether the Jacobian is taken with
    respect to it (None: when that input receives a gradient); ``value``: a fixed value
    (integer orders of Polygamma) instead of a random point.
    """

    def __init__(self, feed, position, x=None, setup=None, vary=None, value=None):
        self.feed = feed
        self.position = position
        self.x = feed if x is None else x
        self.setup = setup
        self.vary = vary
        self.value = value


class Family(object):
    """How to build one family of ops for the numerical check.

    ``ops``: a regular expression on the op name. ``shape``: float inputs' shape;
    ``shapes``: per argument name. ``ints``: integer inputs by argument name (a value,
    or ``EMPTY_INT64``). ``attrs``: attribute values (python values). ``types``: type
    attributes. ``inputs``: argument name -> generator(builder) -> tensor. ``variant``:
    generator for variant inputs, ``resource`` for resource inputs; ``reader``:
    reader(builder, tensor) -> [real tensors] for variant outputs; ``outputs``: output argument name -> reader. ``fixed``: float
    argument -> fixed value. ``vary_all``: vary every source (the op reads data only
    through a handle, e.g. TensorArrays). ``note``: what the composite is, recorded with
    the check.
    """

    def __init__(self, name, ops, shape=None, shapes=None, ints=None, attrs=None, types=None,
                 inputs=None, variant=None, reader=None, outputs=None, fixed=None,
                 resource=None, ref=None, vary_all=False, control_flow_v1=False, note=""):
        self.name = name
        self.ops = re.compile(ops)
        self.shape = [2, 2] if shape is None else shape
        self.shapes = shapes or {}
        self.ints = ints or {}
        self.attrs = attrs or {}
        self.types = types or {}
        self.inputs = inputs or {}
        self.variant = variant
        self.reader = reader
        self.resource = resource
        self.ref = ref
        self.outputs = outputs or {}
        self.fixed = fixed or {}
        self.vary_all = vary_all
        self.control_flow_v1 = control_flow_v1
        self.note = note

    def __repr__(self):
        return "Family(%s)" % self.name


EMPTY_INT64 = "empty int64 vector"


class Builder(object):
    """Builds one op's inputs for the numerical check and reads its outputs.

    ``make_input`` is the hook ``probe.build`` calls for every input slot; it returns
    None to leave a slot to the generic construction."""

    def __init__(self, api, graph, op_name, family, float_type, shape):
        self.api = api
        self.graph = graph
        self.op_name = op_name
        self.family = family
        self.float_type = float_type
        self.dtype = api.dtype(float_type)
        self.shape = shape
        self.sources = []
        self.args = {}  # argument name -> [tensors], in input order
        self.attrs = {}  # the op's planned attrs (AttrValue protos)
        self.position = None
        self.stash = {}  # state shared by the generators of one op (a TensorArray's flow)

    # ------------------------------------------------------------------ building
    def source(self, shape, name, dtype=None, vary=None, value=None, x=None, setup=None,
               position=-1):
        feed = self.api.placeholder(dtype or self.dtype, shape=shape, name=name)
        self.sources.append(Source(feed, self.position if position == -1 else position,
                                   x=x, setup=setup, vary=vary, value=value))
        return feed

    def arg_shape(self, arg_name):
        family = self.family
        if family is not None and arg_name in family.shapes:
            return family.shapes[arg_name]
        if family is not None:
            return family.shape
        return self.shape

    def make_input(self, index, arg_name, dtype_name, is_ref, attrs):
        self.position = index
        self.attrs = attrs
        family = self.family
        tensor = None
        if family is not None and arg_name in family.inputs:
            tensor = family.inputs[arg_name](self)
        elif family is not None and arg_name in family.ints and dtype_name in (
                "DT_INT32", "DT_INT64", "DT_UINT64"):
            tensor = int_const(self.api, family.ints[arg_name], self.api.dtype(dtype_name))
        elif is_ref:
            tensor = family.ref(self, arg_name, dtype_name) if family is not None and \
                family.ref is not None else None
        elif dtype_name in ("DT_COMPLEX64", "DT_COMPLEX128"):
            tensor = complex_from_parts(self, self.api.dtype(dtype_name),
                                        self.arg_shape(arg_name), arg_name)
        elif dtype_name == "DT_VARIANT" and family is not None and family.variant is not None:
            tensor = family.variant(self)
        elif dtype_name == "DT_RESOURCE" and family is not None and family.resource:
            tensor = family.resource(self, arg_name)
        elif family is not None and dtype_name in ("DT_FLOAT", "DT_DOUBLE", "DT_HALF",
                                                   "DT_BFLOAT16"):
            fixed = family.fixed.get(arg_name)
            tensor = self.source(self.arg_shape(arg_name), "src%d" % index,
                                 dtype=self.api.dtype(dtype_name), value=fixed,
                                 vary=False if fixed is not None else None)
        if tensor is not None:
            self.args.setdefault(arg_name, []).append(tensor)
        return tensor

    def note_input(self, arg_name, tensor):
        self.args.setdefault(arg_name, []).append(tensor)

    # ------------------------------------------------------------------- reading
    def read_outputs(self, op, output_names):
        """[(output index, real floating tensor)] to differentiate."""
        api = self.api
        out = []
        family = self.family
        with self.graph.as_default():
            for index, (name, tensor) in enumerate(zip(output_names, op.outputs)):
                type_name = api.type_name(tensor.dtype)
                if family is not None and name in family.outputs:
                    reader = family.outputs[name]
                    read = reader(self, tensor) if reader is not None else []
                elif type_name in ("DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16"):
                    read = [api.tf.identity(tensor)]
                elif type_name in ("DT_COMPLEX64", "DT_COMPLEX128"):
                    from tensorflow.python.ops import math_ops
                    read = [math_ops.real(tensor), math_ops.imag(tensor)]
                elif type_name == "DT_VARIANT" and family is not None and family.reader:
                    read = family.reader(self, tensor)
                else:
                    read = []
                out.extend((index, r) for r in read)
        return out


# ----------------------------------------------------------------- small helpers

def int_const(api, value, dtype):
    if value == EMPTY_INT64:
        return api.tf.constant([], dtype=api.dtypes.int64)
    return api.tf.constant(value, dtype=dtype)


class ShapeAttr(object):
    """A ``shape`` attribute value (python lists are ``list(int)``)."""

    def __init__(self, dims):
        self.dims = dims


def attr_value(api, value):
    """A python value (or a DataType name, a ShapeAttr) as an AttrValue proto."""
    av = api.attr_value_pb2.AttrValue
    if isinstance(value, ShapeAttr):
        return av(shape=api.tensor_shape_pb2.TensorShapeProto(dim=[
            api.tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in value.dims]))
    if isinstance(value, bool):
        return av(b=value)
    if isinstance(value, int):
        return av(i=value)
    if isinstance(value, float):
        return av(f=value)
    if isinstance(value, str) and value.startswith("DT_"):
        return av(type=api.types_pb2.DataType.Value(value))
    if isinstance(value, (str, bytes)):
        return av(s=value.encode("ascii") if isinstance(value, str) else value)
    if isinstance(value, (list, tuple)):
        return av(list=av.ListValue(i=list(value)))
    raise ValueError("no AttrValue for %r" % (value,))


def _float_of(api, complex_dtype):
    return api.dtypes.float64 if complex_dtype == api.dtypes.complex128 else api.dtypes.float32


def complex_from_parts(builder, dtype, shape, arg_name):
    """A complex input as ``Complex(re, im)`` of two real sources."""
    from tensorflow.python.ops import math_ops
    real = _float_of(builder.api, dtype)
    re_part = builder.source(shape, "%s_re%d" % (arg_name, builder.position), dtype=real)
    im_part = builder.source(shape, "%s_im%d" % (arg_name, builder.position), dtype=real)
    return math_ops.complex(re_part, im_part)


def forward_outputs(op_type, arg_names, attr_names, extra=None):
    """A generator for an argument that must be the output of the forward op applied to
    arguments already built (``orig_output = MaxPool(orig_input)``; the batch statistics
    FusedBatchNormGrad reads as reserve spaces): ``op_type`` on the built ``arg_names``
    (plus ``extra`` constant inputs), with the probed op's ``attr_names``. The value is
    wrapped in StopGradient: the gradient function accounts for that dependence itself
    (it returns zeros or None for these inputs), and the finite differences recompute it
    from the perturbed input, so both sides see the same function."""
    def generate(builder, output_index):
        api = builder.api
        key = ("forward", op_type)
        if key not in builder.stash:
            inputs = [builder.args[n][0] for n in arg_names]
            for make in (extra or ()):
                inputs.append(make(builder))
            attrs = dict((k, builder.attrs[k]) for k in attr_names if k in builder.attrs)
            for k, v in builder.family.attrs.items():
                if k in attr_names:
                    attrs[k] = attr_value(api, v)
            builder.stash[key] = api.create_op(builder.graph, op_type, inputs, attrs, "forward")
        return api.tf.stop_gradient(builder.stash[key].outputs[output_index])
    return lambda index: (lambda builder: generate(builder, index))


def variable_handle(builder, arg_name):
    """A resource handle of a variable whose value is a source: assigned from the fed
    point before every evaluation; the Jacobian is taken with respect to the handle."""
    from tensorflow.python.ops import gen_resource_variable_ops as gen_rv
    api = builder.api
    shape = builder.arg_shape(arg_name)
    handle = gen_rv.var_handle_op(dtype=builder.dtype, shape=shape,
                                  shared_name="probe_var%d" % builder.position)
    value = api.placeholder(builder.dtype, shape=shape, name="var_value%d" % builder.position)
    assign = gen_rv.assign_variable_op(handle, value)
    builder.sources.append(Source(value, builder.position, x=handle, setup=assign))
    return handle


def hash_table(builder, arg_name):
    """A lookup table's handle (``tf.lookup.experimental.MutableHashTable``, int64 keys,
    float values: needs no initializer), made as a model makes its tables; the XLA probe
    makes it outside the compiled function, as a training step captures a table."""
    api = builder.api
    av = api.attr_value_pb2.AttrValue
    return api.create_op(builder.graph, "MutableHashTableV2", [], {
        "key_dtype": av(type=api.dtypes.int64.as_datatype_enum),
        "value_dtype": av(type=api.dtypes.float32.as_datatype_enum),
        "container": av(s=b""), "shared_name": av(s=b""),
        "use_node_name_sharing": av(b=False)}, "table%d" % builder.position).outputs[0]


def bool_from_source(builder):
    """A [2, 2] boolean computed from a source (``x > 0.5``), as a model computes one:
    a fed boolean is a scalar, which a reduction over axis 1 refuses."""
    api = builder.api
    return api.tf.greater(builder.source([2, 2], "src%d" % builder.position),
                          api.const(0.5, builder.dtype))


def ref_variable(builder, arg_name, dtype_name):
    """A TF1 reference tensor (VariableV2) assigned the point before every evaluation."""
    api = builder.api
    av = api.attr_value_pb2.AttrValue
    shape = builder.arg_shape(arg_name)
    dtype = api.dtype(dtype_name)
    var = api.create_op(builder.graph, "VariableV2", [], {
        "dtype": av(type=dtype.as_datatype_enum),
        "shape": attr_value(api, ShapeAttr(shape)),
        "container": av(s=b""), "shared_name": av(s=b"")}, "ref_var%d" % builder.position)
    value = api.placeholder(dtype, shape=shape, name="ref_value%d" % builder.position)
    assign = api.create_op(builder.graph, "Assign", [var.outputs[0], value], {
        "T": av(type=dtype.as_datatype_enum)}, "ref_assign%d" % builder.position)
    builder.sources.append(Source(value, builder.position, x=var.outputs[0], setup=assign))
    return var.outputs[0]


# --------------------------------------------------------------------- TensorMap

def map_from_sources(builder):
    """A TensorMap holding keys 2 and 3, each value a source."""
    from tensorflow.python.ops import gen_map_ops
    api = builder.api
    handle = gen_map_ops.empty_tensor_map()
    for key in (2, 3):
        value = builder.source([2], "map_value%d_%d" % (builder.position, key))
        handle = gen_map_ops.tensor_map_insert(handle, api.tf.constant(key), value)
    return handle


def map_reader(keys):
    def read(builder, handle):
        from tensorflow.python.ops import gen_map_ops
        return [gen_map_ops.tensor_map_lookup(handle, builder.api.tf.constant(k),
                                              value_dtype=builder.dtype) for k in keys]
    return read


# ------------------------------------------------------------------ TensorList

def list_from_source(builder):
    from tensorflow.python.ops import list_ops
    elements = builder.source([2, 2], "elements%d" % builder.position)
    return list_ops.tensor_list_from_tensor(elements, element_shape=builder.api.tf.constant(
        -1, dtype=builder.api.dtypes.int32))


def stack_list(builder, handle):
    from tensorflow.python.ops import gen_list_ops
    api = builder.api
    return [gen_list_ops.tensor_list_stack(
        handle, element_shape=api.tf.constant(-1, dtype=api.dtypes.int32),
        element_dtype=builder.dtype)]


# ----------------------------------------------------------------- TensorArray

def _tensor_array(builder, filled):
    from tensorflow.python.ops import gen_data_flow_ops as gen
    api = builder.api
    handle, flow = gen.tensor_array_v3(size=api.tf.constant(2, dtype=api.dtypes.int32),
                                       dtype=builder.dtype, dynamic_size=False,
                                       clear_after_read=False, identical_element_shapes=False,
                                       tensor_array_name="probe_ta")
    if filled:  # written from a source, as a TensorArray filled by a loop would be
        values = builder.source([2, 2], "ta_values")
        flow = gen.tensor_array_scatter_v3(handle, api.tf.constant([0, 1]), values, flow)
    builder.stash["ta"] = (handle, flow)
    return handle


def empty_tensor_array(builder):
    return _tensor_array(builder, False)


def filled_tensor_array(builder):
    return _tensor_array(builder, True)


def tensor_array_flow(builder):
    return builder.stash["ta"][1]


def gather_tensor_array(builder, flow):
    from tensorflow.python.ops import gen_data_flow_ops as gen
    handle = builder.stash["ta"][0]
    return [gen.tensor_array_gather_v3(handle, builder.api.tf.constant([0, 1]), flow,
                                       dtype=builder.dtype)]


def read_tensor_array_0(builder, flow):
    from tensorflow.python.ops import gen_data_flow_ops as gen
    handle = builder.stash["ta"][0]
    return [gen.tensor_array_read_v3(handle, builder.api.tf.constant(0), flow,
                                     dtype=builder.dtype)]


# ------------------------------------------------------------- CSR sparse matrices

_ALL_2X2 = [[0, 0], [0, 1], [1, 0], [1, 1]]


def csr_from_source(builder):
    from tensorflow.python.ops.linalg.sparse import sparse_csr_matrix_ops as csr
    dense = builder.source([2, 2], "dense%d" % builder.position)
    indices = builder.api.tf.constant(_ALL_2X2, dtype=builder.api.dtypes.int64)
    return csr.dense_to_csr_sparse_matrix(dense, indices)


def csr_to_dense(builder, matrix):
    from tensorflow.python.ops.linalg.sparse import sparse_csr_matrix_ops as csr
    return [csr.csr_sparse_matrix_to_dense(matrix, type=builder.dtype)]


# ------------------------------------------------------------------- Optional

def optional_from_source(builder):
    api = builder.api
    value = builder.source([2, 2], "optional_value%d" % builder.position)
    av = api.attr_value_pb2.AttrValue
    op = api.create_op(builder.graph, "OptionalFromValue", [value], {
        "Toutput_types": av(list=av.ListValue(type=[builder.dtype.as_datatype_enum]))},
        "optional%d" % builder.position)
    return op.outputs[0]


def optional_get_value(builder, optional):
    api = builder.api
    av = api.attr_value_pb2.AttrValue
    op = api.create_op(builder.graph, "OptionalGetValue", [optional], {
        "output_types": av(list=av.ListValue(type=[builder.dtype.as_datatype_enum])),
        "output_shapes": av(list=av.ListValue(shape=[
            api.tensor_shape_pb2.TensorShapeProto(unknown_rank=True)]))}, "optional_value")
    return [op.outputs[0]]


# ---------------------------------------------------------------------- ragged

def ragged_values_from_variant(builder, encoded):
    """RaggedTensorFromVariant with the ragged rank the probed op encoded."""
    api = builder.api
    rank = builder.attrs["RAGGED_RANK"].i
    av = api.attr_value_pb2.AttrValue
    op = api.create_op(builder.graph, "RaggedTensorFromVariant", [encoded], {
        "input_ragged_rank": av(i=rank), "output_ragged_rank": av(i=rank),
        "Tvalues": av(type=builder.dtype.as_datatype_enum),
        "Tsplits": builder.attrs["Tsplits"]}, "ragged_from_variant")
    return [op.outputs[-1]]


# --------------------------------------------------------------------- families

def _pool_family(name, ops, rank, grad_of):
    """Max-pool gradients: ``orig_output`` is MaxPool(orig_input) with the same window;
    ``grad`` has the shape of the forward op's output (``grad_of="output"``) or of its
    input (the gradient of the gradient)."""
    window = [1] + [2] * (rank - 2) + [1]
    ones = [1] * rank
    orig_input = [1] + [3] * (rank - 2) + [1]
    orig_output = [1] + [2] * (rank - 2) + [1]
    forward = "MaxPool" if rank == 4 else "MaxPool3D"
    return Family(
        name, ops, shape=orig_input,
        shapes={"orig_input": orig_input,
                "grad": orig_output if grad_of == "output" else orig_input},
        ints={"ksize": window, "strides": ones},
        attrs={"ksize": window, "strides": ones, "padding": "VALID"},
        inputs={"orig_output": forward_outputs(forward, ("orig_input",), (
            "T", "ksize", "strides", "padding", "data_format"))(0)},
        note="orig_output = %s(orig_input), a 2-wide window with stride 1" % forward)


def _batch_norm_grad_family(name, ops, forward, reserves):
    shape = [2, 2, 2, 2]
    def offset(builder):
        return builder.api.tf.zeros([2], dtype=builder.api.dtypes.float32)

    def empty(builder):  # no running statistics in training
        return builder.api.tf.zeros([0], dtype=builder.api.dtypes.float32)

    make = forward_outputs(forward, ("x", "scale"), ("T", "U", "epsilon", "data_format"),
                           extra=(offset, empty, empty))
    return Family(
        name, ops, shape=shape, shapes={"scale": [2]},
        attrs={"is_training": True},
        inputs=dict(("reserve_space_%d" % (k + 1), make(3 + k)) for k in range(reserves)),
        note="reserve spaces = the batch statistics %s(x, scale) computes in training"
             % forward)


_TENSOR_LIST_INTS = {"index": 1, "indices": [1, 0], "element_shape": -1, "size": 1,
                     "num_elements": -1, "lengths": [1, 1], "leading_dims": EMPTY_INT64}

FAMILIES = (
    _pool_family("max_pool_grad", r"^MaxPoolGrad(V2)?$", 4, "output"),
    _pool_family("max_pool_grad_grad", r"^MaxPoolGradGrad(V2)?$", 4, "input"),
    _pool_family("max_pool_3d_grad", r"^MaxPool3DGrad$", 5, "output"),
    _pool_family("max_pool_3d_grad_grad", r"^MaxPool3DGradGrad$", 5, "input"),
    _batch_norm_grad_family("fused_batch_norm_grad", r"^FusedBatchNormGrad$",
                            "FusedBatchNorm", 2),
    _batch_norm_grad_family("fused_batch_norm_grad_v2", r"^FusedBatchNormGradV2$",
                            "FusedBatchNormV2", 2),
    _batch_norm_grad_family("fused_batch_norm_grad_v3", r"^FusedBatchNormGradV3$",
                            "FusedBatchNormV3", 3),
    Family("fused_batch_norm", r"^FusedBatchNorm(V2|V3)?$", shape=[2, 2, 2, 2],
           shapes={"scale": [2], "offset": [2], "mean": [0], "variance": [0]},
           note="training on an NHWC batch of 2x2x2 with 2 channels, no running statistics"),
    Family("tensor_list_push_back", r"^TensorListPushBack", shapes={"tensor": [2]},
           ints=_TENSOR_LIST_INTS, variant=list_from_source, reader=stack_list,
           note="lists built by TensorListFromTensor from a source, read by TensorListStack"),
    Family("tensor_list", r"^TensorList", shapes={"tensor": [2, 2], "item": [2]},
           ints=_TENSOR_LIST_INTS, variant=list_from_source, reader=stack_list,
           note="lists built by TensorListFromTensor from a source, read by TensorListStack"),
    Family("tensor_array_write", r"^TensorArrayWriteV3$", shapes={"value": [2]},
           ints={"index": 0}, inputs={"handle": empty_tensor_array, "flow_in": tensor_array_flow},
           outputs={"flow_out": read_tensor_array_0}, control_flow_v1=True,
           note="an empty TensorArray of 2; element 0 read back by TensorArrayReadV3"),
    Family("tensor_array_scatter", r"^TensorArray(Scatter|Split)V3$",
           shapes={"value": [2, 2]}, ints={"index": 0, "indices": [0, 1], "lengths": [1, 1]},
           inputs={"handle": empty_tensor_array, "flow_in": tensor_array_flow},
           outputs={"flow_out": gather_tensor_array}, control_flow_v1=True,
           note="an empty TensorArray of 2; the array read back by TensorArrayGatherV3"),
    Family("tensor_array_read", r"^TensorArray(Read|Gather|Concat)V3$",
           ints={"index": 1, "indices": [1, 0]}, vary_all=True,
           inputs={"handle": filled_tensor_array, "flow_in": tensor_array_flow},
           control_flow_v1=True, note="a TensorArray of 2 scattered from a source"),
    Family("sparse_tensor_to_csr", r"^SparseTensorToCSRSparseMatrix$", shapes={"values": [2]},
           ints={"indices": [[0, 0], [1, 1]], "dense_shape": [2, 2]}, reader=csr_to_dense,
           note="a 2x2 sparse tensor with its diagonal stored, read back as dense"),
    Family("csr_sparse_matrix", r"SparseMatrix|CSRSparseMatrix|DenseToCSR|ToCSRSparseMatrix",
           shapes={"alpha": [], "beta": [], "values": [2]},
           ints={"indices": _ALL_2X2}, variant=csr_from_source, reader=csr_to_dense,
           note="CSR matrices from dense sources (every entry stored), read as dense"),
    Family("optional", r"^Optional(FromValue|GetValue)$", variant=optional_from_source,
           reader=optional_get_value, note="optionals holding a source, read by OptionalGetValue"),
    Family("resource", r"^(ReadVariableOp|ResourceGather)$", ints={"indices": [1, 0]},
           resource=variable_handle, note="a resource variable assigned the point"),
    Family("resource_gather_nd", r"^ResourceGatherNd$", ints={"indices": [[1], [0]]},
           resource=variable_handle, note="a resource variable assigned the point"),
    Family("reduce_bool", r"^(Any|All)$", ints={"reduction_indices": 1},
           inputs={"input": bool_from_source}, note="x > 0.5 of a 2x2 source, over axis 1"),
    Family("lookup_table", r"^LookupTable(Find|Insert|Remove|Size|Export|Import)V2$",
           types={"Tin": "DT_INT64", "Tout": "DT_FLOAT", "Tkeys": "DT_INT64",
                  "Tvalues": "DT_FLOAT"},
           shapes={"default_value": [], "values": [2]}, ints={"keys": [1, 3]},
           resource=hash_table, note="a mutable hash table from int64 to float"),
    Family("ragged_to_sparse", r"^RaggedTensorTo(Sparse|Variant)$", shapes={"rt_dense_values": [2]},
           ints={"rt_nested_splits": [0, 1, 2]}, reader=ragged_values_from_variant,
           note="two ragged levels with row splits [0, 1, 2]"),
    Family("ragged_fill_empty_rows", r"^RaggedFillEmptyRows$",
           shapes={"values": [2], "default_value": []}, ints={"value_rowids": [0, 2], "nrows": 3},
           note="rows 0 and 2 hold a value, row 1 is filled"),
    Family("block_lstm", r"^BlockLSTM(V2)?$", shapes={
        "x": [2, 1, 1], "cs_prev": [1, 1], "h_prev": [1, 1], "w": [2, 4], "wci": [1],
        "wcf": [1], "wco": [1], "b": [4]}, ints={"seq_len_max": 2},
        note="2 time steps, batch 1, 1 input, 1 unit"),
    Family("gru_block_cell", r"^GRUBlockCell$", shapes={
        "x": [1, 1], "h_prev": [1, 1], "w_ru": [2, 2], "w_c": [2, 1], "b_ru": [2], "b_c": [1]},
        note="batch 1, 1 input, 1 unit"),
    Family("ctc_loss", r"^CTCLoss(V2)?$", shapes={"inputs": [2, 1, 3]},
           ints={"labels_indices": [[0, 0]], "labels_values": [1], "sequence_length": [2]},
           note="2 time steps, batch 1, 3 classes, the label sequence [1]"),
    Family("ensure_shape", r"^EnsureShape$", attrs={"shape": ShapeAttr([2, 2])}),
    Family("batch_norm_with_global_normalization", r"^BatchNormWithGlobalNormalization$",
           shape=[1, 2, 2, 2], shapes={"m": [2], "v": [2], "beta": [2], "gamma": [2]},
           note="an NHWC batch with 2 channels, a GraphDef of the version it was removed in"),
    Family("tensor_map_insert", r"^TensorMapInsert$", shapes={"value": [2]},
           types={"key_dtype": "DT_INT32"}, ints={"key": 1}, variant=map_from_sources,
           reader=map_reader((1, 2, 3)),
           note="a map of keys 2 and 3 (values from sources); keys 1 to 3 read back"),
    Family("tensor_map_erase", r"^TensorMapErase$", types={"key_dtype": "DT_INT32"},
           ints={"key": 2}, variant=map_from_sources, reader=map_reader((3,)),
           note="a map of keys 2 and 3 (values from sources); key 3 read back"),
    Family("tensor_map_lookup", r"^TensorMapLookup$", types={"key_dtype": "DT_INT32"},
           ints={"key": 2}, variant=map_from_sources,
           note="a map of keys 2 and 3 (values from sources)"),
    Family("ref_identity", r"^RefIdentity$", ref=ref_variable,
           note="a TF1 reference variable assigned the point"),
    Family("batch_to_space", r"^BatchToSpace$", shape=[4, 1, 1, 1],
           ints={"crops": [[0, 0], [0, 0]]}, attrs={"block_size": 2}),
    Family("depth_to_space", r"^DepthToSpace$", shape=[1, 1, 1, 4], attrs={"block_size": 2}),
    Family("depthwise_backprop", r"^DepthwiseConv2dNativeBackprop(Filter|Input)$",
           shapes={"input": [1, 3, 3, 1], "filter": [2, 2, 1, 1], "out_backprop": [1, 2, 2, 1]},
           ints={"input_sizes": [1, 3, 3, 1], "filter_sizes": [2, 2, 1, 1]},
           attrs={"strides": [1, 1, 1, 1], "padding": "VALID"}),
    # every Conv2DTranspose (issue 37): NHWC, a 3x3 image, a 2x2 filter
    Family("conv2d_backprop", r"^Conv2DBackprop(Filter|Input)$",
           shapes={"input": [1, 3, 3, 1], "filter": [2, 2, 1, 1], "out_backprop": [1, 2, 2, 1]},
           ints={"input_sizes": [1, 3, 3, 1], "filter_sizes": [2, 2, 1, 1]},
           attrs={"strides": [1, 1, 1, 1], "padding": "VALID"}),
    # RandomRotation / RandomTranslation / RandomZoom in training (issue 37): an NHWC
    # image of 3x3, projective transforms near the identity
    Family("image_projective_transform", r"^ImageProjectiveTransformV[23]$",
           shapes={"images": [1, 3, 3, 1], "transforms": [1, 8], "fill_value": []},
           ints={"output_shape": [3, 3]},
           attrs={"interpolation": "BILINEAR", "fill_mode": "CONSTANT"},
           note="a 3x3 one-channel image, one random projective transform"),
    # no gradient: compiled alone (issue 37: Keras 3's dropout and random layers in
    # training draw through them); key and counter as tf.random.Generator makes them
    Family("stateless_random_v2", r"^Stateless(RandomUniform|RandomNormal|TruncatedNormal|"
           r"RandomUniformInt|RandomUniformFullInt)V2$", ints={
               "shape": [2, 2], "alg": 1, "key": [1], "counter": [0, 0], "minval": 0,
               "maxval": 5}, shapes={"minval": [], "maxval": []},
           note="shape [2, 2], the Philox algorithm"),
    Family("stateless_random_seed", r"^Stateless(RandomUniform|RandomNormal|"
           r"TruncatedNormal|RandomUniformInt|RandomUniformFullInt|RandomGetKeyCounter)$",
           ints={"shape": [2, 2], "seed": [1, 2]}, shapes={"minval": [], "maxval": []},
           note="shape [2, 2], seed [1, 2]"),
    # no gradient: compiled alone (issue 37: every one-hot label)
    Family("one_hot", r"^OneHot$", shapes={"on_value": [], "off_value": []},
           ints={"indices": [0, 2], "depth": 3}, note="indices [0, 2], depth 3"),
    Family("conv3d_backprop_v2", r"^Conv3DBackprop(Filter|Input)V2$",
           shapes={"input": [1, 2, 2, 2, 1], "filter": [1, 1, 1, 1, 1],
                   "out_backprop": [1, 2, 2, 2, 1]},
           ints={"input_sizes": [1, 2, 2, 2, 1], "filter_sizes": [1, 1, 1, 1, 1]},
           attrs={"strides": [1, 1, 1, 1, 1], "padding": "VALID", "data_format": "NDHWC"}),
    Family("tridiagonal_matmul", r"^TridiagonalMatMul$",
           shapes={"superdiag": [1, 2], "maindiag": [1, 2], "subdiag": [1, 2], "rhs": [2, 2]}),
    Family("tridiagonal_solve", r"^TridiagonalSolve$", shapes={"diagonals": [3, 2], "rhs": [2, 2]},
           note="diagonals [3, 2] (superdiagonal, diagonal, subdiagonal)"),
    Family("strided_slice_grad", r"^(StridedSliceGrad|TensorStridedSliceUpdate)$",
           shapes={"dy": [1, 2], "input": [2, 2], "value": [1, 2]},
           ints={"shape": [2, 2], "begin": [0, 0], "end": [1, 2], "strides": [1, 1]}),
    Family("split_v", r"^SplitV$", ints={"size_splits": [1, 1], "split_dim": 0}),
    Family("quantize_and_dequantize_v3", r"^QuantizeAndDequantizeV3$",
           shapes={"input_min": [], "input_max": []}, ints={"num_bits": 8}),
    Family("polygamma", r"^Polygamma$", fixed={"a": 1.0}, note="order a = 1"),
    # no gradient: compiled alone with XLA (issue 25), from a range TF accepts
    Family("range", r"^Range$", shape=[], fixed={"start": 0.0, "limit": 4.0, "delta": 1.0},
           note="range(0, 4, 1)"),
)

# Ops compared no further, and why (each reason is what probe-report shows).
UNVERIFIABLE = (
    (re.compile(r"^(Switch|Merge|Enter|RefSwitch|RefMerge|RefEnter|RefNextIteration)$"),
     "TF1 control-flow primitive: its gradient is defined only inside the cond or while "
     "context tf.cond / tf.while_loop build around it"),
    (re.compile(r"^XlaSpmd(FullToShard|ShardToFull)Shape$"),
     "XLA SPMD partitioning marker: it runs only inside an XLA computation with a manual "
     "sharding"),
    (re.compile(r"^CompositeTensorVariant(From|To)Components$"),
     "needs the serialised TypeSpec of an ExtensionType (its metadata attribute): no "
     "generator"),
    (re.compile(r"^Stateless(RandomGamma|ParameterizedTruncatedNormal)"),
     "sampler whose gradient is the implicit reparameterisation (right in distribution), "
     "not the derivative of the sampled values at a fixed seed"),
)


def family_for(op_name):
    for family in FAMILIES:
        if family.ops.search(op_name):
            return family
    return None


def family_named(name):
    for family in FAMILIES:
        if family.name == name:
            return family
    return None


def unverifiable(op_name):
    for pattern, reason in UNVERIFIABLE:
        if pattern.search(op_name):
            return reason
    return None
