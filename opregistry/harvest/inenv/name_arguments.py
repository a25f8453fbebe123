"""Arguments for public TensorFlow functions, generated from their parameters' names
(for ``name_traces``, in its own process: the generators need TensorFlow).

In-environment code (see ``__init__.py``): standard library only at import, Python 3.7+.

A call is tried in families of shapes and dtypes (:func:`families`); each parameter
gets the argument its name asks for in that family (:func:`argument`): a placeholder
of the family's shape and dtype for the tensors a function works on, the sizes, axes,
windows and scalars that fit that shape, and the few structured arguments TF's
functions take (a sparse tensor, a resource variable, a string, a callable, labels of
logits, sampled classes). Sizes and scalars come from the caller's seeded
``random.Random``.
"""
from __future__ import annotations

import contextlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

FLOATS = {"x", "y", "input", "a", "b", "tensor", "data", "inputs", "value", "values",
          "labels", "predictions", "features", "input_tensor", "x1", "x2", "logits",
          "params", "weights", "t", "z", "signal", "y_true", "y_pred", "matrix", "rhs",
          "diagonal", "bias", "scores", "v", "input_", "image", "images", "chol",
          "lower_upper", "lhs", "grad", "dy", "arr", "embeddings", "coeffs", "dividend",
          "divisor", "u", "w", "m", "x_in", "x_or_y", "target", "targets", "condition",
          "other", "stfts", "mdcts", "log_mel_spectrograms", "bands", "array", "starts",
          "limits", "splits", "multi_class_labels", "onehot_labels", "losses", "a1", "a2"}
LISTS = {"tensors", "elems", "xs", "input_list", "inputs_list", "arys"}
INTS = {"k": 2, "num": 2, "n": 2, "depth": 3, "num_segments": 3, "num_classes": 3,
        "num_or_size_splits": 2, "max_output_size": 2, "nbins": 4, "num_true": 1,
        "num_sampled": 2, "range_max": 4, "block_size": 2, "axis": -1, "dim": -1}
SCALARS = {"delta", "max_delta", "contrast_factor", "saturation_factor", "alpha", "rate",
           "epsilon", "gamma", "clip_norm", "lower", "upper", "stddev", "mean",
           "threshold", "minval", "maxval", "clip_value_min", "clip_value_max", "beta",
           "fraction", "central_fraction", "scale", "offset", "momentum", "decay",
           "keep_prob", "lam", "temperature", "l2", "l1"}
# parameters holding a string (file contents, serialized protos, text) and what the
# Python-side ones are: a pattern, an encoding, a message
STRINGS = {"contents", "bytes", "filename", "json_examples", "serialized", "records",
           "serialized_sparse", "string_tensor", "source", "input_bytes"}
PYTHON_STRINGS = {"pattern": "a+", "rewrite": "b", "input_encoding": "UTF-8",
                  "output_encoding": "UTF-8", "message": "m", "equation": "ij,jk->ik",
                  "template": "{}"}
# more sizes, by name: windows, offsets, bins, quantization
MORE_INTS = {"num_lower": 1, "num_upper": 1, "num_partitions": 2, "offset_height": 0,
             "offset_width": 0, "min_jpeg_quality": 50, "max_jpeg_quality": 90,
             "pos": 0, "len": 1, "indices_or_sections": 1, "limit": 3,
             "max_index": 4, "stride": 1, "ngram_width": 2, "N": 2, "seq_axis": 1,
             "batch_axis": 0, "axis1": 0, "axis2": -1}
MORE_SCALARS = {"scalar": 2.0, "input_min": 0.0, "input_max": 1.0, "probs": 0.5,
                "stop": 2.0, "start": 0.5, "variance_epsilon": 0.001, "pos_weight": 2.0,
                "fill_value": 2.0}


RNN_CELLS = frozenset({"cell", "cell_fw", "cell_bw"})


