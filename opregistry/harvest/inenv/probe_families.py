"""The argument families of the numerical check: which ops each covers, the shapes,
integer values and attributes that fit them, and the generators (``probe_args``) that
build an argument or read an output; ``UNVERIFIABLE`` says why an op is not compared.

In-environment code (see ``__init__.py``): standard library, TensorFlow and numpy
only, Python 3.7+, TF 1.13+, graph mode.
"""
from __future__ import print_function

import re

from .probe_args import (
    ALL_2X2,
    EMPTY_INT64,
    Family,
    ShapeAttr,
    bool_from_source,
    csr_from_source,
    csr_to_dense,
    empty_tensor_array,
    filled_tensor_array,
    forward_outputs,
    gather_tensor_array,
    hash_table,
    list_from_source,
    map_from_sources,
    map_reader,
    optional_from_source,
    optional_get_value,
    ragged_values_from_variant,
    read_tensor_array_0,
    ref_variable,
    stack_list,
    tensor_array_flow,
    variable_handle,
)

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
           ints={"indices": ALL_2X2}, variant=csr_from_source, reader=csr_to_dense,
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
