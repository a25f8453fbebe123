"""The ops a public Python name's usual call builds, where the harvest cannot tell them
from the function's code (which records every op the code can reach, in whatever
release): the op that decides the call's gradient (or does its work) first.

Checked against what TensorFlow traces: the names users write for them by hand
(tests/test_python_name_calls.py), and every name of the installed release that can
be called with generated arguments (tests/test_python_name_traces.py).
"""
from __future__ import annotations

CALLS: dict[str, tuple[str, ...]] = {}


def _calls(names: str, *ops: str) -> None:
    for name in names.split():
        CALLS[name] = ops


# tf.where(c, x, y) (the form on a gradient path); tf.where(c) alone is Where
_calls("tf.where tf.compat.v1.where_v2", "SelectV2", "Where")
_calls("tf.compat.v1.where", "Select", "Where")
# method="bilinear" by default; area, bicubic, nearest... only when asked
_calls("tf.image.resize", "ResizeBilinear", "ResizeArea", "ResizeBicubic",
       "ResizeNearestNeighbor", "ScaleAndTranslate")
_calls("tf.compat.v1.image.resize tf.image.resize_images", "ResizeBilinear", "ResizeArea",
       "ResizeBicubic", "ResizeNearestNeighbor")
# sorted by top_k over the whole last axis (ascending: of -x)
_calls("tf.sort tf.argsort tf.experimental.numpy.sort tf.experimental.numpy.argsort",
       "TopKV2")
# side="left" by default: LowerBound; side="right": UpperBound
_calls("tf.searchsorted", "LowerBound", "UpperBound")
# DenseBincount (the code also reaches Bincount, and Cast before it: not the count)
_calls("tf.math.bincount tf.compat.v1.bincount", "DenseBincount", "Bincount")
_calls("tf.ragged.segment_ids_to_row_splits", "DenseBincount", "Cumsum", "Bincount")
# TF 2's extract_glimpse is V2 (tf.compat.v1.image.extract_glimpse: ExtractGlimpse)
_calls("tf.image.extract_glimpse", "ExtractGlimpseV2", "ExtractGlimpse")
_calls("tf.compat.v1.image.extract_glimpse", "ExtractGlimpse")
# composites whose code the harvest sees reach MatrixBandPart alone: the solve
# (lu_solve), the product (lu_reconstruct), the Cholesky solve (lstsq, fast=True)
_calls("tf.linalg.lu_solve", "MatrixTriangularSolve")
_calls("tf.linalg.lu_reconstruct", "MatMul")
_calls("tf.linalg.lstsq tf.compat.v1.matrix_solve_ls", "Cholesky", "MatrixSolveLs")
# TF 2 adds with AddV2 and divides floats with RealDiv (the code also reaches Add, Cast)
_calls("tf.add tf.math.add", "AddV2", "Add")
_calls("tf.truediv tf.math.truediv tf.experimental.numpy.divide", "RealDiv")
_calls("tf.compat.v1.div", "RealDiv", "FloorDiv")

# the rest: what TF traces for each call, where the harvest's ops are another
# release's (Svd for tf.norm, whose default is the Euclidean norm) or the function's
# helpers (Maximum, Pad for tf.signal.rfft, whose work is RFFT)
_calls("tf.norm tf.linalg.norm", "Sqrt", "Sum", "Mul", "Svd")
_calls("tf.linalg.normalize", "RealDiv", "Sqrt", "Sum", "Mul")
_calls("tf.linalg.pinv", "Svd", "MatMul")
_calls("tf.linalg.matvec", "BatchMatMulV2", "MatMul", "BatchMatMulV3")
_calls("tf.linalg.adjoint tf.linalg.matrix_transpose tf.linalg.transpose "
       "tf.compat.v1.matrix_transpose tf.image.transpose tf.compat.v1.image.transpose_image",
       "Transpose", "ConjugateTranspose")