class RnnCell:
    """The least TF's RNN functions take for a cell (``assert_like_rnncell``: its sizes,
    a zero state, a call): two units, ``h' = tanh(x W + h U)``, its weights constants of
    the inputs' dtype (a trace creates no variable). Its ops are the user's (recorded)."""

    state_size = output_size = 2

    def __init__(self, tf: Any, call: Call):
        self.tf, self.call = tf, call

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        with recorded(self.tf, self.call):
            return self.tf.zeros([batch_size, self.state_size], dtype)

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> Any:
        tf = self.tf
        with recorded(tf, self.call):
            depth = int(inputs.shape[-1])  # TF 1: a Dimension
            w = tf.fill([depth, self.state_size], tf.cast(0.5, inputs.dtype))
            u = tf.fill([self.state_size, self.state_size], tf.cast(0.25, inputs.dtype))
            new = tf.tanh(tf.matmul(inputs, w) + tf.matmul(state, u))
            return new, new


class NoArgument(Exception):
    """A parameter no generator makes: no family will do."""


@dataclass(frozen=True)
class Family:
    """The shape and dtype of a call's main tensors."""

    name: str
    dtype: Any
    shape: list[Any]


def families(tf: Any, rng: random.Random, name: str) -> list[Family]:
    """The families a call is tried in, in order (the first seven are the ones the
    test began with: a name they call keeps its trace; the rest are for the names they
    do not: booleans, strings, encoded images, sequences, volumes, scalars, lists of
    tensors, integer labels of float logits, images of one, four channels or 16 pixels,
    quantized integers)."""
    n = rng.randint(3, 5)
    first = [Family("complex", tf.complex64, [n, n])] if name.rsplit(".", 1)[-1] in {
        "angle"} else []  # on a real input TF builds a sign test instead of the op
    return first + [
        Family("square", tf.float32, [n, n]), Family("image", tf.float32, [2, 2 * n, 2 * n, 3]),
        Family("vector", tf.float32, [2 * n]), Family("complex", tf.complex64, [n, n]),
        Family("int", tf.int32, [n, n]), Family("unknown_batch", tf.float32, [None, n]),
        Family("complex_image", tf.complex64, [2, 2 * n, 2 * n, 3]),
        Family("bool", tf.bool, [n, n]), Family("string", tf.string, [n]),
        Family("uint8_image", tf.uint8, [2 * n, 2 * n, 3]),
        Family("sequence", tf.float32, [n, 2, n]),
        Family("volume", tf.float32, [2, n + 1, n + 1, n + 1, 3]),
        Family("scalar", tf.float32, []), Family("int_vector", tf.int32, [2 * n]),
        Family("list", tf.float32, [n, n]), Family("sparse_labels", tf.float32, [n, n]),
        Family("gray_image", tf.float32, [2, 2 * n, 2 * n, 1]),
        Family("deep_image", tf.float32, [2, n + 1, n + 1, 4]),
        Family("large_image", tf.float32, [1, 16, 16, 3]),
        Family("quantized", tf.quint8, [n, n]), Family("string_list", tf.string, [n])]


@dataclass(frozen=True)
class Call:
    """What a parameter's argument depends on besides the family: the function's name,
    the parameters it is given, and those its docstring says are lists or sparse."""

    function: str
    params: frozenset[str]
    lists: frozenset[str] = frozenset()
    sparse: frozenset[str] = frozenset()
    # the op types the generated callables (a loop's body, a map's fn, an RNN cell...)
    # built, per type: the user's ops, not the function's (``name_traces`` leaves them out)
    inside: Counter = field(default_factory=Counter, compare=False)


@contextlib.contextmanager
def recorded(tf: Any, call: Call) -> Iterator[None]:
    """Count the ops built in the block (in the graph it runs in: a body's own graph)
    as the generated callables' (``Call.inside``)."""
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    try:
        yield
    finally:
        call.inside.update(op.type for op in graph.get_operations()[before:])


