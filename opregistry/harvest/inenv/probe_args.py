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
that fit them, and which generator builds an argument or reader reads an output; the
families themselves, and the reason-only entries (``UNVERIFIABLE``) that say why an op
is not compared at all, are in ``probe_families``.
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

ALL_2X2 = [[0, 0], [0, 1], [1, 0], [1, 1]]


def csr_from_source(builder):
    from tensorflow.python.ops.linalg.sparse import sparse_csr_matrix_ops as csr
    dense = builder.source([2, 2], "dense%d" % builder.position)
    indices = builder.api.tf.constant(ALL_2X2, dtype=builder.api.dtypes.int64)
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