_calls("tf.signal.rfft tf.compat.v1.spectral.rfft", "RFFT")
_calls("tf.signal.rfft2d tf.compat.v1.spectral.rfft2d", "RFFT2D")
_calls("tf.signal.rfft3d tf.compat.v1.spectral.rfft3d", "RFFT3D")
_calls("tf.signal.irfft tf.compat.v1.spectral.irfft", "IRFFT")
_calls("tf.signal.irfft2d tf.compat.v1.spectral.irfft2d", "IRFFT2D")
_calls("tf.signal.irfft3d tf.compat.v1.spectral.irfft3d", "IRFFT3D")
_calls("tf.signal.rfftnd", "RFFTND")
_calls("tf.signal.irfftnd", "IRFFTND")
_calls("tf.signal.fftnd", "FFTND")
_calls("tf.signal.ifftnd", "IFFTND")
_calls("tf.math.reduce_logsumexp tf.reduce_logsumexp", "Log", "Exp", "Sum", "Max",
       "StopGradient")
_calls("tf.nn.moments", "Mean", "SquaredDifference", "StopGradient")
_calls("tf.nn.sufficient_statistics", "Sum", "Square")
# the kept units through SelectV2 (TF 1: multiplied by floor(keep_prob + uniform))
_calls("tf.nn.dropout", "SelectV2", "Mul", "RandomUniform", "GreaterEqual", "Floor")
# approximate=False: erfc (TF 2.4 and before: erf); approximate=True: tanh
_calls("tf.nn.gelu", "Erfc", "Erf", "Tanh")
_calls("tf.nn.embedding_lookup", "GatherV2", "DynamicPartition")
_calls("tf.nn.ctc_unique_labels", "Unique", "Pad")
_calls("tf.math.zero_fraction tf.nn.zero_fraction", "NotEqual", "Sum")
_calls("tf.math.confusion_matrix", "ScatterNd")
_calls("tf.math.is_non_decreasing", "GreaterEqual", "All")
_calls("tf.math.is_strictly_increasing", "Greater", "All")
_calls("tf.assert_equal tf.debugging.assert_equal", "Equal", "Assert", "All")
_calls("tf.__internal__.ops.broadcast_weights", "Mul")
_calls("tf.image.adjust_gamma", "Pow", "Mul")
_calls("tf.image.central_crop", "Slice")
_calls("tf.image.convert_image_dtype", "Cast", "Mul")
_calls("tf.image.image_gradients", "Sub")
_calls("tf.image.per_image_standardization", "RealDiv", "Mean", "Sqrt", "Maximum", "Relu")
_calls("tf.image.rgb_to_grayscale tf.image.rgb_to_yiq tf.image.rgb_to_yuv "
       "tf.image.yiq_to_rgb tf.image.yuv_to_rgb", "MatMul")
_calls("tf.image.rot90 tf.experimental.numpy.rot90", "ReverseV2", "Transpose")
_calls("tf.image.random_flip_left_right tf.image.random_flip_up_down", "ReverseV2",
       "RandomUniform")
_calls("tf.image.random_crop tf.compat.v1.random_crop", "Slice", "RandomUniformInt")
_calls("tf.image.stateless_random_crop", "Slice", "StatelessRandomUniformIntV2")
# int input (the ops' only use: images are sorted by score) after TF 2.3; V4 before
_calls("tf.image.non_max_suppression_padded", "TopKV2", "NonMaxSuppressionV4")
_calls("tf.random.stateless_uniform", "StatelessRandomUniformV2",
       "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2",
       "StatelessRandomGetKeyCounter", "StatelessRandomUniform")
_calls("tf.random.experimental.stateless_split tf.random.split", "StatelessRandomUniformFullIntV2",
       "StatelessRandomGetKeyCounter", "StatelessRandomUniformFullInt")
_calls("tf.compat.v1.ones_like", "Fill", "OnesLike")
# TF 1's streaming metrics (counted in variables; the value is a ratio or a sum)
_calls("tf.compat.v1.metrics.precision tf.compat.v1.metrics.recall "
       "tf.compat.v1.metrics.auc", "RealDiv", "Sum")