def callable_of(tf: Any, call: Call, body: Any) -> Any:
    """``body`` as a generated callable whose ops are recorded as the user's; its
    signature stays ``(*args)``, as TF's callers inspect it."""
    def user(*args):
        with recorded(tf, call):
            return body(*args)
    return user


def described(doc: str) -> tuple[frozenset[str], frozenset[str]]:
    """The parameters a TF docstring's ``Args:`` describes as lists of tensors, and as
    sparse tensors only (``coeffs: A list of `Tensor```, ``a: `SparseTensor```; not
    ``a: `Tensor` or `SparseTensor```, whose usual call is dense)."""
    lists, sparse = set(), set()
    for param, text in re.findall(r"^\s+(\w+): (.*)$", doc, re.MULTILINE):
        head = text.lower()
        if head.startswith(("a list of", "list of", "a python list of")):
            lists.add(param)
        elif re.match(r"(an? )?(input )?`?(tf\.)?(sparse\.)?sparsetensor`?[ .,]", head) and (
                " or " not in head.split(".")[0]):
            sparse.add(param)
    return frozenset(lists), frozenset(sparse)


def argument(tf: Any, name: str, family: Family, rng: random.Random, call: Call) -> Any:
    """The argument for a parameter called ``name`` in one family (placeholders for
    tensors: what a model's traced function holds)."""
    dtype, shape = family.dtype, family.shape

    def placeholder(s: list[Any] = shape, d: Any = dtype) -> Any:
        return tf.compat.v1.placeholder(d, s)
    rows = shape[0] if shape and shape[0] is not None else 3
    params = call.params
    if name in call.sparse and dtype != tf.string:
        return structured(tf, "sp_input", family, call, placeholder)
    if family.name in ("list", "string_list") and name in call.lists:
        return [placeholder(), placeholder()]
    if name in ("bias", "upper", "size", "perm", "axes", "filters", "output_shape", "min",
                "max", "kernel", "axis"):
        special = shaped(tf, name, family, rng, call, placeholder)
        if special is not None:
            return special
    if name == "features" and "serialized" in params:  # parse_example's
        return {"f": tf.io.FixedLenFeature([], tf.float32)}
    if family.name == "sparse_labels" and name in ("labels", "targets"):
        return placeholder([rows], tf.int64 if "num_sampled" in params else tf.int32)
    if family.name == "list" and name in ("inputs", "values", "tensors"):
        return [placeholder(), placeholder()]
    if "num_sampled" in params and name == "labels":
        return placeholder([rows, 1], tf.int64)  # sampled softmax: [batch, num_true]
    if "updates" in params and name == "indices":  # rows of the tensor, one per update
        return placeholder([rows, 1], tf.int32)
    if name in FLOATS:
        return placeholder()
    if name in LISTS:
        return [placeholder(), placeholder()]
    if name in INTS:
        return INTS[name]
    if name in SCALARS:
        return round(rng.uniform(0.1, 0.9), 2)
    if name == "axes":
        return [len(shape) - 1]
    if name in ("indices", "ids", "segment_ids"):  # sorted, in range of any axis
        return tf.constant(sorted(rng.randint(0, 1) for _ in range(rows)))
    if name in ("shape", "size", "output_shape", "dims", "end"):
        return [d or 2 for d in shape]
    if name == "multiples":
        return [2] * len(shape)
    if name == "perm":
        return list(reversed(range(len(shape))))
    if name == "dtype" and params & RNN_CELLS:  # an RNN's state: the inputs' own dtype
        return dtype
    if name in ("dtype", "out_type"):  # another dtype than the input's: a real cast
        return tf.int32 if dtype.is_floating or dtype.is_complex else tf.float32
    if name == "seed":  # a stateless op's pair (and fold_in's, split's); else an int
        pair = (rng.randint(0, 99), rng.randint(0, 99))
        stateless = "stateless" in call.function or call.function.endswith(
            ("fold_in", "random.split"))
        return pair if stateless else pair[0]
    if name in ("fn", "func"):  # map_fn's and foldl's over a list: each element's double
        return callable_of(tf, call, lambda *args: (
            [a * 2 for a in args[0]] if isinstance(args[0], (list, tuple)) else args[0] * 2))
    if name == "boxes":
        return tf.compat.v1.placeholder(tf.float32, [rows, 4])
    rank = len(shape)
    if name in ("ksize", "strides", "dilations"):  # a 2x2 window over an image batch
        if name == "ksize" and rank in (3, 5):  # a sequence's or a volume's
            return [1] + [2] * (rank - 2) + [1]
        return [1, 2, 2, 1] if rank == 4 and name == "ksize" else [1] * rank
    if name == "padding":
        return "SAME"
    if name in ("filters", "filter"):  # 3x3, the input's channels to two
        window = [3] * (rank - 2) if rank in (3, 5) else [3, 3]
        return tf.compat.v1.placeholder(dtype, [*window, shape[-1], 2])
    if name in ("bias", "biases", "real", "imag", "img1", "img2", "sorted_sequence"):
        return placeholder([shape[-1]] if name.startswith("bias") else shape)
    if name == "mask":
        return tf.compat.v1.placeholder(tf.bool, shape)
    if name in ("t_list", "tup", "arrays"):
        return [placeholder(), placeholder()]
    if name in ("fft_length", "reps"):
        return [shape[-1]] if name == "fft_length" else [2] * rank
    if name in ("frame_length", "window_length", "num_rows", "num_samples", "num_buckets",
                "repeats", "shift", "frame_step"):
        return 2
    if name == "paddings" and "block_shape" in params:  # space_to_batch: none
        return [[0, 0]] * (rank - 2)
    if name in ("begin", "paddings"):
        return [0] * rank if name == "begin" else [[1, 1]] * rank
    if name in ("max_val", "a_min", "a_max", "p", "low", "min", "max", "min_range",
                "max_range"):
        return round(rng.uniform(0.1, 0.9), 2) + (0.0 if name.startswith(("min", "a_min"))
                                                   else 1.0)
    return structured(tf, name, family, call, placeholder)