_calls("tf.compat.v1.metrics.root_mean_squared_error", "Sqrt", "DivNoNan")
_calls("tf.compat.v1.metrics.true_positives tf.compat.v1.metrics.true_negatives "
       "tf.compat.v1.metrics.false_positives tf.compat.v1.metrics.false_negatives",
       "Sum", "LogicalAnd")
# mode="CONSTANT" with 0: Pad (another constant: PadV2; REFLECT, SYMMETRIC: MirrorPad)
_calls("tf.pad", "Pad", "PadV2", "MirrorPad")
# pools of any rank: a 4-D input (an image batch) is MaxPool
_calls("tf.nn.max_pool tf.compat.v1.nn.max_pool_v2", "MaxPool", "MaxPool3D")
_calls("tf.compat.v1.nn.relu_layer", "Relu", "MatMul", "BiasAdd")
_calls("tf.compat.v1.nn.xw_plus_b", "BiasAdd", "MatMul")
_calls("tf.nn.nce_loss", "MatMul", "LogUniformCandidateSampler", "SparseToDense")
_calls("tf.image.psnr", "Log", "Mean", "SquaredDifference")
_calls("tf.ragged.boolean_mask", "GatherV2", "Where")
_calls("tf.repeat tf.experimental.numpy.repeat", "Tile")
_calls("tf.signal.frame", "GatherV2")
_calls("tf.signal.overlap_and_add", "Pad", "Sum")
_calls("tf.signal.kaiser_window tf.signal.kaiser_bessel_derived_window", "BesselI0e",
       "Sqrt")
# tf.experimental.numpy: written in TF ops (the harvest reaches their helpers)
_calls("tf.experimental.numpy.average", "Mean")
_calls("tf.experimental.numpy.compress", "GatherV2", "Where")
_calls("tf.experimental.numpy.diag", "MatrixDiagPartV3", "MatrixDiagV3")
_calls("tf.experimental.numpy.diagflat", "MatrixDiagV3")
_calls("tf.experimental.numpy.diagonal", "MatrixDiagPartV3")
_calls("tf.experimental.numpy.diag_indices", "Range")
_calls("tf.experimental.numpy.dot tf.experimental.numpy.inner tf.experimental.numpy.vdot "
       "tf.experimental.numpy.tensordot", "MatMul")
_calls("tf.experimental.numpy.flatten tf.experimental.numpy.ravel", "Reshape")
_calls("tf.experimental.numpy.hypot", "Sqrt", "Square", "AddV2")
_calls("tf.experimental.numpy.iscomplex", "NotEqual", "Imag")
_calls("tf.experimental.numpy.isreal", "Equal", "Imag")
_calls("tf.experimental.numpy.kron", "Mul")
_calls("tf.experimental.numpy.max", "Max")
_calls("tf.experimental.numpy.nanmean", "RealDiv", "Sum", "IsNan", "SelectV2")
_calls("tf.experimental.numpy.nonzero", "Where")
_calls("tf.experimental.numpy.signbit", "Less")
_calls("tf.experimental.numpy.size", "Size")
_calls("tf.experimental.numpy.take tf.experimental.numpy.take_along_axis", "GatherV2")
_calls("tf.experimental.numpy.var", "Mean", "Square", "Sub")
_calls("tf.experimental.numpy.dstack", "ConcatV2")
_calls("tf.experimental.numpy.stack", "Pack")
_calls("tf.experimental.numpy.random.randint", "RandomUniformInt")

# TF 2's variables are resource variables, also under tf.compat.v1 (ref variables'
# ops only in TF 1's graph mode)
for _op in ("Add", "Div", "Max", "Min", "Mul", "Sub", "Update"):
    _calls(f"tf.compat.v1.scatter_{_op.lower()}", f"ResourceScatter{_op}", f"Scatter{_op}")
for _op in ("Add", "Sub", "Update"):
    _calls(f"tf.compat.v1.scatter_nd_{_op.lower()}", f"ResourceScatterNd{_op}",
           f"ScatterNd{_op}")