def shaped(tf: Any, name: str, family: Family, rng: random.Random, call: Call,
           placeholder: Any) -> Any:
    """Arguments whose shape another parameter decides (None: the usual one): a bias of
    the channels (or a quantization's range per channel), an image's new height and
    width, an LU factorization's permutation, a transposed convolution's filters and
    output, an upper bound above the lower."""
    shape, function, params = family.shape, call.function, call.params
    if name == "bias" and "value" in params:  # bias_add(value, bias): the channels
        return placeholder([shape[-1]])
    if name in ("min", "max") and "per_channel" in function:  # fake_quant: per channel
        return placeholder([shape[-1]])
    if name == "upper" and "lower" in params:  # random_contrast: lower < upper
        return round(rng.uniform(1.1, 1.9), 2)
    if name == "size" and len(shape) == 4 and params & {"images", "image", "offsets"}:
        return [d + 1 for d in shape[1:3]]  # resize: the new height and width
    if name == "perm" and "lower_upper" in params:  # lu: the rows' permutation
        return placeholder([shape[-1]], tf.int32)
    if name == "axes" and {"a", "b"} <= params:  # tensordot: the contracted axes' count
        return 1
    if name == "axis" and function.rsplit(".", 1)[-1] in ("reverse", "reverse_v2"):
        return [-1]  # the axes to reverse: a list
    if name in ("filters", "kernel") and ("dilation2d" in function or "erosion2d" in function):
        return placeholder([2, 2, shape[-1]])  # morphological: [height, width, depth]
    transposed = "transpose" in function and "conv" in function
    if name == "filters" and transposed and len(shape) >= 3:  # [window, out, in]
        return placeholder([*[3] * (len(shape) - 2), 2, shape[-1]])
    if name == "output_shape" and transposed:
        return [d or 2 for d in shape[:-1]] + [2]
    return None