_calls("tf.compat.v1.assign", "AssignVariableOp", "Assign")
_calls("tf.compat.v1.assign_add", "AssignAddVariableOp", "AssignAdd")
_calls("tf.compat.v1.assign_sub", "AssignSubVariableOp", "AssignSub")
# TF 2's cond is If (StatelessIf where no branch has a stateful op); accumulate_n adds
# with add_n since TF 2.1 (the harvest still reaches AccumulateNV2)
_calls("tf.cond tf.compat.v1.cond tf.__internal__.smart_cond.smart_cond", "StatelessIf",
       "If")
_calls("tf.math.accumulate_n tf.compat.v1.accumulate_n tf.compat.v1.math.accumulate_n",
       "AddN", "AccumulateNV2")
# a Python pattern (the usual call) is compiled once: the Static ops
_calls("tf.strings.regex_replace tf.compat.v1.regex_replace", "StaticRegexReplace",
       "RegexReplace")
_calls("tf.strings.regex_full_match", "StaticRegexFullMatch", "RegexFullMatch")
_calls("tf.strings.unicode_split_with_offsets", "UnicodeDecodeWithOffsets")
# linspace is written in TF ops since TF 2.3 (LinSpace before)
_calls("tf.linspace tf.compat.v1.lin_space tf.experimental.numpy.linspace", "Mul",
       "AddV2", "Range", "LinSpace")
_calls("tf.experimental.numpy.logspace", "Pow", "Mul", "AddV2", "Range")
_calls("tf.image.crop_to_bounding_box", "Slice")
_calls("tf.image.pad_to_bounding_box", "Pad")
_calls("tf.image.resize_with_crop_or_pad tf.compat.v1.image.resize_image_with_crop_or_pad",
       "Slice", "Pad")
_calls("tf.signal.stft", "RFFT", "GatherV2")
_calls("tf.nn.sampled_softmax_loss", "SoftmaxCrossEntropyWithLogits", "MatMul",
       "LogUniformCandidateSampler", "ComputeAccidentalHits")
_calls("tf.compat.v1.metrics.precision_at_thresholds "
       "tf.compat.v1.metrics.recall_at_thresholds", "RealDiv", "Sum")

_calls("tf.tensordot tf.linalg.tensordot", "MatMul")
_calls("tf.math.polyval", "Mul", "AddV2")
_calls("tf.image.ssim tf.image.ssim_multiscale", "DepthwiseConv2dNative", "Mean")
# TF 2 parses one example as a batch of one
_calls("tf.io.parse_single_example tf.compat.v1.parse_single_example", "ParseExampleV2",
       "ParseSingleExample")

# TF 2's case is nested conds (their branches assert: If)
_calls("tf.case tf.compat.v1.case", "If", "StatelessIf")
# pooling_type="MAX" or "AVG", of any rank: a 4-D input (an image batch) is MaxPool
_calls("tf.nn.pool", "MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D")

# stateful=True by default: PyFunc (PyFuncStateless only when asked)
_calls("tf.numpy_function", "PyFunc", "PyFuncStateless")

# names whose call with generated arguments (the required ones only) builds another
# form than the usual one: the trace does not reorder their ops. tf.where(c) alone is
# Where; tf.where(c, x, y), the form on a gradient path, SelectV2 (Select in TF 1's)
GENERATED_CALL_DIFFERS = frozenset({"tf.where", "tf.compat.v1.where_v2",
                                    "tf.compat.v1.where"})

# what every public name with a call of its own leads to (read-only from here on)
DEFAULT_CALLS: dict[str, tuple[str, ...]] = CALLS
_COMPAT = ("tf.compat.v1.", "tf.compat.v2.")


def default_call(name: str) -> tuple[str, ...]:
    """The ops ``name``'s usual call builds, where the harvest cannot tell; () where
    it can. A ``tf.compat.v1.`` name without an entry of its own is its TF 2 name's
    (``tf.compat.v1.norm`` builds what ``tf.norm`` builds)."""
    if name in CALLS:
        return CALLS[name]
    for prefix in _COMPAT:
        if name.startswith(prefix):
            return CALLS.get("tf." + name[len(prefix):], ())
    return ()