def structured(tf: Any, name: str, family: Family, call: Call, placeholder: Any) -> Any:
    """The arguments that are not one tensor of the family: sparse tensors, variables,
    strings, sampled classes, windows of a convolution's gradient, callables."""
    dtype, shape = family.dtype, family.shape
    rank, rows = len(shape), shape[0] if shape and shape[0] is not None else 3
    function, params = call.function, call.params
    if name in ("sp_input", "sp_a", "sp_b", "sp_ids", "sp_weights", "sp_inputs"):
        sparse = [tf.sparse.SparseTensor(placeholder([None, rank], tf.int64),
                                         placeholder([None]),
                                         tf.constant([d or 2 for d in shape], tf.int64))
                  for _ in range(2 if name == "sp_inputs" else 1)]
        return sparse if name == "sp_inputs" else sparse[0]
    if name == "ref":  # a variable as the release makes it (TF 1: a reference variable)
        return tf.Variable(lambda: tf.zeros([d or 2 for d in shape], dtype))
    if name in ("updates", "gradients", "operand", "val", "ary", "q", "counts",
                "mean_ss", "variance_ss", "signals"):
        return placeholder()
    if name == "serialized_sparse":  # a batch of serialized sparse tensors: [N, 3]
        return placeholder([rows, 3], tf.string)
    if name in STRINGS:
        single = name in ("contents", "bytes", "filename") or "single" in function
        return placeholder([] if single else [rows], tf.string)
    if name == "context_features":
        return {"f": tf.io.FixedLenFeature([], tf.float32)}
    if name in PYTHON_STRINGS:
        return PYTHON_STRINGS[name]
    if name in ("start", "size") and "sp_input" in params:  # sparse.slice: int64 corners
        return [0] * rank if name == "start" else [d or 2 for d in shape]
    if name in MORE_INTS:
        return MORE_INTS[name]
    if name in MORE_SCALARS:
        return MORE_SCALARS[name]
    if name in ("true_classes", "sampled_candidates"):
        return placeholder([rows, 1] if name == "true_classes" else [2], tf.int64)
    if name == "unique":
        return True
    if name in ("target_height", "target_width"):  # the image's own size: fits both
        return shape[1 if name == "target_height" else 2] if rank == 4 else 2
    if name == "block_shape":
        return [2] * (rank - 2) if rank > 2 else [1]
    if name == "crops":
        return [[0, 0]] * (rank - 2)
    if name == "rank":
        return rank
    if name in ("thresholds", "value_range"):
        return [0.5] if name == "thresholds" else [0.0, 1.0]
    if name in ("sizes", "rates"):  # patches of an image batch
        return [1, 2, 2, 1] if name == "sizes" else [1, 1, 1, 1]
    if name == "pooling_ratio":
        return [1.0, 1.44, 1.73, 1.0]
    if name == "partitions":
        return placeholder([rows], tf.int32)
    if name == "sequence_length" and params & RNN_CELLS:  # an RNN's usual call: none
        raise NoArgument("an RNN's usual call gives no sequence_length")
    if name == "sequence_length":  # a [time, batch, classes] sequence's batch
        return placeholder([shape[1] if rank == 3 else rows], tf.int32)
    if name in ("filter_sizes", "input_sizes"):
        return [3, 3, shape[-1], 2] if name == "filter_sizes" else [d or 2 for d in shape]
    if name == "out_backprop":  # a SAME convolution's output: two channels, or two per
        return placeholder([*shape[:-1], 2 * shape[-1] if "depthwise" in function else 2])
    if name == "diagonals":  # compact tridiagonal: [3, M]
        return placeholder([3, shape[-1]])
    if name == "image_size":
        return [d or 2 for d in shape[1:]]
    if name == "bounding_boxes":
        return placeholder([1, 1, 4])
    if name == "T":
        return tf.quint8
    if name == "tf_type":
        return dtype
    if name == "key":
        return [1, 2]
    if name == "pred":
        return placeholder([], tf.bool)
    if name in ("true_fn", "false_fn", "f"):
        tensor = placeholder()
        if name != "f":
            return callable_of(tf, call, lambda *args: tensor * 2)

        def f(x: Any) -> Any:  # one named parameter: custom_gradient reads f's signature
            with recorded(tf, call):
                return x * 2
        return f
    if name in ("variance", "per_example_loss", "log_input", "regularization_loss",
                "frequency_weights", "self", "audio"):
        return placeholder([rows, 1] if name == "audio" else shape)
    if name in ("depthwise_filter", "pointwise_filter"):  # separable: 3x3, then 1x1
        return placeholder([3, 3, shape[-1], 1] if name.startswith("depth")
                           else [1, 1, shape[-1], 2])
    if name == "window_shape":
        return [2] * (rank - 2)
    if name == "pooling_type":
        return "MAX"
    if name == "ksizes" and "sizes" not in params:  # TF 1's name of sizes
        return [1] + [2] * (rank - 2) + [1]
    if name in ("jpeg_quality", "sample_rate", "vocab_size", "dimension"):
        return {"jpeg_quality": 50, "sample_rate": 8000, "vocab_size": 3}.get(name, 1)
    if name == "default_value":
        return tf.zeros([], dtype)
    if name == "to_retain":  # one per value of a sparse tensor
        return placeholder([None], tf.bool)
    if name == "type":
        return tf.int32 if dtype.size == 4 else tf.uint8
    if name in ("shape_x", "shape_y"):
        return [rows, 1] if name == "shape_x" else [1, rows]
    if name == "crop_window":
        return [0, 0, 2, 2]
    if name == "offsets":  # extract_glimpse: a centre per image
        return placeholder([rows, 2])
    if name == "ranks":
        return [rank]
    if name in ("lengths", "seq_lengths", "seq_length", "box_indices"):  # one per row
        return placeholder([rows], tf.int32)
    if name in ("crop_size", "newshape"):
        return [2, 2] if name == "crop_size" else [-1]
    if name in ("slice_spec", "pad_width"):  # tensor[0:1]; a pad of one on every side
        return (slice(0, 1),) if name == "slice_spec" else [[1, 1]] * rank
    if name == "data_format":  # channels last, by rank
        return {3: "NWC", 4: "NHWC", 5: "NDHWC"}.get(rank, "NHWC")
    if name == "branch_index":
        return placeholder([], tf.int32)
    if name in ("branch_fns", "loop_vars"):  # switch_case's branches, a loop's variables
        tensor = placeholder()
        return [callable_of(tf, call, lambda: tensor * 2),
                callable_of(tf, call, lambda: tensor * 3)] if name == "branch_fns" else [tensor]
    if name == "cond":  # while_loop(cond, body, loop_vars)
        return callable_of(tf, call, lambda *args: tf.less(
            tf.reduce_sum(tf.cast(args[0], tf.float32)), 10.0))
    if name == "body":
        return callable_of(tf, call, lambda *args: [a * 2 for a in args])
    if name == "uniform_sampler":  # general_dropout's: a shape to uniform samples
        def sampler(shape: Any, *args: Any, **kwargs: Any) -> Any:
            with recorded(tf, call):
                return tf.random.uniform(shape)
        return sampler
    if name == "pred_fn_pairs":
        tensor = placeholder()
        return [(placeholder([], tf.bool), callable_of(tf, call, lambda: tensor * 2))]
    if name in ("inp", "Tout"):  # py_function(func, inp, Tout)
        return [placeholder()] if name == "inp" else dtype
    if name == "record_defaults":
        return [[0.0]]
    if name == "unigrams":
        return [1.0] * 4
    if name in RNN_CELLS:  # dynamic_rnn's, static_rnn's, bidirectional_dynamic_rnn's
        return RnnCell(tf, call)
    raise NoArgument(f"no generated argument for parameter {name!r}")
